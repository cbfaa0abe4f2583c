"""GPU nodes from three watched kinds: Nodes, their ResourceSlices and the DeviceClasses.

Under DRA a node's GPUs are not in its Node object: its driver publishes them in ResourceSlices,
and DeviceClasses say which devices are GPUs and by which extended-resource names they are asked
for. :class:`DraNodes` keeps what :meth:`GpuNode.from_node
<dask_gpu_parity.core.inventory.GpuNode.from_node>` reads of each (a Node reduced to its name,
labels, taints, allocatable and readiness, what a pool's nodes have alike held once; each slice's
devices, parsed once) and feeds the :class:`~.nodeindex.NodeIndex` one node at a time: a Node or
slice event recomputes the nodes it touches (its node; every node of its pool when the pool's
newest generation changes), never the fleet. A DeviceClass change re-reads every node once, after
the first complete LIST of classes (before it, nodes are read with NVIDIA's catalogue and re-read
once the classes are in).

The DeviceClasses read from the cluster extend NVIDIA's built-in catalogue, as ``check
--device-classes`` does. Pure: plain data in and out, no I/O.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from dask_gpu_parity.core.deviceclasses import (
    NVIDIA_CLASSES,
    DeviceClass,
    DeviceClasses,
    device_class,
)
from dask_gpu_parity.core.inventory import GpuNode
from dask_gpu_parity.core.nodelabels import HeldNode
from dask_gpu_parity.core.plain import as_map
from dask_gpu_parity.core.slices import Device, slice_devices, slice_home

from .nodeindex import NodeChange, NodeIndex

__all__ = ["DRA_VERSION", "DraNodes"]

DRA_VERSION = "resource.k8s.io/v1"  # what the operator lists and watches


@dataclass(frozen=True)
class _Slice:
    """What one ResourceSlice says: whose devices, of which pool and generation."""

    node: str
    pool: tuple[str, str]  # (driver, pool name)
    generation: int
    devices: tuple[Device, ...]


def _typed(obj: Mapping[str, Any], kind: str) -> Mapping[str, Any]:
    """The object with its kind and version: a LIST's items carry neither (the List does)."""
    if obj.get("kind") == kind and obj.get("apiVersion"):
        return obj
    return {**obj, "kind": kind, "apiVersion": obj.get("apiVersion") or DRA_VERSION}


def _slice(obj: Mapping[str, Any]) -> _Slice | None:
    """One slice's devices, ``None`` for a slice of no single node (network-attached devices)."""
    spec = as_map(obj.get("spec"))
    home = slice_home(spec)
    if home is None:
        return None
    devices = tuple(_interned(d) for d in slice_devices(spec))
    return _Slice(home.node, home.pool, home.generation, devices)


# A device's own identity (NVIDIA's driver publishes these per GPU or MIG device): never part of
# a driver class, and left out here so that a fleet's devices share a few dozen records (40,000
# GPUs held 18 MiB of attribute maps with them). A DeviceClass that selects single GPUs by one of
# these is not a driver class; the operator does not count its devices.
IDENTITY_ATTRIBUTES = frozenset({"uuid", "parentUUID", "pciBusID", "pcieRoot", "index", "minor"})


def _interned(device: Device) -> Device:
    """The device without its identity attributes, one shared record per distinct device."""
    items = tuple(
        sorted(
            (sys.intern(k), sys.intern(v))
            for k, v in device.attributes.items()
            if k not in IDENTITY_ATTRIBUTES
        )
    )
    return _shared(sys.intern(device.driver), device.name, items, device.memory)


@functools.lru_cache(maxsize=4096)
def _shared(
    driver: str, name: str, items: tuple[tuple[str, str], ...], memory: str | None
) -> Device:
    return Device(driver, name, MappingProxyType(dict(items)), memory)


