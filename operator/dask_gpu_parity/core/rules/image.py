"""DGP003 and DGP016: the scheduler and a DaskJob's runner use the workers' image."""

from __future__ import annotations

from dask_gpu_parity.core.findings import Finding

from .context import Context, copy_or_report

__all__ = ["job_runner_image", "scheduler_image"]


def scheduler_image(ctx: Context) -> list[Finding]:
    """DGP003: the scheduler runs the workers' image (set when it has none)."""
    want = ctx.view.worker.container.get("image")
    scheduler = ctx.view.scheduler
    return copy_or_report(
        scheduler.container,
        scheduler.container_ptr,
        "image",
        want,
        code="DGP003",
        copied=f"Scheduler has no image: set the workers' image {want}",
        differs=lambda have: (
            f"Scheduler image {have} differs from the workers' image {want}: the scheduler "
            "deserializes the workers' objects and needs the same environment; use the same image"
        ),
    )


def job_runner_image(ctx: Context) -> list[Finding]:
    """DGP016: a DaskJob's runner (the client) uses the workers' image."""
    runner, want = ctx.view.job_runner, ctx.view.worker.container.get("image")
    if runner is None or not isinstance(want, str):
        return []
    have = runner.container.get("image")
    if not isinstance(have, str) or have == want:
        return []
    return [
        Finding.of(
            "DGP016",
            f"{runner.container_ptr}/image",
            f"Job runner image {have} differs from the workers' image {want}: the client "
            "pickles the graph that the workers and scheduler unpickle; use the same image",
        )
    ]
