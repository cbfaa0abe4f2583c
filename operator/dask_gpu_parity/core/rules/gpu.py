"""DGP001/DGP002: the scheduler requests one unit of the workers' GPU resource."""

from __future__ import annotations

from typing import Any

from dask_gpu_parity.core.findings import Finding, Severity

from .context import Context

__all__ = ["scheduler_gpu"]


def scheduler_gpu(ctx: Context) -> list[Finding]:
    """The scheduler gets the workers' GPU resource (or the policy's), or is reported."""
    scheduler = ctx.view.scheduler
    scheduler_gpus = scheduler.gpu_requests()
    resources_ptr = f"{scheduler.container_ptr}/resources"
    if scheduler_gpus:
        if ctx.gpu_resource in {r.resource for r in scheduler_gpus}:
            return []
        found = ", ".join(sorted({r.resource for r in scheduler_gpus}))
        return [
            Finding.of(
                "DGP002",
                resources_ptr,
                f"Scheduler requests {found} while parity expects {ctx.gpu_resource}: "
                "make sure it has the workers' driver and CUDA version, or set "
                "spec.scheduler.gpuResource in the DaskGPUPolicy",
            )
        ]
    count = str(ctx.policy.scheduler_gpu_count)
    why = (
        "under UCX, GPU buffers go through the scheduler"
        if ctx.ucx
        else "under TCP the scheduler still unpickles task graphs holding GPU objects"
    )
    worker_gpus = ctx.view.worker_gpus
    sections = ["limits"] + (
        ["requests"] if any(r.section == "requests" for r in worker_gpus) else []
    )
    fixable = _set_resources(scheduler.container, sections, ctx.gpu_resource, count)
    return [
        Finding.of(
            "DGP001",
            resources_ptr,
            f"Scheduler requests no GPU while the workers request {worker_gpus[0].resource}: "
            f'{why} and fails without CUDA; give it {ctx.gpu_resource}: "{count}"',
            severity=Severity.ERROR if ctx.ucx else ctx.policy.tcp_severity,
            fixable=fixable,
        )
    ]


def _set_resources(container: dict[str, Any], sections: list[str], name: str, value: str) -> bool:
    if container.get("resources") is None:  # absent, or null (which the API drops)
        container["resources"] = {}
    resources = container["resources"]
    if not isinstance(resources, dict):
        return False
    for section in sections:
        if resources.get(section) is None:
            resources[section] = {}
        if not isinstance(resources[section], dict):
            return False
    for section in sections:
        resources[section][name] = value
    return True
