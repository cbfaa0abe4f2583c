"""Placement rules: the scheduler lands where the workers' driver and CUDA version are.

DGP004 (node selectors and affinity), DGP005 (tolerations), DGP006 (runtimeClassName) copy the
workers' GPU constraints; with a node inventory, DGP014 pins scheduler and workers to one driver
class and DGP013 reports a scheduler that no node can take.
"""

from __future__ import annotations

from collections.abc import Mapping
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from .findings import Finding
from .gpu import as_map
from .placement import (
    CUDA_FULL,
    DRIVER_FULL,
    DriverClass,
    GpuNode,
    Inventory,
    node_fits,
)
from .resources import copy_json

if TYPE_CHECKING:
    from .rules import Context

__all__ = ["copy_worker_constraints", "pin_driver_class", "schedulable"]

_NVIDIA = "nvidia.com/"
_PRODUCT = "nvidia.com/gpu.product"
_DRIVER_KEYS = "nvidia.com/cuda."  # driver and CUDA version labels, new and legacy


def _wanted_key(key: Any, pool: bool) -> bool:
    """Which worker label keys the scheduler copies.

    All GPU labels, or only driver/CUDA ones when the scheduler has a (smaller GPU) pool of its own.
    """
    return isinstance(key, str) and key.startswith(_DRIVER_KEYS if pool else _NVIDIA)


def _own_pool(ctx: Context) -> bool:
    """Whether the scheduler goes to a GPU pool of its own ("a smaller GPU is fine").

    True when the policy names one, or the user already picked a GPU product for the scheduler.
    """
    selector = ctx.scheduler_spec.get("nodeSelector")
    chosen = isinstance(selector, Mapping) and _PRODUCT in selector
    return bool(ctx.policy.scheduler_node_selector) or chosen


def copy_worker_constraints(ctx: Context) -> list[Finding]:
    """DGP004, DGP005, DGP006: copy the workers' GPU placement onto the scheduler."""
    own_pool = _own_pool(ctx)
    return (
        _node_selector(ctx, own_pool)
        + _affinity(ctx, own_pool)
        + _tolerations(ctx)
        + _runtime_class(ctx)
    )


def _node_selector(ctx: Context, own_pool: bool) -> list[Finding]:
    pool = dict(ctx.policy.scheduler_node_selector)
    worker = ctx.worker_spec.get("nodeSelector")
    wanted = {
        k: v
        for k, v in (worker.items() if isinstance(worker, Mapping) else ())
        if _wanted_key(k, own_pool)
    }
    wanted.update(pool)
    if not wanted:
        return []
    if ctx.scheduler_spec.get("nodeSelector") is None:  # absent, or null (which the API drops)
        ctx.scheduler_spec["nodeSelector"] = {}
    selector = ctx.scheduler_spec["nodeSelector"]
    path = f"{ctx.scheduler_ptr}/nodeSelector"
    if not isinstance(selector, dict):
        return []
    findings = []
    for key, value in wanted.items():
        if key not in selector:
            selector[key] = value
            origin = "the policy's scheduler pool" if key in pool else "the workers"
            findings.append(
                Finding.of(
                    "DGP004",
                    path,
                    f"Scheduler lacks nodeSelector {key}={value} of {origin}: copied it",
                )
            )
        elif selector[key] != value:
            findings.append(
                Finding.of(
                    "DGP004",
                    path,
                    f"Scheduler nodeSelector {key}={selector[key]} differs from {value}: the "
                    "scheduler may land on another driver or CUDA version; use the same value",
                    fixable=False,
                )
            )
    return findings


def _terms(spec: Mapping[str, Any]) -> list[Any] | None:
    node = spec.get("affinity")
    for key in (
        "nodeAffinity",
        "requiredDuringSchedulingIgnoredDuringExecution",
        "nodeSelectorTerms",
    ):
        if not isinstance(node, Mapping):
            return None
        node = node.get(key)
    return node if isinstance(node, list) else None


def _set_terms(spec: dict[str, Any], terms: list[Any]) -> bool:
    node = spec
    for key in ("affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution"):
        if node.get(key) is None:  # absent, or null (which the API drops)
            node[key] = {}
        child = node[key]
        if not isinstance(child, dict):
            return False
        node = child
    node["nodeSelectorTerms"] = terms
    return True


def _expressions(term: Any) -> list[Any]:
    exprs = term.get("matchExpressions") if isinstance(term, Mapping) else None
    return list(exprs) if isinstance(exprs, list) else []


def _implied(scheduler_terms: list[Any], worker_terms: list[list[Any]]) -> bool:
    """Whether every scheduler term already contains all expressions of some worker term."""
    return all(
        any(all(e in _expressions(s) for e in w) for w in worker_terms) for s in scheduler_terms
    )


def _affinity(ctx: Context, pool: bool) -> list[Finding]:
    worker_terms = _terms(ctx.worker_spec)
    if not worker_terms:
        return []
    filtered = [
        [e for e in _expressions(t) if isinstance(e, Mapping) and _wanted_key(e.get("key"), pool)]
        for t in worker_terms
    ]
    if any(not f for f in filtered):
        return []  # some worker branch has no GPU constraint: nothing to copy faithfully
    have = _terms(ctx.scheduler_spec)
    if have and _implied(have, filtered):
        return []
    if have:
        merged = [
            {
                **copy_json(dict(s)),
                "matchExpressions": _expressions(s)
                + [copy_json(e) for e in w if e not in _expressions(s)],
            }
            for s in have
            if isinstance(s, Mapping)
            for w in filtered
        ]
    else:
        merged = [{"matchExpressions": copy_json(w)} for w in filtered]
    fixable = _set_terms(ctx.scheduler_spec, merged)
    return [
        Finding.of(
            "DGP004",
            f"{ctx.scheduler_ptr}/affinity/nodeAffinity",
            "Scheduler lacks the workers' required GPU node affinity: the scheduler may land on "
            "another driver or CUDA version; copied the workers' terms",
            fixable=fixable,
        )
    ]


