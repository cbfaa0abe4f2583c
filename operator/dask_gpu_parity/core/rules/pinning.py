"""DGP014, DGP020, DGP021: one driver class for scheduler and workers, one that runs the image.

With a node inventory, the driver classes the workers can reach are those of the usable GPU nodes
(Ready, not cordoned, taints tolerated) that fit them. A class qualifies when it runs the
image's CUDA (``core/cuda.py``). When the workers could reach several classes, or a class and
GPU nodes without driver labels, scheduler and workers are pinned to one qualifying class: the
one that runs the image without caveat, then the one with the most allocatable GPUs, then one
not being upgraded by the GPU Operator, then the newest driver. Without GFD labels, a
provider's node pool stands in for the class (one pool, one driver).

A scheduler on a GPU pool of its own (a T4 pool beside A100 workers, as RAPIDS' guide does)
keeps it: only the driver and CUDA version are pinned on it, never the workers' node pool. The
driver returned for the verifier's expectation is one the scheduler's spec pins, never one it
merely happens to reach today. The pin itself is written by :mod:`.pins`, as the drift watch's
repair of a scheduler Deployment writes it.
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from dask_gpu_parity.core.cuda import Fit, fit
from dask_gpu_parity.core.findings import Finding
from dask_gpu_parity.core.inventory import DriverClass, Inventory, Nodes
from dask_gpu_parity.core.plain import copy_json
from dask_gpu_parity.core.providers import PoolClass
from dask_gpu_parity.core.rules.affinity import add_expressions
from dask_gpu_parity.core.rules.context import Context
from dask_gpu_parity.core.rules.dra import carry_labels, dra_pin, left_out
from dask_gpu_parity.core.rules.pins import NodeClass, legacy_pin, pin_expressions, pins_driver
from dask_gpu_parity.core.rules.pools import own_pool
from dask_gpu_parity.names import CUDA_ANNOTATION

__all__ = ["pin_driver_class", "pins_driver", "worker_nodes"]

_UPGRADE_STATE = "nvidia.com/gpu-driver-upgrade-state"  # set by the GPU Operator's upgrades
_UPGRADED = frozenset(("", "upgrade-done"))


def _driver_key(nc: NodeClass) -> tuple[int, ...]:
    if isinstance(nc, PoolClass):
        return ()
    return tuple(int(p) if p.isdigit() else -1 for p in nc.driver.split("."))


def worker_nodes(ctx: Context, inventory: Inventory) -> Nodes:
    """The usable GPU nodes that can take a worker."""
    return inventory.fitting(ctx.view.worker.spec, extended_tolerations=ctx.extended_tolerations)


def _classes(inventory: Inventory, nodes: Nodes) -> dict[NodeClass, Nodes]:
    """Nodes by driver class; by provider node pool where no node has driver labels."""
    # Comprehensions, not dict(): they widen the key type to NodeClass (dict keys are invariant).
    found: dict[NodeClass, Nodes] = {k: v for k, v in inventory.classes(nodes).items()}  # noqa: C416
    return found or {k: v for k, v in inventory.pools(nodes).items()}  # noqa: C416


def pin_driver_class(
    ctx: Context, inventory: Inventory
) -> tuple[list[Finding], DriverClass | None]:
    """Pin scheduler and workers to one qualifying class when the workers could reach several.

    Returns the findings and the driver class the scheduler is pinned to (by its nodeSelector
    or required affinity) and the workers run in, when there is one: what the verifier expects.
    """
    findings, driver = _pin(ctx, inventory)
    if driver is not None and not pins_driver(ctx.view.scheduler.spec, driver):
        driver = None  # the scheduler may land on another driver: expect none
    return findings, driver


def _pin(ctx: Context, inventory: Inventory) -> tuple[list[Finding], DriverClass | None]:
    scheduler, worker, cuda = ctx.view.scheduler, ctx.view.worker, ctx.view.cuda
    reachable = worker_nodes(ctx, inventory)
    classes = _classes(inventory, reachable)
    labelled = any(isinstance(nc, DriverClass) for nc in classes)
    unlabelled = inventory.unlabelled(reachable) if labelled else Nodes()
    fits = {
        nc: fit(nc, cuda) if cuda and isinstance(nc, DriverClass) else Fit.RUNS for nc in classes
    }
    usable = {nc: nodes for nc, nodes in classes.items() if fits[nc] is not Fit.NO}
    if classes and not usable and not unlabelled:
        return [_no_class(ctx, classes)], None
    if len(classes) + bool(unlabelled) <= 1:
        chosen = next(iter(usable), None)
        driver = chosen if isinstance(chosen, DriverClass) else None
        return _older_minor(ctx, driver, fits.get(chosen) if chosen else None), driver
    resource = ctx.view.worker_gpus[0].resource

    def capacity(nodes: Nodes) -> Decimal:
        return inventory.allocatable(nodes, resource)

    def rank(item: tuple[NodeClass, Nodes]) -> tuple[Any, ...]:
        nc, nodes = item
        settled = inventory.label_values(nodes, _UPGRADE_STATE) <= _UPGRADED
        return fits[nc] is Fit.RUNS, capacity(nodes), settled, _driver_key(nc), str(nc)

    # A scheduler on a pool of its own keeps it: a node pool is never pinned on it (driver and
    # CUDA labels are, where nodes carry them).
    keeps_pool = not labelled and own_pool(ctx)

    def pin_scheduler(spec: dict[str, Any], nc: NodeClass, exprs: list[dict[str, Any]]) -> bool:
        if keeps_pool and isinstance(nc, PoolClass):
            return True  # its pool stays; no empty term either (that would match no node)
        return add_expressions(spec, exprs)

    candidates = []
    for nc, nodes in usable.items():
        trial = copy_json(scheduler.spec)
        if isinstance(nc, PoolClass) or carry_labels(nodes):  # DRA nodes only: no label to pin by
            pin_scheduler(trial, nc, pin_expressions(nc, inventory.legacy_labels(nodes)))
        if inventory.fits_any(trial, extended_tolerations=ctx.extended_tolerations):
            candidates.append((nc, nodes))
    if not candidates or ctx.policy.placement.strategy.value != "pin-driver-class":
        return [], None  # DGP013 explains why the scheduler fits nowhere
    chosen, nodes = max(candidates, key=rank)
    listed = _listed(classes, unlabelled)
    if isinstance(chosen, DriverClass) and not carry_labels(nodes):
        return [dra_pin(ctx, inventory, chosen, listed), *_older_minor(ctx, None, None)], None
    legacy = isinstance(chosen, DriverClass) and legacy_pin(inventory, chosen)
    exprs = pin_expressions(chosen, legacy)
    fixable = add_expressions(worker.spec, exprs) and pin_scheduler(scheduler.spec, chosen, exprs)
    if keeps_pool and not own_pool(ctx):  # its pool is the one the workers now have: the same
        keeps_pool = False
        fixable = add_expressions(scheduler.spec, exprs) and fixable
    why = f"the one with the most allocatable {resource} ({capacity(nodes)})"
    excluded = sorted((nc for nc in classes if fits[nc] is Fit.NO), key=str)
    if cuda is not None and excluded:
        why = f"which runs {cuda}, unlike {'; '.join(map(str, excluded))}; " + why.replace(
            "the one", "of those that do, the one"
        )
    why += left_out(nodes)
    kind = "driver classes" if isinstance(chosen, DriverClass) else "node pools"
    who = "scheduler and workers"
    if isinstance(chosen, PoolClass):
        why += " (without driver labels, one node pool is one driver)"
        if keeps_pool:
            who = "the workers"
            why += (
                "; the scheduler keeps its own pool, whose driver cannot be pinned equal without "
                "driver labels"
            )
    findings = [
        Finding.of(
            "DGP014",
            f"{worker.ptr}/affinity/nodeAffinity",
            f"Workers may land on {len(classes) + bool(unlabelled)} {kind} ({listed}); "
            f"pinned {who} to {chosen}, {why}",
            fixable=fixable,
        )
    ]
    driver = chosen if isinstance(chosen, DriverClass) else None
    return findings + _older_minor(ctx, driver, fits[chosen]), driver


def _listed(classes: dict[NodeClass, Nodes], unlabelled: Nodes) -> str:
    """The classes the workers may land on, and how many nodes have none, for a message."""
    listed = "; ".join(str(nc) for nc in sorted(classes, key=str))
    if unlabelled:
        listed += f"; {len(unlabelled)} GPU node(s) without driver labels"
    return listed


def _no_class(ctx: Context, classes: dict[NodeClass, Nodes]) -> Finding:
    """DGP020: every class the workers can reach is too old for the image's CUDA."""
    cuda = ctx.view.cuda
    assert cuda is not None  # only then can a class fail to qualify
    floor = f" needs driver {cuda.driver_floor} or newer and" if cuda.driver_floor else ""
    reach = "; ".join(
        f"{nc} ({', '.join(sorted(n.name for n in nodes))})"
        for nc, nodes in sorted(classes.items(), key=lambda item: str(item[0]))
    )
    return Finding.of(
        "DGP020",
        f"{ctx.view.worker.container_ptr}/image",
        f"No driver class the workers can reach runs {cuda}: it{floor} a driver supporting CUDA "
        f"{cuda.named}; the workers can reach {reach}. Upgrade those nodes' driver, let the "
        "workers reach newer nodes (tolerations, nodeSelector), or use an image built for an "
        "older CUDA",
    )


