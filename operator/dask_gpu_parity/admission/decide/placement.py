"""Drift by placement: the driver class of the nodes a cluster's pods actually run on.

The GPU Operator upgrades drivers node by node (cordon, evict GPU pods, new driver, new GFD
labels, uncordon), so a running cluster can end up with its scheduler on one driver class and
its workers, or some of them, on another, whatever its spec says. Admission cannot see that;
this compares the scheduler pod's node with the worker pods' nodes, by their GFD labels.

Pure: pod placements in, a verdict, an Event message and a repair patch out. The repair pins the
scheduler as admission does: one core function (``core/rules/pins.py``) writes both pins.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dask_gpu_parity.core.inventory import DriverClass
from dask_gpu_parity.core.patch import Operation, diff
from dask_gpu_parity.core.rules import pins

__all__ = ["Mismatch", "PodPlace", "Tracker", "check", "comparable", "repin"]

_SHOWN = 3  # pods named in a message; the rest are counted


@dataclass(frozen=True, order=True)
class PodPlace:
    """Where one pod of the cluster runs."""

    pod: str
    node: str
    driver_class: DriverClass | None  # None: the node has no GFD driver labels (or no GPU)


@dataclass(frozen=True)
class Mismatch:
    """A scheduler whose driver class is not its workers' (all of them)."""

    namespace: str
    cluster: str
    schedulers: tuple[PodPlace, ...]
    workers: tuple[PodPlace, ...]  # workers on labelled GPU nodes

    @property
    def worker_classes(self) -> dict[DriverClass, list[PodPlace]]:
        """Workers by driver class, the largest group first."""
        grouped: dict[DriverClass, list[PodPlace]] = {}
        for worker in self.workers:
            assert worker.driver_class is not None
            grouped.setdefault(worker.driver_class, []).append(worker)
        return dict(sorted(grouped.items(), key=lambda item: (-len(item[1]), item[0])))

    @property
    def target(self) -> DriverClass | None:
        """The class to move the scheduler to: the workers' one, if they share one."""
        classes = self.worker_classes
        return next(iter(classes)) if len(classes) == 1 else None

    @property
    def signature(self) -> tuple[frozenset[DriverClass | None], frozenset[DriverClass]]:
        """What a new Event is posted for: the classes involved, not pod names or counts."""
        return (
            frozenset(s.driver_class for s in self.schedulers),
            frozenset(self.worker_classes),
        )

    def message(self, *, repairing: bool) -> str:
        """The Event message: where each side runs, why it matters and what happens next."""
        sched = self.schedulers[0]
        where = "; ".join(f"{dc} ({_pods(pods)})" for dc, pods in self.worker_classes.items())
        text = (
            f"Scheduler pod {sched.pod} runs on node {sched.node} with {sched.driver_class}, "
            f"but its workers run on {where}: the scheduler's GPU driver and CUDA no longer "
            "match its workers' (a driver upgrade in flight?)"
        )
        target = self.target
        if target is None:
            return text + (
                ". The workers straddle driver classes: nothing is repaired until they run on "
                "one; then restart the scheduler on it"
            )
        if repairing:
            return text + (
                f". Repairing: pinning the scheduler Deployment to {target} restarts the "
                "scheduler and loses its state"
            )
        return text + (
            f". Restart the scheduler on {target} (delete its pod once the upgrade is done, or "
            "pin its Deployment), or allow repair in the DaskGPUPolicy (spec.drift.repair; "
            "restarts the scheduler)"
        )

    def restored(self, driver_class: DriverClass) -> str:
        """The message once scheduler and workers share a class again."""
        return f"Scheduler and workers of DaskCluster {self.cluster} run on {driver_class} again"


def _pods(places: Sequence[PodPlace]) -> str:
    shown = ", ".join(f"{p.pod} on {p.node}" for p in places[:_SHOWN])
    more = f" and {len(places) - _SHOWN} more" if len(places) > _SHOWN else ""
    return f"{len(places)} pod{'s' if len(places) != 1 else ''}: {shown}{more}"


def comparable(schedulers: Iterable[PodPlace], workers: Iterable[PodPlace]) -> bool:
    """Whether a scheduler pod and a worker pod run on labelled GPU nodes (else: no verdict).

    A scheduler pod being replaced (evicted for a driver upgrade, say) leaves the last verdict
    standing until its successor runs somewhere.
    """
    return any(p.driver_class for p in schedulers) and any(p.driver_class for p in workers)


def check(
    namespace: str, cluster: str, schedulers: Iterable[PodPlace], workers: Iterable[PodPlace]
) -> Mismatch | None:
    """A mismatch when the scheduler and its workers run on more than one driver class.

    Only pods on labelled GPU nodes count: a scheduler without a GPU is spec drift (reported
    by ``drift.py``), and CPU worker groups have no driver class to match.
    """
    known_schedulers = tuple(sorted(p for p in schedulers if p.driver_class is not None))
    known_workers = tuple(sorted(p for p in workers if p.driver_class is not None))
    if not known_schedulers or not known_workers:
        return None
    classes = {p.driver_class for p in known_schedulers + known_workers}
    if len(classes) == 1:
        return None
    return Mismatch(namespace, cluster, known_schedulers, known_workers)


def repin(
    template: Mapping[str, Any], target: DriverClass, legacy: bool | None = None
) -> list[Operation]:
    """A JSON Patch for a scheduler Deployment that requires nodes of ``target``.

    The pin is admission's (``core/rules/pins.py``): driver and CUDA expressions (any GFD key)
    already in the required node affinity are replaced, every other expression kept; without
    required terms, one is added. ``legacy``: whether the class's nodes need the legacy GFD keys
    (``pins.legacy_pin`` of the inventory); ``None`` keeps the form of the template's own pin.
    """
    fixed = pins.repinned(template, target, legacy)
    return [{**op, "path": "/spec/template/spec" + op["path"]} for op in diff(template, fixed)]


class Tracker:
    """Mismatched clusters by namespace; a new Event only when the classes involved change."""

    def __init__(self) -> None:
        self._reported: dict[tuple[str, str], Mismatch] = {}
        self._counts: dict[str, int] = {}

    def update(
        self, namespace: str, cluster: str, mismatch: Mismatch | None
    ) -> tuple[bool, Mismatch | None]:
        """Record the latest verdict: (whether it is news, the mismatch it replaced)."""
        key = (namespace, cluster)
        before = self._reported.get(key)
        if mismatch is None:
            if before is None:
                return False, None
            del self._reported[key]
            self._count(namespace, -1)
            return True, before
        self._reported[key] = mismatch
        if before is None:
            self._count(namespace, +1)
            return True, None
        return before.signature != mismatch.signature, before

    def mismatch(self, namespace: str, cluster: str) -> Mismatch | None:
        """The cluster's mismatch now, if it has one."""
        return self._reported.get((namespace, cluster))

    def forget(self, namespace: str, cluster: str) -> None:
        """Drop a cluster that is gone (or opted out) without any news."""
        if self._reported.pop((namespace, cluster), None) is not None:
            self._count(namespace, -1)

    def counts(self) -> dict[str, int]:
        """Mismatched clusters per namespace (namespaces with none left out)."""
        return dict(self._counts)

    def _count(self, namespace: str, delta: int) -> None:
        self._counts[namespace] = self._counts.get(namespace, 0) + delta
        if not self._counts[namespace]:
            del self._counts[namespace]
