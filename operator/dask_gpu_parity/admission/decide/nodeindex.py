"""The GPU nodes as the operator keeps them: fed one watch event at a time, handed out whole.

:class:`NodeIndex` is changed by one watch event at a time (a node added, changed or removed: no
rebuild, no sort), keeping the nodes grouped by shape (``core/shapes.py``), and hands out an
immutable core :class:`~dask_gpu_parity.core.inventory.Inventory` snapshot, rebuilt from the
shapes only after a change. Placement questions are the inventory's to answer, never the
index's. Per-node labels are those of ``core/shapes.py`` and any label whose value is the node's
name, as ``Inventory.from_nodes`` reads them. Pure: plain data in and out, no I/O.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Hashable
from dataclasses import dataclass

from dask_gpu_parity.core.deviceclasses import NVIDIA_CLASSES, DeviceClasses
from dask_gpu_parity.core.inventory import DriverClass, GpuNode, Inventory
from dask_gpu_parity.core.nodelabels import shared_labels, shared_mapping, shared_taints
from dask_gpu_parity.core.shapes import PER_NODE_LABELS, Shape, own_name_keys, shape_key

__all__ = ["PER_NODE_LABELS", "NodeChange", "NodeIndex"]


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

    __slots__ = ("driver_class", "key", "members", "snapshot")

    def __init__(self, key: Hashable, driver_class: DriverClass | None) -> None:
        self.key = key  # the one copy of the shape's key; nodes refer to it
        self.driver_class = driver_class
        self.members: dict[str, GpuNode] = {}
        self.snapshot: Shape | None = None


class NodeIndex:
    """GPU nodes by name and by shape, kept up to date one event at a time."""

    def __init__(self) -> None:
        self._nodes: dict[str, tuple[GpuNode, Hashable]] = {}
        self._groups: dict[Hashable, _Group] = {}
        self._per_node: set[str] = set(PER_NODE_LABELS)
        self._snapshot: Inventory | None = None
        self._counts: dict[DriverClass | None, int] = {}
        self._classes = NVIDIA_CLASSES
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

    @property
    def classes(self) -> DeviceClasses:
        """The DeviceClasses the nodes were read with (snapshots carry them)."""
        return self._classes

    @classes.setter
    def classes(self, classes: DeviceClasses) -> None:
        self._classes = classes
        self._changed(shapes_changed=False)

    def upsert(self, node: GpuNode | None, name: str) -> NodeChange:
        """Add or replace node ``name``; ``None`` (not a GPU node, or no longer) removes it."""
        if node is None:
            return self.delete(name)
        node = _interned(node)
        self._per_node |= own_name_keys(node.labels, name)
        old = self._nodes.get(name)
        if old is not None and old[0] == node:
            dc = self._groups[old[1]].driver_class
            return NodeChange(name, dc, dc, changed=False, shapes_changed=False)
        before, shapes_changed = self._remove(name) if old is not None else (None, False)
        key = shape_key(node, self._per_node)
        group = self._groups.get(key)
        if group is None:
            group = self._groups[key] = _Group(key, node.driver_class)
            shapes_changed = True
        group.members[name] = node
        group.snapshot = None
        self._nodes[name] = (node, group.key)  # not ``key``: an equal copy per node
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

    def snapshot(self) -> Inventory | None:
        """The inventory as of now (``None`` without GPU nodes); the same object until a change."""
        if self._snapshot is None and self._nodes:
            shapes = []
            for group in self._groups.values():
                if group.snapshot is None:
                    members = tuple(group.members.values())
                    group.snapshot = Shape(members[0], members, group.driver_class)
                shapes.append(group.snapshot)
            self._snapshot = Inventory(shapes, frozenset(self._per_node), self._classes)
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
    """The node sharing with its pool what the pool's nodes have alike (``core/nodelabels.py``)."""
    return dataclasses.replace(
        node,
        name=sys.intern(node.name),
        labels=shared_labels(node.labels, node.name),
        taints=shared_taints(node.taints),
        allocatable=shared_mapping(node.allocatable),
    )
