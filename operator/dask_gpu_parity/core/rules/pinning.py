"""DGP014 and DGP013: with a node inventory, one driver class, and a node that fits.

DGP014 pins scheduler and workers to one driver class when the workers could land on several;
DGP013 reports a scheduler that no GPU node can take (it would stay Pending for ever).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Any

from dask_gpu_parity.core.findings import Finding
from dask_gpu_parity.core.inventory import (
    CUDA_FULL,
    DRIVER_FULL,
    DriverClass,
    GpuNode,
    Inventory,
)
from dask_gpu_parity.core.plain import as_map, copy_json

from .affinity import add_expressions
from .context import Context

__all__ = ["pin_driver_class", "schedulable"]


def _pin_expressions(dc: DriverClass, legacy: bool) -> list[dict[str, Any]]:
    if not legacy:
        return [
            {"key": DRIVER_FULL, "operator": "In", "values": [dc.driver]},
            {"key": CUDA_FULL, "operator": "In", "values": [dc.cuda]},
        ]
    major, minor, *rev = dc.driver.split(".")
    cuda_major, cuda_minor = [*dc.cuda.split("."), "0"][:2]
    exprs = [
        {"key": "nvidia.com/cuda.driver.major", "operator": "In", "values": [major]},
        {"key": "nvidia.com/cuda.driver.minor", "operator": "In", "values": [minor]},
        {"key": "nvidia.com/cuda.runtime.major", "operator": "In", "values": [cuda_major]},
        {"key": "nvidia.com/cuda.runtime.minor", "operator": "In", "values": [cuda_minor]},
    ]
    if rev:
        exprs.insert(2, {"key": "nvidia.com/cuda.driver.rev", "operator": "In", "values": [rev[0]]})
    return exprs


def pin_driver_class(
    ctx: Context, inventory: Inventory
) -> tuple[list[Finding], DriverClass | None]:
    """DGP014: pin scheduler and workers to one driver class when the workers allow several.

    Returns the findings and the driver class the workers run in, when there is exactly one.
    """
    scheduler, worker = ctx.view.scheduler, ctx.view.worker
    classes = inventory.classes(inventory.fitting(worker.spec))
    if len(classes) <= 1:
        return [], next(iter(classes), None)
    resource = ctx.view.worker_gpus[0].resource

    def capacity(item: tuple[DriverClass, list[GpuNode]]) -> tuple[Decimal, DriverClass]:
        return inventory.allocatable(item[1], resource), item[0]

    candidates = []
    for dc, nodes in classes.items():
        trial = copy_json(scheduler.spec)
        add_expressions(trial, _pin_expressions(dc, inventory.legacy_labels(nodes)))
        if inventory.fits_any(trial):
            candidates.append((dc, nodes))
    if not candidates:
        return [], None  # DGP013 explains why the scheduler fits nowhere
    if ctx.policy.placement.value != "pin-driver-class":
        return [], None
    chosen, nodes = max(candidates, key=capacity)
    exprs = _pin_expressions(chosen, inventory.legacy_labels(inventory.of_class(chosen)))
    fixable = add_expressions(worker.spec, exprs) and add_expressions(scheduler.spec, exprs)
    listed = "; ".join(str(dc) for dc in sorted(classes))
    total, _ = capacity((chosen, nodes))
    return [
        Finding.of(
            "DGP014",
            f"{worker.ptr}/affinity/nodeAffinity",
            f"Workers may land on {len(classes)} driver classes ({listed}); pinned scheduler and "
            f"workers to {chosen}, the class with the most allocatable {resource} ({total})",
            fixable=fixable,
        )
    ], chosen


def schedulable(ctx: Context, inventory: Inventory) -> list[Finding]:
    """DGP013: some GPU node can take the scheduler as it will be created."""
    scheduler = ctx.view.scheduler
    if inventory.fits_any(scheduler.spec):
        return []
    selector = as_map(scheduler.spec.get("nodeSelector"))
    shown = ", ".join(f"{k}={v}" for k, v in selector.items()) or "none"
    classes = sorted(inventory.classes(inventory.fitting(ctx.view.worker.spec)))
    workers = f" (the workers run on {'; '.join(map(str, classes))})" if classes else ""
    return [
        Finding.of(
            "DGP013",
            scheduler.ptr,
            f"No node can take the scheduler: none of the {inventory.size} GPU nodes matches "
            f"its nodeSelector ({shown}), affinity, tolerations and GPU request{workers}; the "
            "pod would stay Pending and KubeCluster would wait forever. Add such nodes or change "
            "the scheduler pool",
        )
    ]