class DraNodes:
    """Nodes, ResourceSlices and DeviceClasses as watched, fed into a :class:`NodeIndex`."""

    def __init__(self, index: NodeIndex) -> None:
        self.index = index
        self._nodes: dict[str, HeldNode] = {}  # by name
        self._slices: dict[str, _Slice] = {}  # by object key
        self._by_node: dict[str, set[str]] = {}  # node name -> its slices' keys
        self._pools: dict[tuple[str, str], dict[str, int]] = {}  # pool -> slice key -> generation
        self._classes: dict[str, DeviceClass] = {}  # by object key
        self._classes_listed = False
        self._held = True  # until release(): events are kept, nodes are not read yet

    @property
    def slices(self) -> int:
        """How many ResourceSlices of single nodes are held."""
        return len(self._slices)

    # -- nodes -----------------------------------------------------------------------------

    def node_upserted(self, obj: Mapping[str, Any], name: str) -> list[NodeChange]:
        """A Node was listed, added or changed."""
        held = HeldNode.of(obj)
        if self._nodes.get(name) == held:
            return []  # a heartbeat: nothing placement reads changed
        self._nodes[name] = held
        return [self._recompute(name)]

    def node_deleted(self, name: str) -> list[NodeChange]:
        """A Node is gone (its slices stay until their own deletion)."""
        self._nodes.pop(name, None)
        return [self.index.delete(name)]

    # -- slices ----------------------------------------------------------------------------

    def slice_upserted(self, obj: Mapping[str, Any], key: str) -> list[NodeChange]:
        """A ResourceSlice was listed, added or changed."""
        new = _slice(obj)
        old = self._slices.get(key)
        if new == old:
            return []
        touched = self._forget(key)
        if new is not None:
            newest = self._newest(new.pool)
            self._slices[key] = new
            self._by_node.setdefault(new.node, set()).add(key)
            self._pools.setdefault(new.pool, {})[key] = new.generation
            touched.add(new.node)
            if newest != self._newest(new.pool):
                touched |= self._pool_nodes(new.pool)
        return [self._recompute(n) for n in sorted(touched)]

    def slice_deleted(self, key: str) -> list[NodeChange]:
        """A ResourceSlice is gone."""
        return [self._recompute(n) for n in sorted(self._forget(key))]

    def _forget(self, key: str) -> set[str]:
        """Drop slice ``key``; the nodes whose devices that may change."""
        old = self._slices.pop(key, None)
        if old is None:
            return set()
        touched = {old.node}
        keys = self._by_node.get(old.node)
        if keys is not None:
            keys.discard(key)
            if not keys:
                del self._by_node[old.node]
        pool = self._pools[old.pool]
        newest = max(pool.values())
        del pool[key]
        if not pool:
            del self._pools[old.pool]
        elif max(pool.values()) != newest:
            touched |= self._pool_nodes(old.pool)
        return touched

    def _newest(self, pool: tuple[str, str]) -> int | None:
        generations = self._pools.get(pool)
        return max(generations.values()) if generations else None

    def _pool_nodes(self, pool: tuple[str, str]) -> set[str]:
        return {self._slices[k].node for k in self._pools.get(pool, {})}

    def devices(self, name: str) -> tuple[Device, ...]:
        """The devices of node ``name``: its slices of each pool's newest generation."""
        found: list[Device] = []
        for key in self._by_node.get(name, ()):
            held = self._slices[key]
            if held.generation == self._newest(held.pool):
                found.extend(held.devices)
        return tuple(found)

    # -- DeviceClasses ---------------------------------------------------------------------

    def class_upserted(self, obj: Mapping[str, Any], key: str) -> list[NodeChange]:
        """A DeviceClass was listed, added or changed."""
        found = device_class(_typed(obj, "DeviceClass"))
        if found is None or self._classes.get(key) == found:
            return []
        self._classes[key] = found
        return self._reclassify()

    def class_deleted(self, key: str) -> list[NodeChange]:
        """A DeviceClass is gone."""
        if self._classes.pop(key, None) is None:
            return []
        return self._reclassify()

    def classes_listed(self) -> list[NodeChange]:
        """The DeviceClasses have been listed in full: every node is read with them once."""
        if self._classes_listed:
            return []
        self._classes_listed = True
        return self._reclassify()

    def catalogue(self) -> DeviceClasses:
        """NVIDIA's catalogue extended with the cluster's DeviceClasses."""
        return NVIDIA_CLASSES.extend(self._classes.values())

    def _reclassify(self) -> list[NodeChange]:
        if not self._classes_listed or self._held:
            return []  # nodes are re-read once the first LIST is complete
        catalogue = self.catalogue()
        self.index.classes = catalogue
        return [self._recompute(name) for name in sorted(self._nodes)]

    # -- the index -------------------------------------------------------------------------

    def release(self) -> list[NodeChange]:
        """Read every node once, now that Nodes, slices and classes are listed in full.

        Until then events are only kept: a node is read once at start, not once for its Node,
        once for its slice and once more for the classes.
        """
        if not self._held:
            return []
        self._held = False
        self._classes_listed = True
        self.index.classes = self.catalogue()
        return [self._recompute(name) for name in sorted(self._nodes)]

    def _recompute(self, name: str) -> NodeChange:
        if self._held:
            return NodeChange(name, None, None, changed=False, shapes_changed=False)
        node = self._nodes.get(name)
        if node is None:  # slices of a node not (yet) listed: not in the inventory
            return self.index.delete(name)
        return self.index.upsert(
            GpuNode.from_node(node.node(), self.devices(name), self.index.classes), name
        )
