"""Where the Pods of a DaskCluster landed, and with what GPU: rows for tables and asserts."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from kubernetes import client

from .objects import name_of, present
from .pools import POOL_LABEL

__all__ = ["PodPlacement", "format_table", "placements", "wait_for_placements"]

_GPU_PREFIXES = ("nvidia.com/gpu", "nvidia.com/mig-")


@dataclass(frozen=True)
class PodPlacement:
    """One Dask Pod: its component, node, the node's GPU labels and the Pod's GPU request."""

    component: str
    pod: str
    phase: str
    node: str
    pool: str
    gpu_product: str
    driver: str
    cuda: str
    gpu_request: str
    image: str
    node_selector: dict[str, str]
    tolerations: tuple[str, ...]
    reason: str = ""  # why a Pod is not scheduled (the PodScheduled condition's message)

    @property
    def requests_gpu(self) -> bool:
        """Whether any container asks for a GPU or MIG slice."""
        return self.gpu_request != "-"


def _gpu_request(pod: client.V1Pod) -> str:
    asks: list[str] = []
    for container in present(pod.spec, "Pod spec").containers:
        res = container.resources
        limits = (res.limits if res else None) or {}
        requests = (res.requests if res else None) or {}
        for key, value in {**requests, **limits}.items():
            if key.startswith(_GPU_PREFIXES):
                asks.append(f"{key}={value}")
    return ",".join(sorted(set(asks))) or "-"


def _unscheduled_reason(pod: client.V1Pod) -> str:
    for cond in present(pod.status, "Pod status").conditions or []:
        if cond.type == "PodScheduled" and cond.status != "True":
            return f"{cond.reason}: {cond.message}"
    return ""


def placements(api: client.ApiClient, namespace: str, cluster: str) -> list[PodPlacement]:
    """Scheduler first, then workers (by name), for DaskCluster ``cluster`` in ``namespace``."""
    core = client.CoreV1Api(api)
    pods = core.list_namespaced_pod(
        namespace, label_selector=f"dask.org/cluster-name={cluster}"
    ).items
    node_labels: dict[str, dict[str, str]] = {}
    rows = []
    for pod in pods:
        spec = present(pod.spec, "Pod spec")
        node = spec.node_name or ""
        if node and node not in node_labels:
            node_labels[node] = present(core.read_node(node).metadata, "Node metadata").labels or {}
        labels = node_labels.get(node, {})
        rows.append(
            PodPlacement(
                component=(present(pod.metadata, "Pod metadata").labels or {}).get(
                    "dask.org/component", "?"
                ),
                pod=name_of(pod),
                phase=present(pod.status, "Pod status").phase or "",
                node=node or "(pending)",
                pool=labels.get(POOL_LABEL, "-"),
                gpu_product=labels.get("nvidia.com/gpu.product", "-"),
                driver=labels.get("nvidia.com/cuda.driver-version.full", "-"),
                cuda=labels.get("nvidia.com/cuda.runtime-version.full", "-"),
                gpu_request=_gpu_request(pod),
                image=", ".join(c.image or "" for c in spec.containers),
                node_selector=dict(spec.node_selector or {}),
                tolerations=tuple(
                    f"{t.key}:{t.effect or '*'}" for t in spec.tolerations or [] if t.key
                ),
                reason=_unscheduled_reason(pod),
            )
        )
    order = {"scheduler": 0, "worker": 1}
    return sorted(rows, key=lambda r: (order.get(r.component, 2), r.pod))


def wait_for_placements(
    api: client.ApiClient,
    namespace: str,
    cluster: str,
    workers: int,
    *,
    timeout: float = 90,
    phase: str = "Running",
    settle_unschedulable: bool = False,
) -> list[PodPlacement]:
    """Wait for one scheduler and ``workers`` worker Pods in ``phase``; return placements.

    With ``settle_unschedulable`` a Pod the scheduler reported Unschedulable counts as
    settled too (for showing a placement that cannot happen, instead of timing out).
    """
    deadline = time.monotonic() + timeout
    while True:
        rows = placements(api, namespace, cluster)
        done = [
            r
            for r in rows
            if r.phase == phase or (settle_unschedulable and r.reason.startswith("Unschedulable"))
        ]
        sched = sum(r.component == "scheduler" for r in done)
        work = sum(r.component == "worker" for r in done)
        if sched >= 1 and work >= workers:
            return rows
        if time.monotonic() > deadline:
            seen = ", ".join(f"{r.pod}={r.phase}@{r.node}" for r in rows) or "no Pods"
            raise TimeoutError(
                f"DaskCluster {namespace}/{cluster}: want 1 scheduler + {workers} workers "
                f"{phase} within {timeout:.0f}s, have {seen}"
            )
        time.sleep(0.5)


_COLUMNS = (
    ("COMPONENT", "component"),
    ("PHASE", "phase"),
    ("NODE", "node"),
    ("POOL", "pool"),
    ("GPU PRODUCT", "gpu_product"),
    ("DRIVER", "driver"),
    ("CUDA", "cuda"),
    ("GPU REQUEST", "gpu_request"),
    ("IMAGE", "image"),
)


def format_table(rows: Sequence[PodPlacement]) -> str:
    """A kubectl-style table of ``rows``, then why any Pod is not scheduled."""
    cells = [[h for h, _ in _COLUMNS]] + [[str(getattr(r, a)) for _, a in _COLUMNS] for r in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(_COLUMNS))]
    lines = [
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in cells
    ]
    lines += [f"  {r.pod} not scheduled: {r.reason}" for r in rows if r.reason]
    return "\n".join(lines)
