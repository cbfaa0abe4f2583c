"""Where the Pods of a DaskCluster landed, and with what GPU: rows for tables and asserts."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from kubernetes import client
from kubernetes.client.exceptions import ApiException

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
    lost = _LostComponents(api, namespace, cluster)
    while True:
        lost.check()
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


class _LostComponents:
    """Hands the dask operator back a DaskCluster whose default worker group it never made.

    dask-kubernetes creates the scheduler Deployment, its Service and the default worker group in
    one kopf handler, run when ``status.phase`` becomes ``Created``. When the worker group's create
    fails on a transient error (an ``httpx.ReadError`` of its shared client, seen under load on 2
    cores), kopf would retry the handler in 60 s, but only while the phase is still ``Created``:
    the Service's status handler has meanwhile set it to ``Running``, so the worker group is never
    made and no worker ever starts. Setting the phase back to ``Created`` runs the handler again
    (each of its steps skips what exists). This is the dask operator's fault, not the code under
    test; it is said on stdout whenever it happens.
    """

    GRACE = 20.0  # seconds the cluster may be without its worker group before it counts as lost

    def __init__(self, api: client.ApiClient, namespace: str, cluster: str) -> None:
        self.custom = client.CustomObjectsApi(api)
        self.core = client.CoreV1Api(api)
        self.namespace, self.cluster = namespace, cluster
        self.since: float | None = None
        self.next_check = 0.0

    def check(self) -> None:
        now = time.monotonic()
        if now < self.next_check:
            return
        self.next_check = now + 5
        if not self._lost():
            self.since = None
            return
        self.since = self.since or now
        if now - self.since < self.GRACE:
            return
        print(
            f"\nDaskCluster {self.namespace}/{self.cluster}: the dask operator lost its components "
            "handler (no default worker group); its status.phase is set back to Created"
        )
        self.custom.patch_namespaced_custom_object(
            "kubernetes.dask.org",
            "v1",
            self.namespace,
            "daskclusters",
            self.cluster,
            {"status": {"phase": "Created"}},
        )
        self.since = None

    def _lost(self) -> bool:
        """The cluster is past ``Created``, its scheduler Service exists, its worker group not."""
        try:
            found = self.custom.get_namespaced_custom_object(
                "kubernetes.dask.org", "v1", self.namespace, "daskclusters", self.cluster
            )
            self.core.read_namespaced_service(f"{self.cluster}-scheduler", self.namespace)
        except ApiException:
            return False  # not made yet, or gone: nothing lost
        body = found if isinstance(found, dict) else {}
        phase = (body.get("status") or {}).get("phase")
        if phase in (None, "Created") or not (body.get("spec") or {}).get("worker"):
            return False
        try:
            self.custom.get_namespaced_custom_object(
                "kubernetes.dask.org",
                "v1",
                self.namespace,
                "daskworkergroups",
                f"{self.cluster}-default",
            )
        except ApiException as exc:
            return bool(exc.status == 404)
        return False


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
