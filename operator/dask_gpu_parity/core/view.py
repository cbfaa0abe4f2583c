"""The typed view of a GPU Dask cluster that every parity rule reads.

:func:`cluster_view` resolves, once, where the scheduler, worker and job-runner pod specs and
their working containers are, with their JSON pointers, the workers' GPU requests, the CUDA
version their image needs, and the protocol. The view's dicts are the *patched* copy that
``evaluate`` owns: a rule that fixes something writes there, and the engine diffs the result
against the original.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .cuda import CudaNeed, need
from .deviceclasses import NVIDIA_CLASSES, DeviceClasses
from .gpu import (
    GpuRequest,
    Protocol,
    admitted_gpus,
    containers,
    gpu_requests,
    primary_container,
    protocol,
    scheduler_container,
)
from .patch import pointer
from .plain import get_in
from .resources import DaskResource

__all__ = ["ClusterView", "PodView", "cluster_view"]


@dataclass(frozen=True)
class PodView:
    """One pod spec of the resource and the container in it that does the work."""

    spec: dict[str, Any]
    ptr: str  # JSON pointer of the pod spec
    index: int  # of the working container in ``containers``
    container: dict[str, Any]
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
    patched: dict[str, Any], dask: DaskResource, classes: DeviceClasses = NVIDIA_CLASSES
) -> ClusterView | None:
    """The view of a GPU cluster or job, ``None`` when its pod specs are malformed.

    Malformed input has no view: the schema rule has already said what is wrong. ``classes``:
    the DeviceClasses whose extended-resource names are GPUs.
    """
    if dask.scheduler_path is None or dask.worker_path is None:
        return None
    worker_gpus = tuple(gpu_requests(get_in(patched, dask.worker_path), classes))
    if not worker_gpus:
        return None
    scheduler = _pod(patched, dask.scheduler_path, _scheduler_index, classes)
    worker = _pod(patched, dask.worker_path, _from(worker_gpus[0].container), classes)
    if scheduler is None or worker is None:
        return None
    runner = (
        _pod(patched, dask.job_runner_path, _primary_index, classes)
        if dask.job_runner_path
        else None
    )
    return ClusterView(
        resource=dask,
        scheduler=scheduler,
        worker=worker,
        job_runner=runner,
        worker_gpus=worker_gpus,
        protocol=protocol(scheduler.spec, worker.spec),
        cuda=need(patched, worker.container),
        replicas=_replicas(get_in(patched, (*dask.worker_path[:-1], "replicas"))),
        classes=classes,
    )


def _replicas(value: Any) -> int:
    """``replicas`` as the CRD types it (an integer, default 1); else 1 (the schema says why)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 1


def _pod(
    patched: dict[str, Any], path: tuple[Any, ...], index_of: Any, classes: DeviceClasses
) -> PodView | None:
    spec = get_in(patched, path)
    if not isinstance(spec, dict):
        return None
    index = index_of(spec, classes)
    if index is None:
        return None
    container = spec["containers"][index]
    if not isinstance(container, dict):
        return None
    return PodView(spec, pointer(*path), index, container, classes)


def _scheduler_index(spec: Mapping[str, Any], _: DeviceClasses) -> int | None:
    found = scheduler_container(spec)
    return found[0] if found else None


def _from(wanted: int) -> Any:
    """``_primary_index`` for a pod whose first GPU request is known to be at ``wanted``."""

    def index_of(spec: Mapping[str, Any], _: DeviceClasses) -> int | None:
        return next((index for index, _c in containers(spec) if index >= wanted), None)

    return index_of


def _primary_index(spec: Mapping[str, Any], classes: DeviceClasses) -> int | None:
    primary = primary_container(spec, classes)
    return primary[0] if primary else None
