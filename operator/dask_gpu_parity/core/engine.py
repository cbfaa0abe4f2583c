"""``evaluate()``: the one function that decides parity, for the CLI, the webhooks and the watch.

It never mutates its input, never raises on malformed input (the schema rule reports it), only
adds or sets what parity needs, and applying it twice changes nothing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .deployers import evaluate_deployer
from .deviceclasses import NVIDIA_CLASSES, DeviceClasses
from .findings import Finding
from .inventory import Inventory
from .patch import Operation, diff
from .plain import copy_json
from .podfacts import pod_facts
from .policy import Policy
from .resources import DASK_OPERATOR, opted_out, view
from .rules import Context, cluster_parity
from .rules.dra import unknown_device_classes
from .rules.pods import cuda_workers_without_gpu, refused_pods
from .rules.schema import schema_findings
from .rules.worker_group import worker_group
from .view import cluster_view

__all__ = ["DEFAULT_POLICY", "Result", "evaluate", "opted_out"]

DEFAULT_POLICY = Policy()


@dataclass(frozen=True)
class Result:
    """What ``evaluate`` decided: the patched resource and the findings about the original."""

    original: Mapping[str, Any]
    patched: Any
    findings: tuple[Finding, ...] = field(default=())

    @property
    def patch(self) -> list[Operation]:
        """The JSON Patch from the original to the patched resource."""
        return diff(self.original, self.patched)

    @property
    def changed(self) -> bool:
        """Whether the patched resource differs from the original."""
        return bool(self.patched != self.original)


def evaluate(
    resource: Any,
    policy: Policy | None = None,
    inventory: Inventory | None = None,
    *,
    cluster: Mapping[str, Any] | None = None,
    schema: bool = True,
    device_classes: DeviceClasses | None = None,
    peers: Sequence[Mapping[str, Any]] = (),
) -> Result:
    """Check a Dask resource for parity and compute its fixed version.

    Args:
        resource: any document; non-Dask documents come back unchanged with no findings.
        policy: the policy in force (built-in defaults when ``None``). ``mode`` is the
            adapters' business: ``evaluate`` always reports and always computes the fix.
        inventory: GPU nodes; enables driver-class pinning and the schedulability rule.
        cluster: for a DaskWorkerGroup, its DaskCluster, when known.
        schema: check the document against the Dask CRD schemas. A validating webhook turns
            this off: the API server has validated (and pruned) the object before calling it.
        device_classes: the DRA DeviceClasses whose extended-resource names are GPUs; else the
            inventory's, else NVIDIA's catalogue (``gpu.nvidia.com``, ``mig.nvidia.com``).
        peers: the documents checked with this one; a classic chart's scheduler Deployment
            is judged against its release's worker Deployment among them.

    Returns:
        The patched resource and the findings about the original.
    """
    policy = policy or DEFAULT_POLICY
    dask = view(resource)
    if dask is None or opted_out(resource):
        return Result(resource, resource)
    if dask.deployer != DASK_OPERATOR:  # dask-gateway, the classic chart: the same rules

        def run(equivalent: dict[str, Any]) -> tuple[Any, Sequence[Finding]]:
            judged = evaluate(equivalent, policy, inventory, schema=False, device_classes=classes)
            return judged.patched, judged.findings

        classes = device_classes or (inventory.device_classes if inventory else NVIDIA_CLASSES)
        fixed, found = evaluate_deployer(resource, dask, run, peers)
        return Result(resource, fixed, tuple(found))
    classes = device_classes or (inventory.device_classes if inventory else NVIDIA_CLASSES)
    pods = pod_facts(resource, dask, classes)  # every rule reads these: one pass over the pods
    worker_gpus = pods.worker.gpus if pods.worker is not None else []
    refused = refused_pods(resource, dask, classes, pods)  # the CRD schema admits them; Pods do not
    if not worker_gpus:  # CPU-only: reported on, never changed (and never copied)
        found = schema_findings(resource, dask.kind, fix=False, pods=pods) if schema else []
        unknown = unknown_device_classes(resource, dask, classes)  # maybe GPUs: no DGP025 there
        found += refused + [
            f
            for f in cuda_workers_without_gpu(resource, dask, policy, classes, pods)
            if not any(u.path.startswith(f.path + "/") for u in unknown)
        ]
        found += unknown
        return Result(resource, resource, tuple(found))
    patched: dict[str, Any] = copy_json(resource)
    # Quoting number quantities (DGP010) is all the schema rule changes: the facts of the
    # pods as written still hold for the patched copy (the view reads its quantities again).
    findings = schema_findings(patched, dask.kind, fix=True, pods=pods) if schema else []
    findings += refused
    if dask.scheduler_path is not None:
        resolved = cluster_view(patched, dask, classes, pods)
        if resolved is not None:  # else malformed: the schema rule has said what is wrong
            findings += cluster_parity(Context(resolved, policy, inventory))
    elif cluster is not None:
        findings += worker_group(patched, dask, cluster, policy, classes)
    return Result(resource, patched, tuple(findings))
