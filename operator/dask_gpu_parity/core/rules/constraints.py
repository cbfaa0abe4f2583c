"""DGP004, DGP005, DGP006: the scheduler gets the workers' GPU placement constraints.

Node selectors and required affinity on GPU labels (DGP004), tolerations of GPU taints (DGP005)
and the runtime class (DGP006) are copied from the workers, so the scheduler lands on the
workers' driver and CUDA version.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dask_gpu_parity.core.findings import Finding
from dask_gpu_parity.core.inventory import toleration_matches
from dask_gpu_parity.core.plain import copy_json
from dask_gpu_parity.core.providers import POOL_LABELS

from .affinity import expressions, set_terms, terms
from .context import Context, copy_or_report
from .pools import own_pool

__all__ = ["worker_constraints"]

_NVIDIA = "nvidia.com/"
_DRIVER_KEYS = "nvidia.com/cuda."  # driver and CUDA version labels, new and legacy


def _wanted_key(key: Any, pool: bool) -> bool:
    """Which worker label keys the scheduler copies.

    All GPU labels, and the managed services' node pool labels that stand for the driver where
    GFD labels are missing; only the driver/CUDA ones when the scheduler has a (smaller GPU) pool
    of its own.
    """
    if not isinstance(key, str):
        return False
    if pool:
        return key.startswith(_DRIVER_KEYS)
    return key.startswith(_NVIDIA) or key in POOL_LABELS


def worker_constraints(ctx: Context) -> list[Finding]:
    """DGP004, DGP005, DGP006: copy the workers' GPU placement onto the scheduler."""
    pool = own_pool(ctx)
    return (
        _node_selector(ctx, pool) + _affinity(ctx, pool) + _tolerations(ctx) + _runtime_class(ctx)
    )


def _node_selector(ctx: Context, own_pool: bool) -> list[Finding]:
    pool = dict(ctx.policy.scheduler.node_selector)
    worker = ctx.view.worker.spec.get("nodeSelector")
    wanted = {
        k: v
        for k, v in (worker.items() if isinstance(worker, Mapping) else ())
        if _wanted_key(k, own_pool)
    }
    wanted.update(pool)
    if not wanted:
        return []
    if ctx.view.scheduler.spec.get("nodeSelector") is None:  # absent, or null (which the API drops)
        ctx.view.scheduler.spec["nodeSelector"] = {}
    selector = ctx.view.scheduler.spec["nodeSelector"]
    path = f"{ctx.view.scheduler.ptr}/nodeSelector"
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


def _implied(scheduler_terms: list[Any], worker_terms: list[list[Any]]) -> bool:
    """Whether every scheduler term already contains all expressions of some worker term."""
    return all(
        any(all(e in expressions(s) for e in w) for w in worker_terms) for s in scheduler_terms
    )


def _affinity(ctx: Context, pool: bool) -> list[Finding]:
    worker_terms = terms(ctx.view.worker.spec)
    if not worker_terms:
        return []
    filtered = [
        [e for e in expressions(t) if isinstance(e, Mapping) and _wanted_key(e.get("key"), pool)]
        for t in worker_terms
    ]
    if any(not f for f in filtered):
        return []  # some worker branch has no GPU constraint: nothing to copy faithfully
    # Terms that are not objects match no node (the schema rule reports them): they are dropped.
    have = [s for s in terms(ctx.view.scheduler.spec) or [] if isinstance(s, Mapping)]
    if have and _implied(have, filtered):
        return []
    if have:
        merged = [
            {
                **copy_json(dict(s)),
                "matchExpressions": expressions(s)
                + [copy_json(e) for e in w if e not in expressions(s)],
            }
            for s in have
            for w in filtered
        ]
    else:
        merged = [{"matchExpressions": copy_json(w)} for w in filtered]
    # Reported where the scheduler's spec changes: its affinity when it had none (or null).
    where = (
        "/affinity" if ctx.view.scheduler.spec.get("affinity") is None else "/affinity/nodeAffinity"
    )
    fixable = set_terms(ctx.view.scheduler.spec, merged)
    return [
        Finding.of(
            "DGP004",
            f"{ctx.view.scheduler.ptr}{where}",
            "Scheduler lacks the workers' required GPU node affinity: the scheduler may land on "
            "another driver or CUDA version; copied the workers' terms",
            fixable=fixable,
        )
    ]


def _is_gpu_toleration(toleration: Any, taints: frozenset[tuple[str, str, str]]) -> bool:
    """A toleration of an ``nvidia.com/*`` taint, or of a taint the inventory's GPU nodes carry."""
    if not isinstance(toleration, Mapping):
        return False
    return str(toleration.get("key", "")).startswith(_NVIDIA) or any(
        toleration_matches(toleration, *taint) for taint in taints
    )


def _tolerations(ctx: Context) -> list[Finding]:
    worker = ctx.view.worker.spec.get("tolerations")
    taints = ctx.inventory.taints() if ctx.inventory is not None else frozenset()
    wanted = (
        [t for t in worker if _is_gpu_toleration(t, taints)] if isinstance(worker, list) else []
    )
    have = ctx.view.scheduler.spec.get("tolerations")
    if have is None:
        have = []
    if not isinstance(have, list):
        return []
    missing = [t for t in wanted if t not in have]
    if not missing:
        return []
    have.extend(copy_json(missing))
    ctx.view.scheduler.spec["tolerations"] = have
    keys = ", ".join(sorted({str(t.get("key")) for t in missing}))
    return [
        Finding.of(
            "DGP005",
            f"{ctx.view.scheduler.ptr}/tolerations",
            f"Scheduler does not tolerate the workers' GPU taints ({keys}): it cannot land on a "
            "GPU node; copied the workers' tolerations",
        )
    ]


def _runtime_class(ctx: Context) -> list[Finding]:
    want = ctx.view.worker.spec.get("runtimeClassName")
    return copy_or_report(
        ctx.view.scheduler.spec,
        ctx.view.scheduler.ptr,
        "runtimeClassName",
        want,
        code="DGP006",
        copied=f"Scheduler lacks the workers' runtimeClassName {want}: copied it",
        differs=lambda have: (
            f"Scheduler runtimeClassName {have!r} differs from the workers' {want!r}: the GPU may "
            "not be visible to the scheduler; use the same runtime class"
        ),
    )
