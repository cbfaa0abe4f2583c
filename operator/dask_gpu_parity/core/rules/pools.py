"""Whether the scheduler goes to a GPU pool of its own, which placement must leave it on.

RAPIDS' guide "GPU optimization for the Dask scheduler on Kubernetes" puts the scheduler on a pool
of small GPUs (a T4 beside A100 workers) to save cost; parity asks only that its driver and CUDA
version equal the workers'. Read by the constraint copy and by the driver-class pin alike.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dask_gpu_parity.core.plain import get_in

from .affinity import expressions, terms
from .context import Context

__all__ = ["own_pool"]

_DRIVER_KEYS = "nvidia.com/cuda."  # driver and CUDA version labels, new and legacy
# Node labels that place a pod without choosing a GPU pool: where it runs, not on what.
_NOT_A_POOL = ("kubernetes.io/hostname", "kubernetes.io/os", "kubernetes.io/arch")
_NOT_A_POOL_PREFIXES = ("topology.kubernetes.io/", "failure-domain.beta.kubernetes.io/")
_PREFERRED = ("affinity", "nodeAffinity", "preferredDuringSchedulingIgnoredDuringExecution")


def _placement(
    spec: Mapping[str, Any], *, preferred: bool
) -> set[tuple[str, str, tuple[str, ...]]]:
    """The node constraints of a pod, as hashable ``(key, operator, values)`` triples.

    nodeSelector entries (as ``In`` of one value), required node affinity and, with
    ``preferred``, preferred node affinity; driver/CUDA keys, where-not-what keys and malformed
    entries (the schema rule reports those) left out.
    """
    found: set[tuple[str, str, tuple[str, ...]]] = set()
    selector = spec.get("nodeSelector")
    for key, value in selector.items() if isinstance(selector, Mapping) else ():
        found.add((str(key), "In", (str(value),)))
    exprs = [e for t in terms(spec) or [] for e in expressions(t)]
    if preferred:
        weighted = get_in(spec, _PREFERRED)
        for item in weighted if isinstance(weighted, list) else []:
            exprs += expressions(item.get("preference") if isinstance(item, Mapping) else None)
    for expr in exprs:
        if not isinstance(expr, Mapping):
            continue
        key, operator, values = expr.get("key"), expr.get("operator"), expr.get("values", [])
        if isinstance(key, str) and isinstance(operator, str) and isinstance(values, list):
            found.add((key, operator, tuple(map(str, values))))
    return {
        c
        for c in found
        if not c[0].startswith(_DRIVER_KEYS)
        and c[0] not in _NOT_A_POOL
        and not c[0].startswith(_NOT_A_POOL_PREFIXES)
    }


def own_pool(ctx: Context) -> bool:
    """Whether the scheduler goes to a GPU pool of its own ("a smaller GPU is fine").

    True when the policy names one, or the scheduler's nodeSelector or node affinity (required
    or preferred) asks for a node label the workers' do not: ``nvidia.com/gpu.product:
    Tesla-T4``, another node pool, or RAPIDS' guide's preferred ``dedicated In [scheduler]``
    (docs.rapids.ai, "GPU optimization for the Dask scheduler on Kubernetes"). Such a scheduler
    keeps its pool: only the driver and CUDA version are made equal to the workers'.
    """
    if ctx.policy.scheduler.node_selector:
        return True
    scheduler = _placement(ctx.view.scheduler.spec, preferred=True)
    return bool(scheduler) and bool(scheduler - _placement(ctx.view.worker.spec, preferred=True))
