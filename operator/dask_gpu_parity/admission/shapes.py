"""Nodes by shape: an :class:`IndexedInventory` asks each placement question once per shape.

A node's *shape* is everything placement reads of it except what is unique to the node: its
name and its per-node labels. Nodes of one shape answer every placement question alike, so
``node_fits`` runs once per shape, not once per node: a pool of 2,000 identical nodes costs one
call. A pod that selects on a per-node label or on a field (``matchFields``) is the exception:
then every node is asked. Pure: plain data in and out, no I/O.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, overload

from dask_gpu_parity.core.inventory import DriverClass, GpuNode, Inventory, Overlap, PodFilter
from dask_gpu_parity.core.plain import as_list, as_map, get_in
from dask_gpu_parity.core.providers import PROVIDERS, Provider

__all__ = ["IndexedInventory", "Shape", "referenced_keys", "shape_key"]

_REQUIRED_TERMS = ("nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution")


def referenced_keys(pod_spec: Any) -> tuple[frozenset[str], bool]:
    """The node label keys a pod's placement reads, and whether it reads node fields too."""
    if not isinstance(pod_spec, Mapping):
        return frozenset(), False
    keys = {str(k) for k in as_map(pod_spec.get("nodeSelector"))}
    fields = False
    terms = get_in(pod_spec.get("affinity"), (*_REQUIRED_TERMS, "nodeSelectorTerms"))
    for term in as_list(terms):
        if not isinstance(term, Mapping):
            continue
        for expr in as_list(term.get("matchExpressions")):
            if isinstance(expr, Mapping) and isinstance(expr.get("key"), str):
                keys.add(expr["key"])
        fields = fields or bool(as_list(term.get("matchFields")))
    return frozenset(keys), fields


def _freeze(value: Any) -> Hashable:
    if isinstance(value, Mapping):
        return frozenset((k, _freeze(v)) for k, v in value.items())
    if isinstance(value, list | tuple):
        return tuple(_freeze(v) for v in value)
    return value  # type: ignore[no-any-return]  # str, Decimal, bool: hashable


_SHAPE_FIELDS = tuple(f.name for f in dataclasses.fields(GpuNode) if f.name not in ("name",))


def shape_key(node: GpuNode, per_node: frozenset[str] | set[str]) -> Hashable:
    """Every field of the node but its name, labels without the per-node ones."""
    parts: list[Hashable] = []
    for name in _SHAPE_FIELDS:
        value = getattr(node, name)
        if name == "labels":
            value = {k: v for k, v in value.items() if k not in per_node}
        parts.append(_freeze(value))
    return tuple(parts)


@dataclass(frozen=True)
class Shape:
    """One shape in a snapshot: a representative, every member, their driver class."""

    representative: GpuNode
    members: tuple[GpuNode, ...]
    driver_class: DriverClass | None


class _Members(Sequence[GpuNode]):
    """Nodes of some shapes, never copied into one list unless something reads them by index.

    Rules ask for their count, total allocatable and labels (``allocatable``,
    ``legacy_labels``, ``unlabelled``), which come from the shapes; only a rule that walks
    the nodes pays for them, and only indexing builds a flat tuple.
    """

    def __init__(self) -> None:
        self.shapes: list[tuple[Shape, Sequence[GpuNode]]] = []
        self._size = 0
        self._flat: tuple[GpuNode, ...] | None = None

    def take(self, shape: Shape, members: Sequence[GpuNode]) -> None:
        self.shapes.append((shape, members))
        self._size += len(members)
        self._flat = None

    def __len__(self) -> int:
        return self._size

    def __iter__(self) -> Iterator[GpuNode]:
        for _, members in self.shapes:
            yield from members

    @overload
    def __getitem__(self, index: int) -> GpuNode: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[GpuNode]: ...
    def __getitem__(self, index: int | slice) -> GpuNode | Sequence[GpuNode]:
        if self._flat is None:
            self._flat = tuple(self)
        return self._flat[index]


class _Fitting(_Members):
    """``fitting()``'s answer, carrying its nodes grouped by driver class (for ``classes``)."""

    def __init__(self) -> None:
        super().__init__()
        self.grouped: dict[DriverClass, _Members] = {}


