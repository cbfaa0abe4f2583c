"""Drift: a running GPU cluster whose scheduler Deployment lacks parity.

The dask operator builds the scheduler Deployment once, from the DaskCluster as admitted. A
cluster created before dask-gpu-parity was installed, or while its webhook was down, keeps a
scheduler without parity. This module compares the Deployment's pod template with what
``evaluate`` would have made of it, and remembers what it already reported.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

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
        result = evaluate(synthetic, policy, inventory, device_classes=classes)
        key = (namespace, str(as_map(cluster.get("metadata")).get("name", "")))
        current = tuple(f for f in result.findings if f.code not in _NOT_DRIFT)
        if gpu_requests(as_map(as_map(spec.get("worker")).get("spec")), classes or NVIDIA_CLASSES):
            self._findings[key] = current
        else:
            self._findings.pop(key, None)
        findings = tuple(f for f in current if f.severity is Severity.ERROR or f.fixable)
        self._mark(key, drifted=bool(findings))
        if not findings:
            self._seen.pop(key, None)
            return None
        fixed = result.patched["spec"]["scheduler"]["spec"]
        ops = [{**op, "path": "/spec/template/spec" + op["path"]} for op in diff(template, fixed)]
        generation = meta.get("generation"), meta.get("uid")
        new = self._seen.get(key) != generation
        self._seen[key] = generation
        return Report(namespace, key[1], name, findings, ops or None, new)

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
