"""DGP017, DGP024, DGP025: pod specs the API server refuses, and GPU workers that ask for no GPU.

The Dask CRDs embed a pod schema and check nothing the Pod API checks beyond it, so a DaskCluster
can be admitted whose scheduler Deployment or worker Pods the dask operator then cannot create.
These rules read every Dask document, GPU or not, and never change it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dask_gpu_parity.core.deviceclasses import NVIDIA_CLASSES, DeviceClasses
from dask_gpu_parity.core.findings import Finding, Severity
from dask_gpu_parity.core.patch import pointer
from dask_gpu_parity.core.podfacts import Pods, pod_facts
from dask_gpu_parity.core.policy import Policy
from dask_gpu_parity.core.resources import DaskResource

__all__ = ["cuda_workers_without_gpu", "refused_pods"]


def refused_pods(
    resource: Mapping[str, Any],
    dask: DaskResource,
    classes: DeviceClasses = NVIDIA_CLASSES,
    pods: Pods | None = None,
) -> list[Finding]:
    """Pod specs with no containers (DGP017) and GPU quantities the API server refuses (DGP024).

    ``pods``: the resource's pod facts, when the caller has them already.
    """
    findings = []
    for pod in (pods or pod_facts(resource, dask, classes)).present():
        role, path, spec = pod.role, pod.path, pod.spec
        if isinstance(spec, Mapping) and spec.get("containers") == []:
            findings.append(
                Finding.of(
                    "DGP017",
                    pointer(*path, "containers"),
                    f"The {role} pod spec has no containers: the API server refuses the "
                    f"{_made_of(role)} the dask operator makes of it (containers: Required value); "
                    f"add the {role} container",
                )
            )
        for key, facts in (("initContainers", pod.init_containers), ("containers", pod.containers)):
            for container in facts:
                for refused in container.refused:
                    at = pointer(
                        *path,
                        key,
                        container.position,
                        "resources",
                        refused.section,
                        refused.resource,
                    )
                    findings.append(
                        Finding.of(
                            "DGP024",
                            at,
                            f"{refused.section}[{refused.resource}] {refused.quantity!r} "
                            f"{refused.reason}: GPUs are whole and cannot be overcommitted, so the "
                            f"API server refuses the {_made_of(role)}; request whole GPUs in "
                            f'limits only (e.g. {refused.resource}: "1"), the request defaults to '
                            "the limit",
                        )
                    )
    return findings


def cuda_workers_without_gpu(
    resource: Mapping[str, Any],
    dask: DaskResource,
    policy: Policy,
    classes: DeviceClasses = NVIDIA_CLASSES,
    pods: Pods | None = None,
) -> list[Finding]:
    """DGP025 for worker containers that run dask-cuda and request no GPU.

    Called for resources whose workers request no GPU: they are GPU workers all the same, getting
    their GPUs from a node's default NVIDIA runtime, which kube-scheduler neither counts nor
    places, and their scheduler's parity cannot be told. As severe as DGP001 when the scheduler
    has no GPU either (or is not in this resource), a warning when it has one. ``pods``: the
    resource's pod facts, when the caller has them already.
    """
    pods = pods or pod_facts(resource, dask, classes)
    if pods.worker is None or dask.worker_path is None:
        return []
    cuda = [c for c in pods.worker.containers if c.runs("cuda", "worker")]
    if not cuda:
        return []
    severity = Severity.ERROR if pods.worker.ucx() else policy.tcp_severity
    scheduler = pods.scheduler.scheduler() if pods.scheduler is not None else None
    if scheduler is not None and scheduler.admitted():
        severity = Severity.WARNING
    return [
        Finding.of(
            "DGP025",
            pointer(*dask.worker_path, "containers", c.position),
            f"Worker container {c.container.get('name', c.position)!r} runs dask-cuda but requests "
            "no GPU: it sees whatever GPUs its node's default runtime exposes, kube-scheduler "
            "neither counts nor places them, and the scheduler's GPU parity cannot be checked; "
            'request its GPUs in limits (e.g. nvidia.com/gpu: "1"), then run dask-gpu-parity fix',
            severity=severity,
        )
        for c in cuda
    ]


def _made_of(role: str) -> str:
    return "scheduler Deployment" if role == "scheduler" else f"{role} Pod"
