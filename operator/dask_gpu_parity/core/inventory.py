"""GPU node inventory and placement: GFD labels, driver classes, pod-to-node matching.

A *driver class* is the pair (NVIDIA driver version, CUDA version the driver supports) that GPU
Feature Discovery publishes on each GPU node. Parity means the scheduler runs in the workers'
driver class. The inventory keeps only GPU nodes, and of them only what placement needs, so its
size does not grow with CPU-only nodes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from . import quantity
from .gpu import gpu_requests, is_gpu_resource
from .labels import expression_matches
from .plain import as_list, as_map, get_in
from .providers import PROVIDERS, PoolClass, Provider

__all__ = [
    "CUDA_FULL",
    "DRIVER_FULL",
    "DriverClass",
    "GpuNode",
    "Inventory",
    "PodFilter",
    "driver_class",
    "node_fits",
    "pod_gpu_demand",
    "toleration_matches",
]

DRIVER_FULL = "nvidia.com/cuda.driver-version.full"
CUDA_FULL = "nvidia.com/cuda.runtime-version.full"
_LEGACY_DRIVER = (
    "nvidia.com/cuda.driver.major",
    "nvidia.com/cuda.driver.minor",
    "nvidia.com/cuda.driver.rev",
)
_LEGACY_CUDA = ("nvidia.com/cuda.runtime.major", "nvidia.com/cuda.runtime.minor")
_REQUIRED_TERMS = (
    "nodeAffinity",
    "requiredDuringSchedulingIgnoredDuringExecution",
    "nodeSelectorTerms",
)


@dataclass(frozen=True, order=True)
class DriverClass:
    """An NVIDIA driver version and the CUDA version it supports, e.g. 580.95.05 / 13.0."""

    driver: str
    cuda: str

    def __str__(self) -> str:
        return f"driver {self.driver} / CUDA {self.cuda}"


def driver_class(labels: Mapping[str, str]) -> DriverClass | None:
    """The driver class a node's GFD labels describe (new keys first, then legacy ones)."""
    driver = labels.get(DRIVER_FULL)
    if not driver and all(labels.get(k) for k in _LEGACY_DRIVER[:2]):
        driver = ".".join(labels[k] for k in _LEGACY_DRIVER if labels.get(k))
    cuda = labels.get(CUDA_FULL)
    if not cuda and all(labels.get(k) for k in _LEGACY_CUDA):
        cuda = ".".join(labels[k] for k in _LEGACY_CUDA)
    return DriverClass(driver, cuda) if driver and cuda else None


@dataclass(frozen=True)
class GpuNode:
    """What placement needs of one GPU node."""

    name: str
    labels: Mapping[str, str]
    taints: tuple[tuple[str, str, str], ...]  # (key, value, effect)
    allocatable: Mapping[str, Decimal]  # GPU resources only
    unschedulable: bool = False  # cordoned (spec.unschedulable)
    ready: bool = True  # the Ready condition is True (or not reported)

    @property
    def driver_class(self) -> DriverClass | None:
        """The node's driver class, if GFD labelled it."""
        return driver_class(self.labels)

    @property
    def uses_legacy_labels(self) -> bool:
        """Whether only the pre-2024 GFD labels are present."""
        return DRIVER_FULL not in self.labels

    @classmethod
    def from_node(cls, node: Mapping[str, Any]) -> GpuNode | None:
        """A :class:`GpuNode` from a Node object, ``None`` when it has no GPU resource."""
        status = as_map(node.get("status"))
        allocatable = {
            name: number
            for name, value in as_map(status.get("allocatable")).items()
            if is_gpu_resource(name)
            and (number := quantity.parse(value)) is not None
            and number > 0
        }
        if not allocatable:
            return None
        metadata = as_map(node.get("metadata"))
        spec = as_map(node.get("spec"))
        taints = tuple(
            (str(t.get("key", "")), str(t.get("value", "")), str(t.get("effect", "")))
            for t in as_list(spec.get("taints"))
            if isinstance(t, Mapping)
        )
        labels = {str(k): str(v) for k, v in as_map(metadata.get("labels")).items()}
        conditions = [c for c in as_list(status.get("conditions")) if isinstance(c, Mapping)]
        ready = [str(c.get("status")) for c in conditions if c.get("type") == "Ready"]
        return cls(
            name=str(metadata.get("name", "")),
            labels=labels,
            taints=taints,
            allocatable=allocatable,
            unschedulable=spec.get("unschedulable") is True,
            ready=ready[-1:] in ([], ["True"]),
        )


