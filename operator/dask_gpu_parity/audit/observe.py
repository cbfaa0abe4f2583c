"""Each Dask resource of a live cluster: its findings, and where its scheduler and workers run.

The findings are admission's (the namespace's policy, the node inventory, schema checks left to
the API server); the rest is observed on the Pods and their nodes. No I/O: the objects as the
API server listed them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dask_gpu_parity.core.deviceclasses import NVIDIA_CLASSES, device_class
from dask_gpu_parity.core.engine import evaluate
from dask_gpu_parity.core.findings import Finding, Severity
from dask_gpu_parity.core.gpu import gpu_requests
from dask_gpu_parity.core.inventory import Inventory
from dask_gpu_parity.core.nodes import GpuNode
from dask_gpu_parity.core.plain import as_map, get_in
from dask_gpu_parity.core.policy import Mode, Policy, PolicyError
from dask_gpu_parity.core.policy_manifest import load
from dask_gpu_parity.core.resources import opted_out, view
from dask_gpu_parity.names import (
    CLUSTER_NAME_LABEL,
    COMPONENT_LABEL,
    SKIP_ANNOTATION,
    VERIFIER_CONTAINER,
)

from .shared import Evaluations, NamespacePolicies

__all__ = ["VERDICTS", "Audited", "ClusterState", "PodSeen", "audit"]

WORKER_GROUP_LABEL = "dask.org/workergroup-name"  # the dask operator's, on worker Pods
PRODUCT_LABEL = "nvidia.com/gpu.product"  # GPU Feature Discovery's
# One word per resource, worst first (docs/operator.md, "Audit").
VERDICTS = ("check-failed", "drift", "findings", "pending", "ok", "no-gpu", "skipped")


@dataclass(frozen=True)
class PodSeen:
    """One scheduler or worker Pod, where it runs and on what."""

    name: str
    role: str  # scheduler, worker
    node: str  # "" while unscheduled
    phase: str
    image: str
    gpu: bool  # its node is a GPU node of the inventory
    driver: str = ""  # the node's driver and CUDA versions and GPU product ("" unknown)
    cuda: str = ""
    product: str = ""
    check: str = "absent"  # the gpu-parity-check init container: passed, failed, running, ...
    check_detail: str = ""

    def as_dict(self) -> dict[str, Any]:
        """The Pod as the JSON report shows it."""
        return {
            "name": self.name,
            "node": self.node,
            "phase": self.phase,
            "image": self.image,
            "gpu": self.gpu,
            "driver": self.driver,
            "cuda": self.cuda,
            "product": self.product,
            "check": self.check,
            "checkDetail": self.check_detail,
        }


@dataclass(frozen=True)
class Audited:
    """One Dask resource: its findings, the policy they were made under, its observed parity."""

    kind: str
    namespace: str
    name: str
    policy: str
    findings: tuple[Finding, ...]
    verdict: str
    reason: str
    schedulers: tuple[PodSeen, ...] = ()
    workers: tuple[PodSeen, ...] = ()
    uid: str = ""


@dataclass
class ClusterState:
    """What audit lists, as the API server answered (``namespaces``: name -> Namespace)."""

    resources: list[Mapping[str, Any]] = field(default_factory=list)
    nodes: list[Mapping[str, Any]] = field(default_factory=list)
    slices: list[Mapping[str, Any]] = field(default_factory=list)
    device_classes: list[Mapping[str, Any]] = field(default_factory=list)
    policies: list[Mapping[str, Any]] = field(default_factory=list)
    namespaces: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    pods: list[Mapping[str, Any]] = field(default_factory=list)


def _check(pod: Mapping[str, Any]) -> tuple[str, str]:
    statuses = as_map(pod.get("status")).get("initContainerStatuses") or []
    for status in statuses:
        if not isinstance(status, Mapping) or status.get("name") != VERIFIER_CONTAINER:
            continue
        state = as_map(status.get("state"))
        last = as_map(as_map(status.get("lastState")).get("terminated"))
        done = as_map(state.get("terminated")) or last
        if done:
            code = done.get("exitCode")
            message = str(done.get("message") or done.get("reason") or "").strip()
            if code == 0 and "terminated" in state:
                return "passed", ""
            return "failed", f"exit {code}" + (f": {message.splitlines()[0]}" if message else "")
        if "running" in state:
            return "running", ""
        return "waiting", str(as_map(state.get("waiting")).get("reason") or "")
    specs = get_in(pod, ("spec", "initContainers")) or []
    named = any(isinstance(c, Mapping) and c.get("name") == VERIFIER_CONTAINER for c in specs)
    return ("waiting", "") if named else ("absent", "")


def _seen(pod: Mapping[str, Any], role: str, gpu_nodes: Mapping[str, GpuNode]) -> PodSeen:
    meta, spec = as_map(pod.get("metadata")), as_map(pod.get("spec"))
    node = str(spec.get("nodeName") or "")
    containers = [c for c in spec.get("containers") or [] if isinstance(c, Mapping)]
    image = str(containers[0].get("image", "")) if containers else ""
    found = gpu_nodes.get(node)
    dc = found.driver_class if found else None
    check, detail = _check(pod)
    return PodSeen(
        name=str(meta.get("name", "")),
        role=role,
        node=node,
        phase=str(as_map(pod.get("status")).get("phase") or "Pending"),
        image=image,
        gpu=found is not None,
        driver=dc.driver if dc else "",
        cuda=dc.cuda if dc else "",
        product=(found.labels.get(PRODUCT_LABEL) or found.dra_product or "") if found else "",
        check=check,
        check_detail=detail,
    )


def _verdict(
    schedulers: Sequence[PodSeen], workers: Sequence[PodSeen], findings: Sequence[Finding]
) -> tuple[str, str]:
    placed = [s for s in schedulers if s.node]
    if not placed:
        return "pending", "no scheduler Pod on a node yet"
    scheduler = next((s for s in placed if s.phase == "Running"), placed[0])
    if scheduler.check == "failed":
        return (
            "check-failed",
            f"gpu-parity-check failed on {scheduler.node}: {scheduler.check_detail}",
        )
    if not scheduler.gpu:
        return "drift", f"scheduler on {scheduler.node}, a node without a GPU"
    running = [w for w in workers if w.node]
    classes = {(w.driver, w.cuda) for w in running if w.gpu}
    if classes and (scheduler.driver, scheduler.cuda) not in classes:
        worker_class = ", ".join(f"driver {d or '?'} / CUDA {c or '?'}" for d, c in sorted(classes))
        return "drift", (
            f"scheduler on driver {scheduler.driver or '?'} / CUDA {scheduler.cuda or '?'}, "
            f"workers on {worker_class}"
        )
    images = {w.image for w in running}
    if images and scheduler.image not in images:
        return "drift", f"scheduler image {scheduler.image}, workers {', '.join(sorted(images))}"
    errors = [f for f in findings if f.severity is Severity.ERROR]
    if errors:
        return "findings", f"{len(errors)} error finding(s) in the spec: {errors[0].code}"
    if not running:
        return "ok", "scheduler on a GPU node; no worker running yet"
    return "ok", "scheduler and workers on one driver class and image"


def _policies(objects: Iterable[Mapping[str, Any]]) -> list[Policy]:
    policies = []
    for obj in objects:
        try:
            policies.append(load(dict(obj)))
        except PolicyError:
            continue  # the operator ignores an invalid policy as well (and logs it)
    return policies


def audit(state: ClusterState) -> list[Audited]:
    """Every Dask resource of ``state``: its findings and its observed parity.

    The inventory, the policies and the device classes are built once; each namespace's policy
    is selected once; resources equal in all but their identity share one evaluation
    (:class:`~dask_gpu_parity.audit.shared.Evaluations`).
    """
    classes = NVIDIA_CLASSES.extend(
        [dc for o in state.device_classes if (dc := device_class(o)) is not None]
    )
    inventory = Inventory.from_nodes(state.nodes, state.slices, classes)
    gpu_nodes = {n.name: n for n in inventory.nodes}
    in_force = NamespacePolicies(_policies(state.policies), state.namespaces)
    evaluations = Evaluations(
        lambda resource, policy, cluster: (
            evaluate(resource, policy, inventory, cluster=cluster, schema=False).findings
        )
    )
    pods: dict[tuple[str, str, str], list[Mapping[str, Any]]] = defaultdict(list)
    for pod in state.pods:
        meta = as_map(pod.get("metadata"))
        labels = as_map(meta.get("labels"))
        key = (str(meta.get("namespace", "")), str(labels.get(CLUSTER_NAME_LABEL, "")))
        pods[(*key, str(labels.get(COMPONENT_LABEL, "")))].append(pod)
    clusters = {
        (str(get_in(r, ("metadata", "namespace"))), str(get_in(r, ("metadata", "name")))): r
        for r in state.resources
        if r.get("kind") == "DaskCluster"
    }
    audited = []
    for resource in state.resources:
        dask = view(resource)
        if dask is None:
            continue
        namespace = dask.namespace_or()
        policy, namespace_skips = in_force.of(namespace)
        cluster_name = dask.name
        if dask.kind == "DaskWorkerGroup":
            cluster_name = str(get_in(resource, ("spec", "cluster")) or "")
            cluster = clusters.get((namespace, cluster_name))
            findings = evaluations.findings(resource, policy, cluster, cluster_name)
        else:
            findings = evaluations.findings(resource, policy)
        schedulers = tuple(
            _seen(p, "scheduler", gpu_nodes) for p in pods[(namespace, cluster_name, "scheduler")]
        )
        workers = tuple(
            _seen(p, "worker", gpu_nodes)
            for p in pods[(namespace, cluster_name, "worker")]
            if dask.kind != "DaskWorkerGroup"
            or get_in(p, ("metadata", "labels", WORKER_GROUP_LABEL)) == dask.name
        )
        if namespace_skips or opted_out(resource):
            verdict, reason = "skipped", f"opted out ({SKIP_ANNOTATION})"
        elif policy.mode is Mode.OFF:
            verdict, reason = "skipped", f"policy {policy.name} is off"
        elif not gpu_requests(get_in(resource, dask.worker_path or ()), classes):
            verdict, reason = "no-gpu", "its workers ask for no GPU"
        else:
            verdict, reason = _verdict(schedulers, workers, findings)
        audited.append(
            Audited(
                kind=dask.kind,
                namespace=namespace,
                name=dask.name,
                policy=policy.name,
                findings=findings,
                verdict=verdict,
                reason=reason,
                schedulers=schedulers,
                workers=workers,
                uid=str(get_in(resource, ("metadata", "uid")) or ""),
            )
        )
    audited.sort(key=lambda a: (a.namespace, a.kind, a.name))
    return audited
