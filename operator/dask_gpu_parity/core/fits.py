"""Whether a pod fits a GPU node: kube-scheduler's filters that decide GPU placement.

nodeSelector, required node affinity, NoSchedule/NoExecute taints and tolerations, cordoning,
readiness and allocatable GPU resources. A :class:`PodFilter` reads a pod once and is then asked
of node after node. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from . import quantity
from .deviceclasses import NVIDIA_CLASSES, DeviceClasses
from .gpu import GpuRequest, gpu_requests
from .labels import expression_matches
from .nodes import GpuNode
from .plain import as_list, get_in

__all__ = ["PodFilter", "gpu_demand", "node_fits", "pod_gpu_demand", "toleration_matches"]

_REQUIRED_TERMS = (
    "nodeAffinity",
    "requiredDuringSchedulingIgnoredDuringExecution",
    "nodeSelectorTerms",
)


def pod_gpu_demand(pod_spec: Any, classes: DeviceClasses = NVIDIA_CLASSES) -> dict[str, Decimal]:
    """GPU resources the pod needs from a node.

    Per container the larger of limit and request, summed over the containers (as kube-scheduler
    counts extended resources).
    """
    return gpu_demand(gpu_requests(pod_spec, classes))


def gpu_demand(requests: Iterable[GpuRequest]) -> dict[str, Decimal]:
    """:func:`pod_gpu_demand` from a pod's GPU requests, already read (``gpu_requests``)."""
    per_container: dict[tuple[int, str], Decimal] = {}
    for request in requests:
        key = (request.container, request.resource)
        number = quantity.parse(request.quantity) or Decimal(0)
        per_container[key] = max(per_container.get(key, Decimal(0)), number)
    demand: dict[str, Decimal] = {}
    for (_, resource), number in per_container.items():
        demand[resource] = demand.get(resource, Decimal(0)) + number
    return demand


def node_fits(node: GpuNode, pod_spec: Any, extended_tolerations: bool = False) -> bool:
    """Whether kube-scheduler's node filters would let ``pod_spec`` onto ``node``.

    Covers nodeSelector, required node affinity, NoSchedule/NoExecute taints, cordoning,
    readiness and allocatable GPU resources — the filters that decide GPU placement. With
    ``extended_tolerations`` the pod also tolerates what the ExtendedResourceToleration admission
    plugin adds: ``{key: <resource>, operator: Exists, effect: NoSchedule}`` for each extended
    resource it requests. To ask about many nodes, build one :class:`PodFilter` instead.
    """
    return PodFilter.of(pod_spec, extended_tolerations).fits(node)


@dataclass(frozen=True)
class PodFilter:
    """What :func:`node_fits` reads of a pod, read once: then asked of node after node."""

    valid: bool
    selector: Mapping[str, Any]
    affinity: Any
    demand: Mapping[str, Decimal]
    tolerations: tuple[Mapping[str, Any], ...]

    @classmethod
    def of(
        cls,
        pod_spec: Any,
        extended_tolerations: bool = False,
        classes: DeviceClasses = NVIDIA_CLASSES,
    ) -> PodFilter:
        """The filter for ``pod_spec`` (see :func:`node_fits` for ``extended_tolerations``).

        ``classes``: the DeviceClasses whose extended-resource names are GPUs.
        """
        if not isinstance(pod_spec, Mapping):
            return cls(False, {}, None, {}, ())
        selector = pod_spec.get("nodeSelector")
        demand = pod_gpu_demand(pod_spec, classes)
        tolerations = [t for t in as_list(pod_spec.get("tolerations")) if isinstance(t, Mapping)]
        if extended_tolerations:
            tolerations += [
                {"key": k, "operator": "Exists", "effect": "NoSchedule"} for k in demand
            ]
        return cls(
            True,
            selector if isinstance(selector, Mapping) else {},
            pod_spec.get("affinity"),
            demand,
            tuple(tolerations),
        )

    def fits(self, node: GpuNode) -> bool:
        """Whether the pod could go onto ``node``."""
        if not self.valid or node.unschedulable or not node.ready:
            return False
        if any(node.labels.get(k) != v for k, v in self.selector.items()):
            return False
        if not _affinity_allows(node, self.affinity):
            return False
        if not _tolerates(node.taints, self.tolerations):
            return False
        return all(node.allocatable.get(k, Decimal(0)) >= v for k, v in self.demand.items())


def _affinity_allows(node: GpuNode, affinity: Any) -> bool:
    terms = get_in(affinity, _REQUIRED_TERMS)
    if not isinstance(terms, list) or not terms:
        return True
    return any(_term_matches(node, term) for term in terms)


def _term_matches(node: GpuNode, term: Any) -> bool:
    if not isinstance(term, Mapping):
        return False
    expressions = as_list(term.get("matchExpressions"))
    fields = as_list(term.get("matchFields"))
    if not expressions and not fields:
        return False  # an empty term matches no node
    for expr in expressions:
        if not _expression_matches(node.labels, expr):
            return False
    return all(_expression_matches({"metadata.name": node.name}, expr) for expr in fields)


def _expression_matches(labels: Mapping[str, str], expr: Any) -> bool:
    if not isinstance(expr, Mapping) or not isinstance(key := expr.get("key"), str):
        return False
    operator = expr.get("operator")
    values = [v for v in as_list(expr.get("values")) if isinstance(v, str)]
    return isinstance(operator, str) and expression_matches(labels, key, operator, values)


def _tolerates(
    taints: Sequence[tuple[str, str, str]], tolerations: Sequence[Mapping[str, Any]]
) -> bool:
    for key, value, effect in taints:
        if effect not in ("NoSchedule", "NoExecute"):
            continue
        if not any(toleration_matches(t, key, value, effect) for t in tolerations):
            return False
    return True


def toleration_matches(toleration: Mapping[str, Any], key: str, value: str, effect: str) -> bool:
    """Whether one toleration tolerates the taint ``key=value:effect``."""
    if toleration.get("effect") not in (None, "", effect):
        return False
    operator = toleration.get("operator") or "Equal"
    tkey = toleration.get("key") or ""
    if operator == "Exists":
        return tkey in ("", key)
    return tkey == key and (toleration.get("value") or "") == value