def _older_minor(ctx: Context, chosen: DriverClass | None, how: Fit | None) -> list[Finding]:
    """DGP021: the class runs the image only under CUDA minor-version compatibility."""
    cuda = ctx.view.cuda
    if chosen is None or cuda is None or how is not Fit.OLDER_MINOR:
        return []
    if not cuda.minor_known:
        return [
            Finding.of(
                "DGP021",
                f"{ctx.view.worker.container_ptr}/image",
                f"The workers' {chosen} may be older than the image's {cuda}: then it runs under "
                "CUDA minor-version compatibility, where PTX built by the newer toolkit fails to "
                "JIT (cudaErrorUnsupportedPtxVersion) and newer APIs are missing; set the "
                f"{CUDA_ANNOTATION} annotation to the image's CUDA version, upgrade the driver, "
                f"or use an image built for CUDA {chosen.cuda}",
            )
        ]
    return [
        Finding.of(
            "DGP021",
            f"{ctx.view.worker.container_ptr}/image",
            f"The workers' {chosen} is older than the image's {cuda}: it runs under CUDA "
            "minor-version compatibility, but PTX built by the newer toolkit fails to JIT "
            "(cudaErrorUnsupportedPtxVersion) and newer APIs are missing; upgrade the driver or "
            f"use an image built for CUDA {chosen.cuda}",
        )
    ]
