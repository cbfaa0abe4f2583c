"""DGP013, DGP022, DGP023, DGP026: nodes can take the scheduler and the workers, labelled.

Exactly one error explains a placement failure: no usable node takes the workers (DGP022), no
class they reach runs the image's CUDA (DGP020, in ``pinning``), or no usable node of their class
takes the scheduler (DGP013). Usable means Ready, not cordoned, and the pod tolerates the node's
taints (with the ExtendedResourceToleration setting). Never a silent pass. When they can, their
GPUs must also be enough for every worker (DGP026, in ``capacity``). Where the workers reach no
node at all, DGP022 alone speaks: no word on driver labels of nodes they cannot use.
"""

from __future__ import annotations

from dask_gpu_parity.core.cuda import Fit, fit
from dask_gpu_parity.core.findings import Finding
from dask_gpu_parity.core.inventory import Inventory, Nodes
from dask_gpu_parity.core.plain import as_map
from dask_gpu_parity.core.rules.capacity import capacity
from dask_gpu_parity.core.rules.context import Context
from dask_gpu_parity.core.rules.pinning import worker_nodes

__all__ = ["schedulable"]


def schedulable(ctx: Context, inventory: Inventory, *, explained: bool) -> list[Finding]:
    """DGP022 or DGP013 when the workers or the scheduler fit no usable node; DGP023, DGP026.

    Args:
        ctx: the evaluation.
        inventory: the GPU nodes.
        explained: a placement error (DGP020) was already reported; add no second one.
    """
    workers = worker_nodes(ctx, inventory)
    findings = _unlabelled(ctx, inventory, workers)
    if explained:
        return findings
    if not workers:
        return [*findings, _no_worker_node(ctx, inventory)]
    cuda, ert = ctx.view.cuda, ctx.extended_tolerations
    scheduler = ctx.view.scheduler
    fitting = inventory.fitting(scheduler.spec, extended_tolerations=ert)
    if cuda is None:
        home = bool(fitting)
    else:  # a node of a class that cannot run the image is no home either
        qualifies = any(fit(dc, cuda) is not Fit.NO for dc in inventory.classes(fitting))
        home = qualifies or bool(inventory.unlabelled(fitting))
    if home:
        return findings + capacity(ctx, inventory, workers, fitting)
    selector = as_map(scheduler.spec.get("nodeSelector"))
    shown = ", ".join(f"{k}={v}" for k, v in selector.items()) or "none"
    classes = sorted(inventory.classes(workers))
    where = f" (the workers run on {'; '.join(map(str, classes))})" if classes else ""
    runs = f" and running {cuda}" if cuda is not None else ""
    return [
        *findings,
        Finding.of(
            "DGP013",
            scheduler.ptr,
            f"No node can take the scheduler: none of the {inventory.size} GPU nodes is "
            f"usable{runs} and matches its nodeSelector ({shown}), affinity, tolerations and GPU "
            f"request{where}; the pod would stay Pending and KubeCluster would wait forever. Add "
            "such nodes or change the scheduler pool",
        ),
    ]


def _no_worker_node(ctx: Context, inventory: Inventory) -> Finding:
    """DGP022: the workers' pods would stay Pending; say what keeps them off the GPU nodes."""
    worker = ctx.view.worker
    resource = ctx.view.worker_gpus[0].resource
    out = inventory.out_of_service()
    tolerations = worker.spec.get("tolerations")
    taints = sorted(
        {
            f"{key}={value}:{effect}" if value else f"{key}:{effect}"
            for key, value, effect in inventory.blocking_taints()
        }
    )
    hints = []
    if taints:
        ert = "on" if ctx.extended_tolerations else "off"
        listed = len(tolerations) if isinstance(tolerations, list) else 0
        hints.append(
            f"taints {', '.join(taints)}; the workers list {listed} toleration(s), "
            f"ExtendedResourceToleration assumed {ert}"
        )
    if out:
        hints.append(f"cordoned or NotReady: {', '.join(out)}")
    detail = "; ".join(hints) or "nodeSelector, affinity or allocatable GPUs rule them all out"
    return Finding.of(
        "DGP022",
        worker.ptr,
        f"No node can take the workers: none of the {inventory.size} GPU nodes is usable, "
        f"matches their nodeSelector and affinity and has allocatable {resource} ({detail}); "
        "the worker pods would stay Pending. Add tolerations for the GPU nodes' taints, fix the "
        "selector, or add nodes",
    )


def _unlabelled(ctx: Context, inventory: Inventory, workers: Nodes) -> list[Finding]:
    """DGP023: GPU nodes the workers reach carry no driver labels, so parity was not proven."""
    found = inventory.unlabelled(workers)  # less nodes whose two sources disagree: DGP028's
    unlabelled = Nodes((s, m) for s, m in found.parts if not s.representative.conflict)
    if not unlabelled:
        return []
    provider = inventory.provider
    pools = sorted({pool.pool for pool in inventory.pools(unlabelled)}) if provider else []
    named = f" in {provider.name} node pools {', '.join(pools)}" if provider and pools else ""
    not_checked = f", and whether they run {ctx.view.cuda}," if ctx.view.cuda else ""
    return [
        Finding.of(
            "DGP023",
            ctx.view.scheduler.ptr,
            f"{len(unlabelled)} GPU node(s){named} carry no GPU Feature Discovery driver labels "
            f"(nvidia.com/cuda.driver-version.full): the scheduler's driver and CUDA version"
            f"{not_checked} could not be checked there. Install GPU Feature Discovery (the GPU "
            "Operator deploys it), or name the scheduler's pool in the DaskGPUPolicy "
            "(spec.scheduler.nodeSelector)",
        )
    ]
