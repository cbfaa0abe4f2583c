"""DGP015: a GPU worker group joins a cluster whose scheduler has a GPU."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dask_gpu_parity.core.deviceclasses import NVIDIA_CLASSES, DeviceClasses
from dask_gpu_parity.core.findings import Finding, Severity
from dask_gpu_parity.core.gpu import (
    admitted_gpus,
    gpu_requests,
    protocol,
    refused_gpus,
    scheduler_container,
)
from dask_gpu_parity.core.patch import pointer
from dask_gpu_parity.core.plain import get_in
from dask_gpu_parity.core.policy import Policy
from dask_gpu_parity.core.resources import DaskResource, view

__all__ = ["worker_group"]


def worker_group(
    patched: Mapping[str, Any],
    group: DaskResource,
    cluster: Mapping[str, Any],
    policy: Policy,
    classes: DeviceClasses = NVIDIA_CLASSES,
) -> list[Finding]:
    """Report a GPU DaskWorkerGroup whose DaskCluster's scheduler has no GPU.

    The scheduler's own container must hold a GPU the API server admits (a sidecar's is not the
    scheduler's). ``fix`` cannot resolve this: it never changes a CPU-only DaskCluster, and a
    GPU cluster's scheduler it has already given a GPU. So the message names the fields to set by
    hand, and that the dask operator reads the scheduler spec only when the cluster is created.
    """
    cluster_view = view(cluster)
    if cluster_view is None or cluster_view.scheduler_path is None:
        return []
    scheduler = get_in(cluster, cluster_view.scheduler_path)
    found = scheduler_container(scheduler)
    if found is None:
        return []  # no scheduler container: the cluster's own DGP017
    index, container = found
    if admitted_gpus(container, index, classes) or refused_gpus(container, classes):
        return []  # a refused GPU is the cluster's own DGP024
    ucx = protocol(scheduler, get_in(patched, group.worker_path or ())) == "ucx"
    resource = gpu_requests(get_in(patched, group.worker_path or ()), classes)[0].resource
    limits = pointer(*cluster_view.scheduler_path, "containers", index, "resources", "limits")
    return [
        Finding.of(
            "DGP015",
            pointer("spec", "cluster"),
            f"DaskCluster {cluster_view.name!r} has a scheduler without GPU, so this GPU worker "
            "group would break it (GPU objects reach the scheduler); dask-gpu-parity fix leaves "
            f'a CPU-only DaskCluster as it is: set {resource}: "1" at {limits} of the '
            "DaskCluster by hand (with the workers' image and GPU node placement), then recreate "
            "the DaskCluster, since the dask operator reads its scheduler spec only at creation",
            severity=Severity.ERROR if ucx else policy.tcp_severity,
        )
    ]
