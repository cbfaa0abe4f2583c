"""DGP015: a GPU worker group joins a cluster whose scheduler has a GPU."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dask_gpu_parity.core.findings import Finding, Severity
from dask_gpu_parity.core.gpu import gpu_requests, protocol
from dask_gpu_parity.core.patch import pointer
from dask_gpu_parity.core.plain import get_in
from dask_gpu_parity.core.policy import Policy
from dask_gpu_parity.core.resources import DaskResource, view

__all__ = ["worker_group"]


def worker_group(
    patched: Mapping[str, Any], group: DaskResource, cluster: Mapping[str, Any], policy: Policy
) -> list[Finding]:
    """Report a GPU DaskWorkerGroup whose DaskCluster's scheduler has no GPU."""
    cluster_view = view(cluster)
    if cluster_view is None or cluster_view.scheduler_path is None:
        return []
    scheduler = get_in(cluster, cluster_view.scheduler_path)
    if gpu_requests(scheduler):
        return []
    ucx = protocol(scheduler, get_in(patched, group.worker_path or ())) == "ucx"
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
