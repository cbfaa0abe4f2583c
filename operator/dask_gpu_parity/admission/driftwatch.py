"""The drift watch: every DaskCluster's scheduler against parity, kept current.

Two checks per cluster:

- **spec**: the scheduler Deployment's pod template against what ``evaluate`` would make of it
  (``drift.py``): clusters created before the webhooks, or while they were down;
- **placement**: the driver class of the nodes the scheduler pod and the worker pods actually
  run on (``placement.py``): driver upgrades rolling node by node under a running cluster.

Informers feed three stores here (DaskClusters, scheduler Deployments, Dask pods); nodes,
namespaces and policies come from the operator's state. A change marks the clusters it can
affect, and one task checks marked clusters a slice at a time, so webhooks keep answering:

=========================================================  ====================================
change                                                     clusters checked again
=========================================================  ====================================
a DaskCluster, or its scheduler Deployment's template      that one: spec and placement
a Dask pod bound, moved or gone                            that one: placement
a node's driver class                                      those with pods on it: placement
a namespace's labels or opt-out                            that namespace's
a DaskGPUPolicy                                            those whose policy in force changed
a node shape appears or disappears                         all: spec, at most once per 5 s
a node joins or leaves an existing shape, status updates   none
=========================================================  ====================================

The stores are ``driftstore.py``. A failed ``gpu-parity-check`` gets an Event (``podevents.py``).
Events are named after what they report, so a restarted operator does not post them twice.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any

from dask_gpu_parity.core.policy import Policy

from . import placement, podevents
from .driftstore import (
    CLUSTERS,
    DEPLOYMENTS,
    PLACEMENT,
    PODS,
    SPEC,
    DriftStores,
    Key,
    _Cluster,
    _unpack,
)
from .events import Events
from .nodeindex import NodeChange

__all__ = ["CLUSTERS", "DEPLOYMENTS", "PODS", "DriftWatch"]

log = logging.getLogger("dask_gpu_parity")

_KINDS = (CLUSTERS, DEPLOYMENTS, PODS)
_SLICE_SECONDS = 0.02  # checks run this long, then the event loop serves others
_RESHAPE_SECONDS = 5.0  # node shape changes are coalesced for this long


# Injected by the wiring: patch a scheduler Deployment (JSON Patch).
PatchDeployment = Callable[[str, str, list[dict[str, Any]]], Awaitable[None]]


class DriftWatch(DriftStores):
    """The marks and the checking task of the drift watch, over its stores."""

    def __init__(self, events: Events, patch_deployment: PatchDeployment) -> None:
        super().__init__()
        self.events = events
        self._post = events.post
        self._patch = patch_deployment
        self.state: Any = None  # the OperatorState, given to run()
        self._policy_of: dict[str, Policy] = {}
        self._queue: deque[Key] = deque()
        self._marks: dict[Key, int] = {}
        self._wake = asyncio.Event()
        self._reshape: asyncio.TimerHandle | None = None
        self._repairs: set[asyncio.Task[None]] = set()
        self.checks = 0
        self.first_pass_seconds: float | None = None
        self._listed: set[str] = set()  # resources whose first LIST is complete

    # -- what the operator's state tells -----------------------------------------------------

    def node_changed(self, change: NodeChange) -> None:
        """A node changed: its pods' clusters if its class did; all if the shapes did."""
        if change.before != change.after:
            for key in list(self._on_node.get(change.name, ())):
                self.mark(key, PLACEMENT)
        if change.shapes_changed and self.first_pass_seconds is not None and not self._reshape:
            loop = asyncio.get_running_loop()
            self._reshape = loop.call_later(_RESHAPE_SECONDS, self._reshaped)

    def _reshaped(self) -> None:
        self._reshape = None
        for key in self._clusters:
            self.mark(key, SPEC)

    def namespace_changed(self, namespace: str) -> None:
        """A namespace's labels or opt-out changed."""
        for name in self._by_namespace.get(namespace, ()):
            self.mark((namespace, name), SPEC | PLACEMENT)

    def policies_changed(self) -> None:
        """A policy changed: clusters whose namespace now has another policy in force."""
        if self.state is None:
            return
        for namespace, names in self._by_namespace.items():
            if self._policy_of.get(namespace) != self.state.policy(
                self.state.namespace(namespace)[0]
            ):
                for name in names:
                    self.mark((namespace, name), SPEC | PLACEMENT)

    def listed(self, kind: str) -> None:
        """A resource's LIST is complete: Pods now give placement verdicts."""
        if kind == PODS.kind and kind not in self._listed:
            for key in self._pods_of:
                self.mark(key, PLACEMENT)
        self._listed.add(kind)
        self._wake.set()

    def mark(self, key: Key, what: int) -> None:
        """Check this cluster again (``SPEC``, ``PLACEMENT`` or both)."""
        if key not in self._marks:
            self._queue.append(key)
            self._marks[key] = what
        else:
            self._marks[key] |= what
        self._wake.set()

    # -- checking ----------------------------------------------------------------------------

    async def run(self, state: Any) -> None:
        """Check what is marked, as it arrives; the first pass ends when all is listed and checked.

        Checks start while DaskClusters and Deployments are still being listed (every object
        listed marks its cluster), so the first pass takes about as long as the lists, not the
        lists and then the checks. Placement waits for the Pod list: a verdict from some of a
        cluster's Pods could be wrong.
        """
        self.state = state
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._queue:
                started = time.perf_counter()
                while self._queue and time.perf_counter() - started < _SLICE_SECONDS:
                    key = self._queue.popleft()
                    self._check(key, self._marks.pop(key))
                await asyncio.sleep(0)
            if self.first_pass_seconds is None and self._listed >= {c.kind for c in _KINDS}:
                self.first_pass_seconds = time.monotonic() - state.started
                drifted = sum(self.specs.counts().values())
                log.log(
                    logging.WARNING if drifted else logging.INFO,
                    f"Drift watch: first pass over {len(self._clusters)} DaskClusters done "
                    f"{self.first_pass_seconds:.2f} s after start: {drifted} lack GPU parity "
                    f"(a ParityDrift Event on each), "
                    f"{sum(self.places.counts().values())} run on another driver than their "
                    "workers",
                )

    def _check(self, key: Key, what: int) -> None:
        self.checks += 1
        cluster = self._clusters.get(key)
        labels, namespace_skip = self.state.namespace(key[0])
        if cluster is None or cluster.skip or namespace_skip:
            self.specs.forget(*key)
            self.places.forget(*key)
            return
        policy = self.state.policy(labels)
        self._policy_of[key[0]] = policy
        try:
            if what & SPEC:
                self._check_spec(key, cluster, policy)
            if what & PLACEMENT:
                self._check_placement(key, cluster, policy)
        except Exception:
            log.exception(f"Checking DaskCluster {key[0]}/{key[1]} for drift failed")

    def _check_spec(self, key: Key, cluster: _Cluster, policy: Policy) -> None:
        deployment = self._deployments.get(key)
        if deployment is None:
            self.specs.forget(*key)
            return
        body = {
            "metadata": {
                "namespace": key[0],
                "name": deployment.name,
                "uid": deployment.uid,
                "generation": deployment.generation,
            },
            "spec": {"template": {"spec": _unpack(deployment.blob)}},
        }
        report = self.specs.check(_unpack(cluster.blob), body, policy, self.state.inventory())
        if report is None or not report.new:
            return
        repair = policy.drift.repair and report.repair_patch is not None
        message = report.message(repairing=repair)
        parts = (cluster.uid, deployment.uid, str(deployment.generation), message)
        name = podevents.event_name(key[1], *parts)
        self._post(cluster.ref(key), "Warning", "ParityDrift", message, name=name)
        if self.first_pass_seconds is not None:  # the first pass sums up in one line
            log.warning(message)
        if repair and report.repair_patch:
            self._repair(
                key, cluster, deployment.name, report.repair_patch, "Scheduler Deployment patched"
            )

    def _check_placement(self, key: Key, cluster: _Cluster, policy: Policy) -> None:
        if PODS.kind not in self._listed:
            return  # checked again once every Pod is listed
        schedulers: list[placement.PodPlace] = []
        workers: list[placement.PodPlace] = []
        for name in self._pods_of.get(key, ()):
            pod = self._pods[name]
            place = placement.PodPlace(
                name.partition("/")[2], pod.node, self.state.nodes.driver_class(pod.node)
            )
            (schedulers if pod.component == "scheduler" else workers).append(place)
        if not placement.comparable(schedulers, workers):
            if not self._pods_of.get(key):
                self.places.forget(*key)  # no pod at all: stopped, or not started yet
            return  # a pod being replaced: the last verdict stands
        mismatch = placement.check(key[0], key[1], schedulers, workers)
        news, before = self.places.update(key[0], key[1], mismatch)
        if not news:
            return
        ref = cluster.ref(key)
        if mismatch is None:
            if before is not None:
                now = next(s.driver_class for s in schedulers if s.driver_class)
                text = before.restored(now)
                self._post(ref, "Normal", "ParityDriverRestored", text)
                log.info(f"DaskCluster {key[0]}/{key[1]}: {text}")
            return
        deployment = self._deployments.get(key)
        target = mismatch.target
        repair = policy.drift.repair and target is not None and deployment is not None
        message = mismatch.message(repairing=repair)
        self._post(ref, "Warning", "ParityDriverMismatch", message)
        log.warning(f"DaskCluster {key[0]}/{key[1]}: {message}")
        if repair and deployment is not None and target is not None:
            ops = placement.repin(_unpack(deployment.blob), target)
            if ops:
                self._repair(
                    key, cluster, deployment.name, ops, f"Scheduler Deployment pinned to {target}"
                )

    def _repair(
        self, key: Key, cluster: _Cluster, deployment: str, ops: list[Any], done: str
    ) -> None:
        async def repair() -> None:
            try:
                await self._patch(key[0], deployment, ops)
            except Exception as exc:
                log.error(f"Repairing {key[0]}/{deployment} failed: {exc}")
                self._post(cluster.ref(key), "Warning", "ParityRepairFailed", str(exc))
                return
            self._post(cluster.ref(key), "Normal", "ParityRepaired", done)

        task = asyncio.create_task(repair(), name=f"repair {key[0]}/{deployment}")
        self._repairs.add(task)
        task.add_done_callback(self._repairs.discard)

    def probe_failed(self, failure: podevents.ProbeFailure) -> None:
        """Say why a scheduler pod's GPU check failed: an Event on the pod and its DaskCluster.

        Not for opted-out clusters or namespaces, nor for a failure that ended more than
        ``podevents.HORIZON`` ago (seen when listing after a restart: old news).
        """
        cluster = self._clusters.get((failure.namespace, failure.cluster))
        if (cluster is not None and cluster.skip) or (
            self.state is not None and self.state.namespace(failure.namespace)[1]
        ):
            return
        if not podevents.recent(failure, dt.datetime.now(dt.UTC)):
            return
        for n in podevents.notices(failure, cluster.uid if cluster else None):
            self._post(n.ref, "Warning", n.reason, n.message, name=n.name, field_path=n.field_path)
        log.warning(f"Scheduler pod {failure.namespace}/{failure.pod}: {failure.text()}")

    def figures(self) -> dict[str, Any]:
        """The watch's part of the metrics snapshot (namespaces, not clusters, are walked)."""
        return {
            "drifted": tuple(sorted(self.specs.counts().items())),
            "mismatched": tuple(sorted(self.places.counts().items())),
            "drift_watched": len(self._clusters),
            "drift_pending": len(self._queue),
            "drift_checks": self.checks,
            "drift_first_pass_seconds": self.first_pass_seconds,
            "events": self.events.counts(),
        }