@dataclass(frozen=True)
class Inventory:
    """The GPU nodes of a cluster.

    Rules ask it questions (``fitting``, ``fits_any``, ``classes``, ``of_class``, ``size``,
    ``allocatable``, ``legacy_labels``, ``label_values``, ``taints``, ``unlabelled``,
    ``labelled``, ``provider``) rather than
    walking ``nodes``: the operator hands in a subclass that answers them from nodes grouped as
    they arrive, so a request's work does not grow with the node count.
    """

    nodes: tuple[GpuNode, ...]

    @property
    def size(self) -> int:
        """How many GPU nodes there are."""
        return len(self.nodes)

    def fits_any(self, pod_spec: Any, *, extended_tolerations: bool = False) -> bool:
        """Whether some node could take a pod with ``pod_spec`` (see :func:`node_fits`)."""
        pod = PodFilter.of(pod_spec, extended_tolerations)
        return any(pod.fits(n) for n in self.nodes)

    def unlabelled(self, nodes: Sequence[GpuNode] | None = None) -> list[GpuNode]:
        """The nodes (of ``nodes``, else all) without GFD driver labels."""
        return [n for n in (self.nodes if nodes is None else nodes) if n.driver_class is None]

    def of_class(self, dc: DriverClass) -> Sequence[GpuNode]:
        """The nodes of one driver class."""
        return [n for n in self.nodes if n.driver_class == dc]

    def allocatable(self, nodes: Sequence[GpuNode], resource: str) -> Decimal:
        """How much of ``resource`` ``nodes`` (from ``classes`` or ``of_class``) have in all."""
        return sum((n.allocatable.get(resource, Decimal(0)) for n in nodes), Decimal(0))

    def legacy_labels(self, nodes: Sequence[GpuNode]) -> bool:
        """Whether any of ``nodes`` has only the pre-2024 GFD driver labels."""
        return any(n.uses_legacy_labels for n in nodes)

    def label_values(self, nodes: Sequence[GpuNode], key: str) -> frozenset[str]:
        """The values ``nodes`` have for the label ``key`` ("" for a node without it)."""
        return frozenset(n.labels.get(key, "") for n in nodes)

    def taints(self) -> frozenset[tuple[str, str, str]]:
        """Every taint some GPU node carries."""
        return frozenset(taint for node in self.nodes for taint in node.taints)

    @classmethod
    def from_nodes(cls, nodes: Iterable[Mapping[str, Any]]) -> Inventory:
        """An inventory from Node objects (e.g. ``kubectl get nodes -o yaml`` items)."""
        gpu_nodes = (GpuNode.from_node(n) for n in nodes if isinstance(n, Mapping))
        return cls(tuple(sorted((n for n in gpu_nodes if n), key=lambda n: n.name)))

    def fitting(self, pod_spec: Any, *, extended_tolerations: bool = False) -> Sequence[GpuNode]:
        """The nodes that could take a pod with ``pod_spec`` (see :func:`node_fits`)."""
        pod = PodFilter.of(pod_spec, extended_tolerations)
        return [n for n in self.nodes if pod.fits(n)]

    @property
    def labelled(self) -> bool:
        """Whether any node carries GFD driver labels (else driver classes cannot be told)."""
        return any(n.driver_class is not None for n in self.nodes)

    @property
    def provider(self) -> Provider | None:
        """The managed Kubernetes service the nodes' labels name, if any."""
        for provider in PROVIDERS:
            if any(label in n.labels for n in self.nodes for label in provider.labels):
                return provider
        return None

    def pools(self, nodes: Sequence[GpuNode]) -> dict[PoolClass, list[GpuNode]]:
        """Nodes grouped by their provider's node pool label (nodes without one left out)."""
        grouped: dict[PoolClass, list[GpuNode]] = {}
        for node in nodes:
            for provider in PROVIDERS:  # EKS clusters mix managed node groups and Karpenter
                if pool := node.labels.get(provider.pool_label):
                    grouped.setdefault(PoolClass(provider.pool_label, pool), []).append(node)
                    break
        return grouped

    def classes(
        self, nodes: Sequence[GpuNode] | None = None
    ) -> dict[DriverClass, Sequence[GpuNode]]:
        """Nodes grouped by driver class (unlabelled nodes left out)."""
        grouped: dict[DriverClass, list[GpuNode]] = {}
        for node in self.nodes if nodes is None else nodes:
            if (dc := node.driver_class) is not None:
                grouped.setdefault(dc, []).append(node)
        return dict[DriverClass, Sequence[GpuNode]](grouped)


def pod_gpu_demand(pod_spec: Any) -> dict[str, Decimal]:
    """GPU resources the pod needs from a node.

    Per container the larger of limit and request, summed over the containers (as kube-scheduler
    counts extended resources).
    """
    per_container: dict[tuple[int, str], Decimal] = {}
    for request in gpu_requests(pod_spec):
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
    def of(cls, pod_spec: Any, extended_tolerations: bool = False) -> PodFilter:
        """The filter for ``pod_spec`` (see :func:`node_fits` for ``extended_tolerations``)."""
        if not isinstance(pod_spec, Mapping):
            return cls(False, {}, None, {}, ())
        selector = pod_spec.get("nodeSelector")
        demand = pod_gpu_demand(pod_spec)
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
