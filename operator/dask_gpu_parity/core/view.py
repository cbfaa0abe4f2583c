"""The typed view of a GPU Dask cluster that every parity rule reads.

:func:`cluster_view` resolves, once, where the scheduler, worker and job-runner pod specs and
their working containers are, with their JSON pointers, the workers' GPU requests, the CUDA
version their image needs, and the protocol. The view's dicts are the *patched* copy that
``evaluate`` owns: a rule that fixes something writes there, and the engine diffs the result
against the original.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .cuda import CudaNeed, need
from .deviceclasses import NVIDIA_CLASSES, DeviceClasses
from .gpu import GpuRequest, Protocol, admitted_gpus, gpu_requests
from .patch import pointer
from .plain import get_in
from .podfacts import ContainerFacts, PodFacts, Pods, pod_facts
from .resources import DaskResource

__all__ = ["ClusterView", "PodView", "cluster_view"]


@dataclass(frozen=True)
class PodView:
    """One pod spec of the resource and the container in it that does the work.

    ``spec`` and ``container`` are the patched copy's, which rules fix; ``written`` and
    ``facts`` are the pod and the container as written, read once for every rule.
    """

    spec: dict[str, Any]
    ptr: str  # JSON pointer of the pod spec
    index: int  # of the working container in ``containers``
    container: dict[str, Any]
    written: PodFacts
    facts: ContainerFacts  # the working container's, as written
    classes: DeviceClasses = NVIDIA_CLASSES  # whose extended-resource names are GPUs

    @property
    def container_ptr(self) -> str:
        """JSON pointer of the working container."""
        return f"{self.ptr}/containers/{self.index}"

    def gpu_requests(self) -> list[GpuRequest]:
        """The working container's GPUs as they are now (rules may have added some).

        Only what the API server admits counts, and only on this container: a sidecar's GPU is
        not the scheduler's, and a fractional or request-only GPU gets no Pod at all.
        """
        return admitted_gpus(self.container, self.index, self.classes)


@dataclass(frozen=True)
class ClusterView:
    """A GPU DaskCluster or DaskJob, resolved for the rules."""

    resource: DaskResource
    scheduler: PodView
    worker: PodView
    job_runner: PodView | None
    worker_gpus: tuple[GpuRequest, ...]  # never empty: CPU-only clusters have no view
    protocol: Protocol
    cuda: CudaNeed | None  # the CUDA version the workers' image needs, when it can be told
    replicas: int = 1  # the workers' spec.worker.replicas (the CRD's default: 1)
    classes: DeviceClasses = NVIDIA_CLASSES  # the DeviceClasses GPU names were read with

    @property
    def worker_image(self) -> str | None:
        """The workers' image, when they name one."""
        image = self.worker.container.get("image")
        return image if isinstance(image, str) and image else None


def cluster_view(
    patched: dict[str, Any],
    dask: DaskResource,
    classes: DeviceClasses = NVIDIA_CLASSES,
    pods: Pods | None = None,
) -> ClusterView | None:
    """The view of a GPU cluster or job, ``None`` when its pod specs are malformed.

    Malformed input has no view: the schema rule has already said what is wrong. ``classes``:
    the DeviceClasses whose extended-resource names are GPUs. ``pods``: the facts of the pods as
    written, when the caller has them (they may differ from ``patched`` in quoted quantities
    only); else they are read from ``patched``.
    """
    if dask.scheduler_path is None or dask.worker_path is None:
        return None
    pods = pods or pod_facts(patched, dask, classes)
    if pods.scheduler is None or pods.worker is None:
        return None
    worker_gpus = tuple(pods.worker.gpus)
    if not worker_gpus:
        return None
    if any(g.quantity.__class__ is not str for g in worker_gpus):  # quoted in ``patched``
        worker_gpus = tuple(gpu_requests(get_in(patched, dask.worker_path), classes))
        if not worker_gpus:  # a number too small to count once quoted (1e-255 is "0")
            return None
    scheduler = _pod(patched, pods.scheduler, pods.scheduler.scheduler(), classes)
    wanted = worker_gpus[0].container
    working = next((c for c in pods.worker.containers if c.position >= wanted), None)
    worker = _pod(patched, pods.worker, working, classes)
    if scheduler is None or worker is None:
        return None
    runner = (
        _pod(patched, pods.job_runner, pods.job_runner.primary(), classes)
        if pods.job_runner is not None
        else None
    )
    return ClusterView(
        resource=dask,
        scheduler=scheduler,
        worker=worker,
        job_runner=runner,
        worker_gpus=worker_gpus,
        protocol="ucx" if pods.scheduler.ucx() or pods.worker.ucx() else "tcp",
        cuda=need(patched, worker.container),
        replicas=_replicas(get_in(patched, (*dask.worker_path[:-1], "replicas"))),
        classes=classes,
    )


def _replicas(value: Any) -> int:
    """``replicas`` as the CRD types it (an integer, default 1); else 1 (the schema says why)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 1


def _pod(
    patched: dict[str, Any],
    written: PodFacts,
    working: ContainerFacts | None,
    classes: DeviceClasses,
) -> PodView | None:
    spec = get_in(patched, written.path)
    if not isinstance(spec, dict) or working is None:
        return None
    container = spec["containers"][working.position]
    if not isinstance(container, dict):
        return None
    return PodView(
        spec, pointer(*written.path), working.position, container, written, working, classes
    )
