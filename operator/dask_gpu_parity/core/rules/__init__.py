"""The parity rules (docs/findings.md), one module per concern, run in a fixed order.

Every rule reads a :class:`~.context.Context` (the cluster's view, the policy, the inventory) and
returns findings, writing safe fixes into the view's patched dicts.
"""

from __future__ import annotations

from dask_gpu_parity.core.findings import Finding
from dask_gpu_parity.core.policy import Placement

from .constraints import worker_constraints
from .context import Context
from .dra import sources_disagree
from .environment import environment
from .gpu import scheduler_gpu
from .image import job_runner_image, scheduler_image
from .pinning import pin_driver_class, worker_nodes
from .schedulable import schedulable
from .verifier import verifier
from .visible import cpu_containers_see_gpus

__all__ = ["Context", "cluster_parity"]


def cluster_parity(ctx: Context) -> list[Finding]:
    """Run every scheduler rule on a GPU DaskCluster or DaskJob, fixing the view in place."""
    findings = scheduler_gpu(ctx) + scheduler_image(ctx) + job_runner_image(ctx)
    findings += environment(ctx)
    findings += cpu_containers_see_gpus(ctx)
    pinned = None
    if ctx.inventory is not None:  # where the workers can go as written, before any pin
        findings += sources_disagree(ctx, ctx.inventory, worker_nodes(ctx, ctx.inventory))
    if ctx.policy.placement.strategy is not Placement.NONE:
        findings += worker_constraints(ctx)
        if ctx.inventory is not None:
            pin_findings, pinned = pin_driver_class(ctx, ctx.inventory)
            findings += pin_findings
    findings += verifier(ctx, pinned)
    if ctx.inventory is not None:
        explained = any(f.code == "DGP020" for f in findings)
        findings += schedulable(ctx, ctx.inventory, explained=explained)
    return findings
