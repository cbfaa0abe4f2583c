"""GPU nodes by shape: what lets the inventory ask each placement question once per shape.

A node's *shape* is everything placement reads of it except what is unique to the node: its
name and its per-node labels (``kubernetes.io/hostname``, GFD's ``nvidia.com/gfd.timestamp``,
and any label whose value is the node's name). Nodes of one shape answer every placement
question alike, so ``node_fits`` runs once per shape, not once per node: a pool of 2,000
identical nodes costs one call. A pod that selects on a per-node label or on a field
(``matchFields``) is the exception: then every node is asked. Pure.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Hashable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any, overload

from .nodes import DriverClass, GpuNode
from .plain import as_list, as_map, get_in

__all__ = [
    "PER_NODE_LABELS",
    "Nodes",
    "Overlap",
    "Shape",
    "group",
    "overlap",
    "own_name_keys",
    "referenced_keys",
    "shape_key",
]

PER_NODE_LABELS = frozenset({"kubernetes.io/hostname", "nvidia.com/gfd.timestamp"})
_REQUIRED_TERMS = ("nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution")


def own_name_keys(labels: Mapping[str, str], name: str) -> set[str]:
    """The keys of the labels whose value is the node's own name: per-node labels too."""
    return {k for k, v in labels.items() if v == name}


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
class Overlap:
    """The workers' nodes by allocatable GPUs, and where the scheduler can go among them.

    ``groups`` counts the workers' nodes by (allocatable units of the resource, whether the
    scheduler fits there too); ``elsewhere``: the scheduler fits some node the workers cannot
    use, so it need not take one of their GPUs.
    """

    groups: Counter[tuple[Decimal, bool]]
    elsewhere: bool


@dataclass(frozen=True, eq=False)
class Shape:
    """One shape: a representative, every member, their driver class."""

    representative: GpuNode
    members: tuple[GpuNode, ...]
    driver_class: DriverClass | None


def group(nodes: Iterable[GpuNode], per_node: frozenset[str]) -> list[Shape]:
    """``nodes`` by shape, in the order their shapes first appear; members in their order."""
    grouped: dict[Hashable, list[GpuNode]] = {}
    for node in nodes:
        grouped.setdefault(shape_key(node, per_node), []).append(node)
    return [Shape(m[0], tuple(m), m[0].driver_class) for m in grouped.values()]


class Nodes(Sequence[GpuNode]):
    """Nodes of some shapes, never copied into one list unless something reads them by index.

    What the inventory hands out (``fitting``, ``of_class``, ``classes``, ``pools``,
    ``unlabelled``) and takes back: rules ask for their count, total allocatable and labels,
    which come from the shapes; only a rule that walks the nodes pays for them, and only
    indexing builds a flat tuple. Built by the inventory; read-only to everyone else.
    """

    __slots__ = ("_flat", "_size", "parts")

    def __init__(self, parts: Iterable[tuple[Shape, Sequence[GpuNode]]] = ()) -> None:
        self.parts: list[tuple[Shape, Sequence[GpuNode]]] = []
        self._size = 0
        self._flat: tuple[GpuNode, ...] | None = None
        for shape, members in parts:
            self.take(shape, members)

    def take(self, shape: Shape, members: Sequence[GpuNode]) -> None:
        """Add ``members`` (all of ``shape``'s, or some) while the inventory builds this."""
        self.parts.append((shape, members))
        self._size += len(members)
        self._flat = None

    def __len__(self) -> int:
        return self._size

    def __iter__(self) -> Iterator[GpuNode]:
        for _, members in self.parts:
            yield from members

    @overload
    def __getitem__(self, index: int) -> GpuNode: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[GpuNode]: ...
    def __getitem__(self, index: int | slice) -> GpuNode | Sequence[GpuNode]:
        if self._flat is None:
            self._flat = tuple(self)
        return self._flat[index]


def overlap(workers: Nodes, scheduler: Nodes, resource: str) -> Overlap:
    """How ``workers`` (from ``fitting``) and ``scheduler`` (from ``fitting``) share nodes.

    A shape both reach wholly counts at once; only a shape that a per-node selector
    splits is compared node by node.
    """
    mine = {id(shape): members for shape, members in scheduler.parts}
    groups: Counter[tuple[Decimal, bool]] = Counter()
    elsewhere = False
    for shape, members in workers.parts:
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
