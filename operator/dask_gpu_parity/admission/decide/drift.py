"""Drift: a running GPU cluster whose scheduler Deployment lacks parity.

The dask operator builds the scheduler Deployment once, from the DaskCluster as admitted. A
cluster created before dask-gpu-parity was installed, or while its webhook was down, keeps a
scheduler without parity. This module compares the Deployment's pod template with what
``evaluate`` would have made of it, and remembers what it already reported.

A fleet's clusters are stamped from a few templates, and the dask operator builds the same pod
template from the same scheduler spec whatever the cluster's name, so ``evaluate`` runs once per
distinct (cluster content, Deployment template, policy) while the node inventory and the
DeviceClasses stay the same objects (both are immutable snapshots, replaced on a change).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dask_gpu_parity.core.contentkey import spec_key
from dask_gpu_parity.core.deviceclasses import NVIDIA_CLASSES, DeviceClasses
from dask_gpu_parity.core.engine import evaluate
from dask_gpu_parity.core.findings import Finding, Severity
from dask_gpu_parity.core.gpu import gpu_requests
from dask_gpu_parity.core.inventory import Inventory
from dask_gpu_parity.core.patch import Operation, diff
from dask_gpu_parity.core.plain import as_map
from dask_gpu_parity.core.policy import Policy

__all__ = ["Report", "Tracker"]

# Not drift: the schema's findings, and a verifier from another release (DGP018), which already
# ran before this scheduler started; repairing it would restart every scheduler on an upgrade.
_NOT_DRIFT = ("DGP011", "DGP012", "DGP018")
# Distinct verdicts kept at most, the least recently used dropped first: a fleet's templates fit,
# and a fleet of clusters that are all different holds no more than this many (a few MiB).
_VERDICTS = 512


@dataclass(frozen=True)
class _Verdict:
    """What ``evaluate`` said of one distinct cluster and template, under ``policy``."""

    policy: Policy  # kept alive, so that its id in the key is never another policy's
    current: tuple[Finding, ...]  # every finding but the not-drift ones
    gpu_workers: bool
    findings: tuple[Finding, ...]  # what drift reports: errors and fixable findings
    repair: tuple[Operation, ...]  # JSON Patch for the Deployment


@dataclass(frozen=True)
class Report:
    """What is wrong with one scheduler Deployment."""

    namespace: str
    cluster: str
    deployment: str
    findings: tuple[Finding, ...]
    repair_patch: list[Operation] | None  # JSON Patch for the Deployment, when fixable
    new: bool  # not reported before for this Deployment generation

    def message(self, *, repairing: bool) -> str:
        """The Event message: what lacks parity and what happens next."""
        codes = ", ".join(sorted({f.code for f in self.findings}))
        first = self.findings[0]
        text = f"Scheduler Deployment {self.deployment} lacks GPU parity ({codes}): {first.message}"
        if repairing:
            return (
                text
                + ". Repairing: patching the Deployment restarts the scheduler and loses its state"
            )
        return text + (
            ". Recreate the DaskCluster to fix it (the dask operator never updates the scheduler), "
            "or allow repair in the DaskGPUPolicy (spec.drift.repair; restarts the scheduler)"
        )


class Tracker:
    """Drifted clusters by namespace, reported once per Deployment generation.

    Counts are kept as verdicts change, never recounted: publishing them costs the number of
    namespaces, not of clusters. The last check's findings of each GPU cluster are kept for its
    PolicyReport (:meth:`findings`).
    """

    def __init__(self) -> None:
        self._seen: dict[tuple[str, str], Any] = {}
        self._findings: dict[tuple[str, str], tuple[Finding, ...]] = {}
        self._drifted: set[tuple[str, str]] = set()
        self._counts: dict[str, int] = {}
        self._verdicts: dict[tuple[bytes, int], _Verdict] = {}
        self._world: tuple[object, object] = (None, None)  # inventory and classes of the verdicts
        self.evaluated = 0  # evaluations run (the rest were shared)

    def check(
        self,
        cluster: Mapping[str, Any],
        deployment: Mapping[str, Any],
        policy: Policy,
        inventory: Inventory | None,
        classes: DeviceClasses | None = None,
    ) -> Report | None:
        """A report when the Deployment's scheduler lacks parity, else ``None``."""
        meta = as_map(deployment.get("metadata"))
        namespace, name = str(meta.get("namespace", "")), str(meta.get("name", ""))
        template = as_map(as_map(as_map(deployment.get("spec")).get("template")).get("spec"))
        spec = cluster.get("spec")
        if not isinstance(spec, Mapping) or not isinstance(spec.get("scheduler"), Mapping):
            return None
        # The cluster with the Deployment's template as its scheduler: new dicts on the way
        # down only (evaluate copies what it changes and never changes its input).
        scheduler = {**spec["scheduler"], "spec": template}
        synthetic = {**cluster, "spec": {**spec, "scheduler": scheduler}}
        verdict = self._verdict(synthetic, template, policy, inventory, classes)
        key = (namespace, str(as_map(cluster.get("metadata")).get("name", "")))
        if verdict.gpu_workers:
            self._findings[key] = verdict.current
        else:
            self._findings.pop(key, None)
        findings = verdict.findings
        self._mark(key, drifted=bool(findings))
        if not findings:
            self._seen.pop(key, None)
            return None
        ops = [dict(op) for op in verdict.repair]
        generation = meta.get("generation"), meta.get("uid")
        new = self._seen.get(key) != generation
        self._seen[key] = generation
        return Report(namespace, key[1], name, findings, ops or None, new)

    def _verdict(
        self,
        synthetic: Mapping[str, Any],
        template: Mapping[str, Any],
        policy: Policy,
        inventory: Inventory | None,
        classes: DeviceClasses | None,
    ) -> _Verdict:
        """``evaluate``'s verdict on ``synthetic``, shared with every cluster equal to it."""
        if self._world[0] is not inventory or self._world[1] is not classes:
            self._verdicts.clear()  # another inventory or DeviceClasses: verdicts may differ
            self._world = (inventory, classes)
        key = (spec_key(synthetic), id(policy))
        verdict = self._verdicts.pop(key, None)
        if verdict is not None and verdict.policy is policy:
            self._verdicts[key] = verdict  # the most recently used, last
            return verdict
        self.evaluated += 1
        result = evaluate(synthetic, policy, inventory, device_classes=classes)
        current = tuple(f for f in result.findings if f.code not in _NOT_DRIFT)
        spec = as_map(synthetic.get("spec"))
        workers = as_map(as_map(spec.get("worker")).get("spec"))
        findings = tuple(f for f in current if f.severity is Severity.ERROR or f.fixable)
        repair: tuple[Operation, ...] = ()
        if findings:
            fixed = result.patched["spec"]["scheduler"]["spec"]
            repair = tuple(
                {**op, "path": "/spec/template/spec" + op["path"]} for op in diff(template, fixed)
            )
        verdict = _Verdict(
            policy,
            current,
            bool(gpu_requests(workers, classes or NVIDIA_CLASSES)),
            findings,
            repair,
        )
        if len(self._verdicts) >= _VERDICTS:
            del self._verdicts[next(iter(self._verdicts))]
        self._verdicts[key] = verdict
        return verdict

    def forget(self, namespace: str, cluster: str) -> None:
        """Drop a cluster whose scheduler Deployment is gone (or that opted out)."""
        self._mark((namespace, cluster), drifted=False)
        self._seen.pop((namespace, cluster), None)
        self._findings.pop((namespace, cluster), None)

    def findings(self, namespace: str, cluster: str) -> tuple[Finding, ...] | None:
        """The last check's findings of a GPU cluster (``None``: not checked, or no GPU workers).

        Every finding but the schema's and DGP018, warnings and notes included: what its
        PolicyReport says, where the drift Event names only what needs a new scheduler.
        """
        return self._findings.get((namespace, cluster))

    def drifted(self, namespace: str, cluster: str) -> bool:
        """Whether the cluster was drifted at its last check."""
        return (namespace, cluster) in self._drifted

    def counts(self) -> dict[str, int]:
        """Drifted clusters per namespace (namespaces with none left out)."""
        return dict(self._counts)

    def _mark(self, key: tuple[str, str], *, drifted: bool) -> None:
        if drifted == (key in self._drifted):
            return
        namespace = key[0]
        if drifted:
            self._drifted.add(key)
            self._counts[namespace] = self._counts.get(namespace, 0) + 1
        else:
            self._drifted.discard(key)
            self._counts[namespace] -= 1
            if not self._counts[namespace]:
                del self._counts[namespace]
