"""DGP026: the nodes the workers can reach have GPUs for all of them, and for the scheduler.

Counted per node, as kube-scheduler places pods: a node with ``a`` allocatable units takes
``floor(a / g)`` workers that ask for ``g`` each. The scheduler's own GPU counts against the
workers' when it can land only on their nodes (the same class, no pool of its own); the dask
operator creates the scheduler first, so it is the workers that would stay Pending.
"""

from __future__ import annotations

from decimal import Decimal

from dask_gpu_parity.core.findings import Finding, Severity
from dask_gpu_parity.core.inventory import Inventory, Nodes, gpu_demand
from dask_gpu_parity.core.rules.context import Context

__all__ = ["capacity"]


def capacity(ctx: Context, inventory: Inventory, workers: Nodes, scheduler: Nodes) -> list[Finding]:
    """DGP026 when fewer workers fit than ``replicas`` (an error when none does).

    Args:
        ctx: the evaluation.
        inventory: the GPU nodes.
        workers: the usable nodes that can take a worker (``fitting``).
        scheduler: the usable nodes that can take the scheduler (``fitting``).
    """
    resource = ctx.view.worker_gpus[0].resource
    each = gpu_demand(ctx.view.worker_gpus).get(resource, Decimal(0))  # rules never change it
    replicas = ctx.view.replicas
    if each <= 0 or replicas <= 0 or not workers:
        return []
    overlap = inventory.overlap(workers, scheduler, resource)
    room = sum((n * int(units // each) for (units, _), n in overlap.groups.items()), 0)
    shared = [units for units, both in overlap.groups if both]
    taken, own = 0, Decimal(0)
    if shared and not overlap.elsewhere:  # the scheduler may take one of their GPUs
        own = gpu_demand(ctx.view.scheduler.gpu_requests()).get(resource, Decimal(0))
        taken = min(int(units // each) - int((units - own) // each) for units in shared)
    fit = room - taken
    if fit >= replicas:
        return []
    nodes = sum(overlap.groups.values())
    beside = f", and the scheduler {own} on the same nodes" if taken else ""
    which = "beside the scheduler " if taken else ""
    return [
        Finding.of(
            "DGP026",
            ctx.view.worker.ptr,
            f"Not enough {resource} for the workers: {replicas} worker(s) ask for {each} each"
            f"{beside}, and the {nodes} usable GPU node(s) they can reach have room for "
            f"{max(fit, 0)} {which}(ExtendedResourceToleration assumed "
            f"{'on' if ctx.extended_tolerations else 'off'}); {replicas - max(fit, 0)} worker "
            "pod(s) would stay Pending. Let the workers reach more nodes (tolerations for the "
            "GPU nodes' taints, a wider nodeSelector), add nodes, or lower spec.worker.replicas",
            severity=Severity.ERROR if fit <= 0 else None,
        )
    ]
