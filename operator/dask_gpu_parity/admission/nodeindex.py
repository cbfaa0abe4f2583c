"""The GPU nodes as the operator keeps them: grouped by shape, changed one node at a time.

A node's *shape* is everything placement reads of it except what is unique to the node: its
name and its per-node labels (``kubernetes.io/hostname``, GFD's ``nvidia.com/gfd.timestamp``,
and any label whose value is the node's name). Nodes of one shape answer every placement
question alike, so :class:`IndexedInventory` asks ``node_fits`` once per shape, not once per
node: a pool of 2,000 identical nodes costs one call. A pod that selects on a per-node label or
on a field (``matchFields``) is the exception: then every node is asked, as before.

:class:`NodeIndex` is changed by one watch event at a time (no rebuild, no sort) and hands out
an immutable :class:`IndexedInventory` snapshot, rebuilt from the shapes only after a change.
Pure: plain data in and out, no I/O.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from dask_gpu_parity.core.inventory import DriverClass, GpuNode, Inventory, node_fits
from dask_gpu_parity.core.plain import as_list, as_map, get_in
from dask_gpu_parity.core.providers import PROVIDERS, Provider

__all__ = ["PER_NODE_LABELS", "IndexedInventory", "NodeChange", "NodeIndex", "referenced_keys"]

PER_NODE_LABELS = frozenset({"kubernetes.io/hostname", "nvidia.com/gfd.timestamp"})
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


def _shape(node: GpuNode, per_node: frozenset[str] | set[str]) -> Hashable:
    """Every field of the node but its name, labels without the per-node ones."""
    parts: list[Hashable] = []
    for name in _SHAPE_FIELDS:
        value = getattr(node, name)
        if name == "labels":
            value = {k: v for k, v in value.items() if k not in per_node}
        parts.append(_freeze(value))
    return tuple(parts)


@dataclass(frozen=True)
class _Shape:
    """One shape in a snapshot: a representative, every member, their driver class."""

    representative: GpuNode
    members: tuple[GpuNode, ...]
    driver_class: DriverClass | None


class _Members(list[GpuNode]):
    """Nodes, and the shapes they come from with how many of each (for sums per shape)."""

    def __init__(self) -> None:
        super().__init__()
        self.shapes: list[tuple[_Shape, int]] = []

    def take(self, shape: _Shape, members: Sequence[GpuNode]) -> None:
        self.extend(members)
        self.shapes.append((shape, len(members)))


class _Fitting(_Members):
    """``fitting()``'s answer, carrying its nodes grouped by driver class (for ``classes``)."""

    def __init__(self) -> None:
        super().__init__()
        self.grouped: dict[DriverClass, _Members] = {}


class IndexedInventory(Inventory):
    """An :class:`Inventory` answered per shape: work grows with shapes, not with nodes.

    Immutable, like its base; ``nodes`` is materialized only when something asks for it.
    """

    _shapes: tuple[_Shape, ...]
    _per_node: frozenset[str]
    _size: int
    _nodes: tuple[GpuNode, ...] | None

    def __init__(self, shapes: Iterable[_Shape], per_node_keys: frozenset[str]) -> None:
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
        ert = extended_tolerations
        if self._per_node_spec(pod_spec):
            return any(node_fits(n, pod_spec, ert) for s in self._shapes for n in s.members)
        return any(node_fits(s.representative, pod_spec, ert) for s in self._shapes)

    def fitting(self, pod_spec: Any, *, extended_tolerations: bool = False) -> list[GpuNode]:
        """The nodes that could take a pod with ``pod_spec``, grouped by class as a side dish."""
        out = _Fitting()
        per_node, ert = self._per_node_spec(pod_spec), extended_tolerations
        for shape in self._shapes:
            if per_node:
                members: Sequence[GpuNode] = [
                    n for n in shape.members if node_fits(n, pod_spec, ert)
                ]
            elif node_fits(shape.representative, pod_spec, ert):
                members = shape.members
            else:
                continue
            if not members:
                continue
            out.take(shape, members)
            if shape.driver_class is not None:
                out.grouped.setdefault(shape.driver_class, _Members()).take(shape, members)
        return out

    def classes(self, nodes: Any = None) -> dict[DriverClass, list[GpuNode]]:
        """Nodes grouped by driver class: precomputed per shape, never recomputed per node."""
        if isinstance(nodes, _Fitting):
            return dict(nodes.grouped)
        if nodes is not None:
            return super().classes(nodes)
        grouped: dict[DriverClass, list[GpuNode]] = {}
        for shape in self._shapes:
            if shape.driver_class is not None:
                members = grouped.setdefault(shape.driver_class, _Members())
                assert isinstance(members, _Members)
                members.take(shape, shape.members)
        return grouped

    def unlabelled(self, nodes: Sequence[GpuNode] | None = None) -> list[GpuNode]:
        """The nodes (of ``nodes``, else all) without driver labels: per shape, not per node."""
        if nodes is None:
            return [n for s in self._shapes if s.driver_class is None for n in s.members]
        if not isinstance(nodes, _Members):
            return super().unlabelled(nodes)
        out: list[GpuNode] = []
        at = 0
        for shape, count in nodes.shapes:  # a shape's members lie together, in shape order
            if shape.driver_class is None:
                out.extend(nodes[at : at + count])
            at += count
        return out

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

    def of_class(self, dc: DriverClass) -> list[GpuNode]:
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
            (s.representative.allocatable.get(resource, Decimal(0)) * n for s, n in nodes.shapes),
            Decimal(0),
        )

    def legacy_labels(self, nodes: Sequence[GpuNode]) -> bool:
        """Whether any shape of ``nodes`` has only the legacy driver labels."""
        if not isinstance(nodes, _Members):
            return super().legacy_labels(nodes)
        return any(s.representative.uses_legacy_labels for s, _ in nodes.shapes)