class IndexedInventory(Inventory):
    """An :class:`Inventory` answered per shape: work grows with shapes, not with nodes.

    Immutable, like its base; ``nodes`` is materialized only when something asks for it.
    """

    _shapes: tuple[Shape, ...]
    _per_node: frozenset[str]
    _size: int
    _nodes: tuple[GpuNode, ...] | None

    def __init__(self, shapes: Iterable[Shape], per_node_keys: frozenset[str]) -> None:
        shapes = tuple(shapes)
        object.__setattr__(self, "_shapes", shapes)
        object.__setattr__(self, "_per_node", per_node_keys)
        object.__setattr__(self, "_size", sum(len(s.members) for s in shapes))
        object.__setattr__(self, "_nodes", None)

    @property  # the base's field, computed on demand here
    def nodes(self) -> tuple[GpuNode, ...]:
        """Every GPU node, by name (built on first use)."""
        if self._nodes is None:
            every = (n for s in self._shapes for n in s.members)
            object.__setattr__(self, "_nodes", tuple(sorted(every, key=lambda n: n.name)))
        assert self._nodes is not None
        return self._nodes

    @property
    def size(self) -> int:
        """How many GPU nodes there are."""
        return self._size

    @property
    def shapes(self) -> int:
        """How many distinct shapes the nodes have."""
        return len(self._shapes)

    def _per_node_spec(self, pod_spec: Any) -> bool:
        keys, fields = referenced_keys(pod_spec)
        return fields or not keys.isdisjoint(self._per_node)

    def fits_any(self, pod_spec: Any, *, extended_tolerations: bool = False) -> bool:
        """Whether some node could take a pod with ``pod_spec`` (one call per shape)."""
        pod = PodFilter.of(pod_spec, extended_tolerations)
        if self._per_node_spec(pod_spec):
            return any(pod.fits(n) for s in self._shapes for n in s.members)
        return any(pod.fits(s.representative) for s in self._shapes)

    def fitting(self, pod_spec: Any, *, extended_tolerations: bool = False) -> Sequence[GpuNode]:
        """The nodes that could take a pod with ``pod_spec``, grouped by class as a side dish."""
        out = _Fitting()
        per_node = self._per_node_spec(pod_spec)
        pod = PodFilter.of(pod_spec, extended_tolerations)
        for shape in self._shapes:
            if per_node:
                members: Sequence[GpuNode] = [n for n in shape.members if pod.fits(n)]
            elif pod.fits(shape.representative):
                members = shape.members
            else:
                continue
            if not members:
                continue
            out.take(shape, members)
            if shape.driver_class is not None:
                out.grouped.setdefault(shape.driver_class, _Members()).take(shape, members)
        return out

    def classes(self, nodes: Any = None) -> dict[DriverClass, Sequence[GpuNode]]:
        """Nodes grouped by driver class: precomputed per shape, never recomputed per node."""
        if isinstance(nodes, _Fitting):
            return dict(nodes.grouped)
        if nodes is not None:
            return super().classes(nodes)
        grouped: dict[DriverClass, _Members] = {}
        for shape in self._shapes:
            if shape.driver_class is not None:
                grouped.setdefault(shape.driver_class, _Members()).take(shape, shape.members)
        return dict(grouped)

    def unlabelled(self, nodes: Sequence[GpuNode] | None = None) -> list[GpuNode]:
        """The nodes (of ``nodes``, else all) without driver labels: per shape, not per node."""
        if nodes is None:
            return [n for s in self._shapes if s.driver_class is None for n in s.members]
        if not isinstance(nodes, _Members):
            return super().unlabelled(nodes)
        return [n for shape, members in nodes.shapes if shape.driver_class is None for n in members]

    @property
    def labelled(self) -> bool:
        """Whether any node carries GFD driver labels (one look per shape)."""
        return any(s.driver_class is not None for s in self._shapes)

    @property
    def provider(self) -> Provider | None:
        """The managed Kubernetes service the nodes' labels name (one look per shape)."""
        for provider in PROVIDERS:
            labels = provider.labels
            if any(label in s.representative.labels for s in self._shapes for label in labels):
                return provider
        return None

    def of_class(self, dc: DriverClass) -> Sequence[GpuNode]:
        """The nodes of one driver class."""
        out = _Members()
        for shape in self._shapes:
            if shape.driver_class == dc:
                out.take(shape, shape.members)
        return out

    def allocatable(self, nodes: Sequence[GpuNode], resource: str) -> Decimal:
        """The total of ``resource``: per shape (all its nodes have the same), not per node."""
        if not isinstance(nodes, _Members):
            return super().allocatable(nodes, resource)
        return sum(
            (
                s.representative.allocatable.get(resource, Decimal(0)) * len(m)
                for s, m in nodes.shapes
            ),
            Decimal(0),
        )

    def overlap(
        self, workers: Sequence[GpuNode], scheduler: Sequence[GpuNode], resource: str
    ) -> Overlap:
        """How the workers' and the scheduler's nodes overlap: per shape, not per node.

        A shape both reach wholly counts at once; only a shape that a per-node selector
        splits is compared node by node.
        """
        if not isinstance(workers, _Members) or not isinstance(scheduler, _Members):
            return super().overlap(workers, scheduler, resource)
        mine = {id(shape): members for shape, members in scheduler.shapes}
        groups: Counter[tuple[Decimal, bool]] = Counter()
        elsewhere = False
        for shape, members in workers.shapes:
            units = shape.representative.allocatable.get(resource, Decimal(0))
            both = mine.pop(id(shape), ())
            if len(both) == len(shape.members) or not both:  # all of the shape, or none of it
                groups[units, bool(both)] += len(members)
                elsewhere = elsewhere or len(both) > len(members)
                continue
            names = {n.name for n in both}
            for node in members:
                groups[units, node.name in names] += 1
            elsewhere = elsewhere or bool(names - {n.name for n in members})
        return Overlap(groups, elsewhere or any(mine.values()))

    def legacy_labels(self, nodes: Sequence[GpuNode]) -> bool:
        """Whether any shape of ``nodes`` has only the legacy driver labels."""
        if not isinstance(nodes, _Members):
            return super().legacy_labels(nodes)
        return any(s.representative.uses_legacy_labels for s, _ in nodes.shapes)

    def label_values(self, nodes: Sequence[GpuNode], key: str) -> frozenset[str]:
        """The values of label ``key`` among ``nodes``: one look per shape.

        A shape's nodes share every label but the per-node ones.
        """
        if not isinstance(nodes, _Members) or key in self._per_node:
            return super().label_values(nodes, key)
        return frozenset(s.representative.labels.get(key, "") for s, _ in nodes.shapes)

    def taints(self) -> frozenset[tuple[str, str, str]]:
        """Every taint some GPU node carries (taints are part of a shape: one look per shape)."""
        return frozenset(t for s in self._shapes for t in s.representative.taints)