def _is_gpu_toleration(toleration: Any) -> bool:
    return isinstance(toleration, Mapping) and str(toleration.get("key", "")).startswith(_NVIDIA)


def _tolerations(ctx: Context) -> list[Finding]:
    worker = ctx.worker_spec.get("tolerations")
    wanted = [t for t in worker if _is_gpu_toleration(t)] if isinstance(worker, list) else []
    have = ctx.scheduler_spec.get("tolerations")
    if have is None:
        have = []
    if not isinstance(have, list):
        return []
    missing = [t for t in wanted if t not in have]
    if not missing:
        return []
    have.extend(copy_json(missing))
    ctx.scheduler_spec["tolerations"] = have
    keys = ", ".join(sorted({str(t.get("key")) for t in missing}))
    return [
        Finding.of(
            "DGP005",
            f"{ctx.scheduler_ptr}/tolerations",
            f"Scheduler does not tolerate the workers' GPU taints ({keys}): it cannot land on a "
            "GPU node; copied the workers' tolerations",
        )
    ]


def _runtime_class(ctx: Context) -> list[Finding]:
    want = ctx.worker_spec.get("runtimeClassName")
    return ctx.copy_or_report(
        ctx.scheduler_spec,
        ctx.scheduler_ptr,
        "runtimeClassName",
        want,
        code="DGP006",
        copied=f"Scheduler lacks the workers' runtimeClassName {want}: copied it",
        differs=lambda have: (
            f"Scheduler runtimeClassName {have!r} differs from the workers' {want!r}: the GPU may "
            "not be visible to the scheduler; use the same runtime class"
        ),
    )


def _pin_expressions(dc: DriverClass, nodes: list[GpuNode]) -> list[dict[str, Any]]:
    if all(not n.uses_legacy_labels for n in nodes):
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


def _add_expressions(spec: dict[str, Any], exprs: list[dict[str, Any]]) -> bool:
    terms = _terms(spec) or [{}]
    new_terms = []
    for term in terms:
        if not isinstance(term, Mapping):
            return False
        existing = _expressions(term)
        new_terms.append(
            {**dict(term), "matchExpressions": existing + [e for e in exprs if e not in existing]}
        )
    return _set_terms(spec, new_terms)


def pin_driver_class(
    ctx: Context, inventory: Inventory
) -> tuple[list[Finding], DriverClass | None]:
    """DGP014: pin scheduler and workers to one driver class when the workers allow several.

    Returns the findings and the driver class the workers run in, when there is exactly one.
    """
    classes = inventory.classes(inventory.fitting(ctx.worker_spec))
    if len(classes) <= 1:
        return [], next(iter(classes), None)
    resource = ctx.worker_gpus[0].resource

    def capacity(item: tuple[DriverClass, list[GpuNode]]) -> tuple[Decimal, DriverClass]:
        return sum((n.allocatable.get(resource, Decimal(0)) for n in item[1]), Decimal(0)), item[0]

    candidates = []
    for dc, nodes in classes.items():
        trial = copy_json(ctx.scheduler_spec)
        _add_expressions(trial, _pin_expressions(dc, nodes))
        if any(node_fits(n, trial) for n in inventory.nodes):
            candidates.append((dc, nodes))
    if not candidates:
        return [], None  # DGP013 explains why the scheduler fits nowhere
    if ctx.policy.placement.value != "pin-driver-class":
        return [], None
    chosen, nodes = max(candidates, key=capacity)
    exprs = _pin_expressions(chosen, [n for n in inventory.nodes if n.driver_class == chosen])
    fixable = _add_expressions(ctx.worker_spec, exprs) and _add_expressions(
        ctx.scheduler_spec, exprs
    )
    listed = "; ".join(str(dc) for dc in sorted(classes))
    total, _ = capacity((chosen, nodes))
    return [
        Finding.of(
            "DGP014",
            f"{ctx.worker_ptr}/affinity/nodeAffinity",
            f"Workers may land on {len(classes)} driver classes ({listed}); pinned scheduler and "
            f"workers to {chosen}, the class with the most allocatable {resource} ({total})",
            fixable=fixable,
        )
    ], chosen


def schedulable(ctx: Context, inventory: Inventory) -> list[Finding]:
    """DGP013: some GPU node can take the scheduler as it will be created."""
    if any(node_fits(n, ctx.scheduler_spec) for n in inventory.nodes):
        return []
    selector = as_map(ctx.scheduler_spec.get("nodeSelector"))
    shown = ", ".join(f"{k}={v}" for k, v in selector.items()) or "none"
    classes = sorted(inventory.classes(inventory.fitting(ctx.worker_spec)))
    workers = f" (the workers run on {'; '.join(map(str, classes))})" if classes else ""
    return [
        Finding.of(
            "DGP013",
            ctx.scheduler_ptr,
            f"No node can take the scheduler: none of the {len(inventory.nodes)} GPU nodes matches "
            f"its nodeSelector ({shown}), affinity, tolerations and GPU request{workers}; the "
            "pod would stay Pending and KubeCluster would wait forever. Add such nodes or change "
            "the scheduler pool",
        )
    ]