@dataclass(frozen=True)
class NodeChange:
    """What one watch event changed in the index."""

    name: str
    before: DriverClass | None  # the node's driver class before (None: unknown or absent)
    after: DriverClass | None
    changed: bool  # the node's reduced form changed (False: a heartbeat, say)
    shapes_changed: bool  # a shape appeared or disappeared: verdicts may change anywhere


class _Group:
    """A shape's live members (mutable; snapshots copy them into tuples)."""

    __slots__ = ("driver_class", "members", "snapshot")

    def __init__(self, driver_class: DriverClass | None) -> None:
        self.driver_class = driver_class
        self.members: dict[str, GpuNode] = {}
        self.snapshot: _Shape | None = None


class NodeIndex:
    """GPU nodes by name and by shape, kept up to date one event at a time."""

    def __init__(self) -> None:
        self._nodes: dict[str, tuple[GpuNode, Hashable]] = {}
        self._groups: dict[Hashable, _Group] = {}
        self._per_node: set[str] = set(PER_NODE_LABELS)
        self._snapshot: IndexedInventory | None = None
        self._counts: dict[DriverClass | None, int] = {}
        self.version = 0  # bumps on every change of the inventory
        self.shapes_version = 0  # bumps when a shape appears or disappears

    def __len__(self) -> int:
        return len(self._nodes)

    def driver_class(self, node_name: str) -> DriverClass | None:
        """The driver class of a GPU node by name (``None``: not a labelled GPU node)."""
        entry = self._nodes.get(node_name)
        return self._groups[entry[1]].driver_class if entry else None

    def class_counts(self) -> dict[DriverClass | None, int]:
        """GPU nodes per driver class (``None``: no driver labels); kept, not counted."""
        return {dc: n for dc, n in self._counts.items() if n}

    def upsert(self, node: GpuNode | None, name: str) -> NodeChange:
        """Add or replace node ``name``; ``None`` (not a GPU node, or no longer) removes it."""
        if node is None:
            return self.delete(name)
        node = _interned(node)
        self._per_node.update(k for k, v in node.labels.items() if v == name)
        old = self._nodes.get(name)
        if old is not None and old[0] == node:
            dc = self._groups[old[1]].driver_class
            return NodeChange(name, dc, dc, changed=False, shapes_changed=False)
        before, shapes_changed = self._remove(name) if old is not None else (None, False)
        key = _shape(node, self._per_node)
        group = self._groups.get(key)
        if group is None:
            group = self._groups[key] = _Group(node.driver_class)
            shapes_changed = True
        group.members[name] = node
        group.snapshot = None
        self._nodes[name] = (node, key)
        self._counts[group.driver_class] = self._counts.get(group.driver_class, 0) + 1
        self._changed(shapes_changed)
        return NodeChange(name, before, group.driver_class, True, shapes_changed)

    def delete(self, name: str) -> NodeChange:
        """Forget node ``name`` (deleted, or no longer a GPU node)."""
        if name not in self._nodes:
            return NodeChange(name, None, None, changed=False, shapes_changed=False)
        before, shapes_changed = self._remove(name)
        self._changed(shapes_changed)
        return NodeChange(name, before, None, True, shapes_changed)

    def names(self) -> set[str]:
        """Names of the nodes held (for a relist to find the ones that went)."""
        return set(self._nodes)

    def snapshot(self) -> IndexedInventory | None:
        """The inventory as of now (``None`` without GPU nodes); the same object until a change."""
        if self._snapshot is None and self._nodes:
            shapes = []
            for group in self._groups.values():
                if group.snapshot is None:
                    members = tuple(group.members.values())
                    group.snapshot = _Shape(members[0], members, group.driver_class)
                shapes.append(group.snapshot)
            self._snapshot = IndexedInventory(shapes, frozenset(self._per_node))
        return self._snapshot

    def _remove(self, name: str) -> tuple[DriverClass | None, bool]:
        _, shape = self._nodes.pop(name)
        group = self._groups[shape]
        del group.members[name]
        group.snapshot = None
        self._counts[group.driver_class] -= 1
        if not group.members:
            del self._groups[shape]
            return group.driver_class, True
        return group.driver_class, False

    def _changed(self, shapes_changed: bool) -> None:
        self._snapshot = None
        self.version += 1
        if shapes_changed:
            self.shapes_version += 1


def _interned(node: GpuNode) -> GpuNode:
    """The node with its label strings interned: thousands of nodes share one copy of each."""
    labels = {sys.intern(k): sys.intern(v) for k, v in node.labels.items()}
    return dataclasses.replace(node, name=sys.intern(node.name), labels=labels)
