"""``evaluate()``: the one function that decides parity, for the CLI, the webhooks and the watch.

It never mutates its input, never raises on malformed input (the schema rule reports it), only
adds or sets what parity needs, and applying it twice changes nothing.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from . import rules, schema
from .findings import Finding, Severity
from .gpu import gpu_requests, protocol
from .patch import Operation, apply_in_place, diff, pointer, split_pointer
from .placement import Inventory
from .policy import Policy
from .resources import SKIP_ANNOTATION, copy_json, get_in, view

__all__ = ["DEFAULT_POLICY", "Result", "evaluate", "opted_out"]

DEFAULT_POLICY = Policy()
_QUANTITY_PATH = re.compile(
    r"/(?:containers|initContainers)/\d+/resources/(?:limits|requests)/[^/]+$"
)


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


def opted_out(resource: Mapping[str, Any]) -> bool:
    """Whether the resource carries ``gpuparity.dask.org/skip: "true"``."""
    annotations = get_in(resource, ("metadata", "annotations"))
    return (
        isinstance(annotations, Mapping) and str(annotations.get(SKIP_ANNOTATION)).lower() == "true"
    )


def evaluate(
    resource: Any,
    policy: Policy | None = None,
    inventory: Inventory | None = None,
    *,
    cluster: Mapping[str, Any] | None = None,
    schema: bool = True,
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

    Returns:
        The patched resource and the findings about the original.
    """
    policy = policy or DEFAULT_POLICY
    dask = view(resource)
    if dask is None or opted_out(resource):
        return Result(resource, resource)
    worker_gpus = gpu_requests(get_in(resource, dask.worker_path or ()))
    if not worker_gpus:  # CPU-only: reported on, never changed (and never copied)
        found = _schema_findings(resource, dask.kind, fix=False) if schema else []
        return Result(resource, resource, tuple(found))
    patched: dict[str, Any] = copy_json(resource)
    findings = _schema_findings(patched, dask.kind, fix=True) if schema else []
    if dask.scheduler_path is not None:
        findings += rules.cluster_parity(patched, dask, policy, inventory, worker_gpus)
    elif cluster is not None:
        findings += _worker_group(patched, dask.worker_path or (), cluster, policy)
    return Result(resource, patched, tuple(findings))


def _schema_findings(patched: Mapping[str, Any], kind: str, *, fix: bool) -> list[Finding]:
    """Schema issues as findings; in GPU resources, number quantities are quoted in place."""
    findings: list[Finding] = []
    for issue in schema.validate(patched, kind):
        value = _at(patched, issue.path)
        quantity = isinstance(value, int | float) and not isinstance(value, bool)
        if fix and quantity and isinstance(patched, dict) and _QUANTITY_PATH.search(issue.path):
            # _at found the value, so its parent exists: a plain replace applies.
            apply_in_place(
                patched, [{"op": "replace", "path": issue.path, "value": _quantity_string(value)}]
            )
            findings.append(
                Finding.of(
                    "DGP010",
                    issue.path,
                    f"Quantity {value!r} is a number; the Dask CRDs type quantities as strings "
                    f'and the API server rejects it: write "{_quantity_string(value)}"',
                )
            )
        elif issue.pruned:
            findings.append(
                Finding.of(
                    "DGP012",
                    issue.path,
                    f"{issue.message}: the Dask CRDs embed a Kubernetes 1.21 pod schema "
                    "without this field, so it is lost silently; remove it or move it",
                )
            )
        else:
            findings.append(Finding.of("DGP011", issue.path, f"{issue.message}: fix the manifest"))
    return findings


def _quantity_string(value: float) -> str:
    return format(Decimal(str(value)).normalize(), "f")


def _at(document: Any, ptr: str) -> Any:
    node = document
    for segment in split_pointer(ptr):
        if isinstance(node, list) and segment.isdigit() and int(segment) < len(node):
            node = node[int(segment)]
        elif isinstance(node, Mapping) and segment in node:
            node = node[segment]
        else:
            return None
    return node


def _worker_group(
    patched: dict[str, Any],
    worker_path: tuple[Any, ...],
    cluster: Mapping[str, Any],
    policy: Policy,
) -> list[Finding]:
    """A GPU worker group must join a cluster whose scheduler has a GPU (DGP015)."""
    cluster_view = view(cluster)
    if cluster_view is None or cluster_view.scheduler_path is None:
        return []
    scheduler = get_in(cluster, cluster_view.scheduler_path)
    if gpu_requests(scheduler):
        return []
    ucx = protocol(scheduler, get_in(patched, worker_path)) == "ucx"
    return [
        Finding.of(
            "DGP015",
            pointer("spec", "cluster"),
            f"DaskCluster {cluster_view.name!r} has a scheduler without GPU, so this GPU worker "
            "group would break it (GPU objects reach the scheduler); give the cluster's scheduler "
            "a GPU first (dask-gpu-parity fix on the DaskCluster manifest, then recreate it)",
            severity=Severity.ERROR if ucx else policy.tcp_severity,
        )
    ]
