"""DGP001/DGP002: the scheduler requests one unit of the workers' GPU resource."""

from __future__ import annotations

from typing import Any

from dask_gpu_parity.core.findings import Finding, Severity

from .context import Context

__all__ = ["scheduler_gpu"]


def scheduler_gpu(ctx: Context) -> list[Finding]:
    """The scheduler gets the workers' GPU resource (or the policy's), or is reported.

    Only the scheduler's own container counts (a sidecar's GPU is not the scheduler's), and only
    a GPU the API server admits; a refused one is DGP024's, and overwriting it is left to a hand.
    """
    scheduler = ctx.view.scheduler
    if scheduler.facts.refused:  # the first rule: the container is still as written
        return []
    scheduler_gpus = scheduler.facts.admitted()
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
    count = str(ctx.policy.scheduler.gpu_count)
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
            f"Scheduler requests no GPU{_elsewhere(ctx)} while the workers request "
            f"{worker_gpus[0].resource}: {why} and fails without CUDA; give it "
            f'{ctx.gpu_resource}: "{count}"',
            severity=Severity.ERROR if ctx.ucx else ctx.policy.tcp_severity,
            fixable=fixable,
        )
    ]


def _elsewhere(ctx: Context) -> str:
    """Which other containers of the scheduler pod hold a GPU that is not the scheduler's."""
    scheduler = ctx.view.scheduler
    others = [
        repr(c.container.get("name", c.position))
        for c in scheduler.written.containers
        if c.position != scheduler.index and c.admitted()
    ]
    if not others:
        return ""
    name = scheduler.container.get("name", scheduler.index)
    return f" in its container {name!r} (the GPU of {', '.join(others)} is not the scheduler's)"


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
