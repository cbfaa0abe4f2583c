"""What the nodes of a pool have alike, held once: labels, taints and GPU allocatable.

The nodes of a pool carry the same labels but for a few that are the node's own (its hostname,
GFD's timestamp, any label whose value is its name). Kept as a dict per node, 15,000 GPU nodes
hold 15,000 equal copies of the rest. :func:`shared_labels` keeps one copy of the pool's labels,
with the node's own keys marked, and per node only its own values; the pool's copy lives as long
as a node refers to it. :class:`NodeLabels` reads as the node's labels, in their order. Taints
and allocatable are shared whole (:func:`shared_taints`, :func:`shared_mapping`);
:class:`HeldNode` is a Node reduced to what placement reads, so shared. Pure.
"""

from __future__ import annotations

import functools
import sys
import weakref
from collections.abc import Hashable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from .plain import as_list, as_map
from .shapes import PER_NODE_LABELS

__all__ = ["HeldNode", "NodeLabels", "shared_labels", "shared_mapping", "shared_taints"]

V = TypeVar("V", bound=Hashable)
_OWN = "\0own"  # in a pool's mapping: the node's own value (no label value holds a NUL)


class _Pool(dict[str, str]):
    """A pool's labels, the node's own marked :data:`_OWN` (a dict that can be weakly held)."""

    __slots__ = ("__weakref__",)


class _Shared(dict[str, Any]):
    """A mapping shared by the nodes that have it (a dict that can be weakly held)."""

    __slots__ = ("__weakref__",)


_POOLS: weakref.WeakValueDictionary[tuple[tuple[str, str], ...], _Pool] = (
    weakref.WeakValueDictionary()
)
_SHARED: weakref.WeakValueDictionary[tuple[tuple[str, Hashable], ...], _Shared] = (
    weakref.WeakValueDictionary()
)


class NodeLabels(Mapping[str, str]):
    """One node's labels: its pool's, with its own values for the keys the pool marks."""

    __slots__ = ("_own", "_pool")

    def __init__(self, pool: _Pool, own: tuple[str, ...]) -> None:
        self._pool = pool
        self._own = own  # key, value, key, value, ... in the pool's order

    def __getitem__(self, key: str) -> str:
        value = self._pool[key]
        if value is not _OWN:
            return value
        own = self._own
        for i in range(0, len(own), 2):
            if own[i] == key:
                return own[i + 1]
        raise KeyError(key)  # not reached: the pool marks only keys the node has

    def __iter__(self) -> Iterator[str]:
        return iter(self._pool)

    def __len__(self) -> int:
        return len(self._pool)

    def __contains__(self, key: object) -> bool:
        return key in self._pool

    def __eq__(self, other: object) -> bool:
        if isinstance(other, NodeLabels) and other._pool is self._pool:
            return other._own == self._own
        if isinstance(other, Mapping):
            return len(other) == len(self) and all(
                k in other and other[k] == v for k, v in self.items()
            )
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # as a dict's

    def __repr__(self) -> str:
        return repr(dict(self.items()))

    def __reduce__(self) -> tuple[type[dict[str, str]], tuple[dict[str, str]]]:
        return dict, (dict(self.items()),)  # pickled and copied as the plain dict it reads as


def shared_labels(labels: Mapping[str, str], name: str) -> NodeLabels:
    """``labels`` of node ``name``, sharing the keys and values of its pool with the pool.

    Own keys: :data:`~.shapes.PER_NODE_LABELS` and any label whose value is ``name``. Strings
    are interned, so a fleet holds one copy of each key and value.
    """
    items: list[tuple[str, str]] = []
    own: list[str] = []
    for k, v in labels.items():
        key, value = sys.intern(str(k)), sys.intern(str(v))
        if key in PER_NODE_LABELS or value == name:
            own += (key, value)
            items.append((key, _OWN))
        else:
            items.append((key, value))
    frozen = tuple(items)
    pool = _POOLS.get(frozen)
    if pool is None:
        pool = _POOLS[frozen] = _Pool(frozen)
    return NodeLabels(pool, tuple(own))


def shared_mapping(mapping: Mapping[str, V]) -> Mapping[str, V]:
    """``mapping`` (of hashable values), one for all nodes with an equal one, in its order.

    For what is never changed in place: a node's allocatable, GPU or all of it.
    """
    frozen = tuple((sys.intern(str(k)), v) for k, v in mapping.items())
    found = _SHARED.get(frozen)
    if found is None:
        found = _SHARED[frozen] = _Shared(frozen)
    return found


@functools.lru_cache(maxsize=1024)
def shared_taints(taints: tuple[tuple[str, str, str], ...]) -> tuple[tuple[str, str, str], ...]:
    """``taints``, one tuple for all nodes with the same (the 1,024 combinations seen last)."""
    return taints


@dataclass(frozen=True, slots=True)
class HeldNode:
    """What ``GpuNode.from_node`` reads of a Node, what the pool's nodes have alike held once.

    The operator keeps one for every node under DRA (``admission/decide/dranodes.py``).
    """

    name: str
    labels: Mapping[str, str]
    taints: tuple[tuple[str, str, str], ...]  # (key, value, effect), as from_node reads them
    unschedulable: bool
    allocatable: Mapping[str, Any]  # as the Node says it: quantities, not yet parsed
    ready: tuple[Any, ...]  # the last Ready condition's status, () without one

    @classmethod
    def of(cls, obj: Mapping[str, Any]) -> HeldNode:
        """What placement reads of Node ``obj``."""
        meta, spec, status = (as_map(obj.get(k)) for k in ("metadata", "spec", "status"))
        name = sys.intern(str(meta.get("name", "")))
        ready = [c for c in as_list(status.get("conditions")) if as_map(c).get("type") == "Ready"]
        taints = tuple(
            (str(t.get("key", "")), str(t.get("value", "")), str(t.get("effect", "")))
            for t in as_list(spec.get("taints"))
            if isinstance(t, Mapping)
        )
        allocatable = {
            k: v if isinstance(v, Hashable) else str(v)
            for k, v in as_map(status.get("allocatable")).items()
        }
        return cls(
            name=name,
            labels=shared_labels(as_map(meta.get("labels")), name),
            taints=shared_taints(taints),
            unschedulable=spec.get("unschedulable") is True,
            allocatable=shared_mapping(allocatable),
            ready=tuple(as_map(c).get("status") for c in ready[-1:]),
        )

    def node(self) -> dict[str, Any]:
        """A Node object with only what was kept, for ``GpuNode.from_node``."""
        return {
            "metadata": {"name": self.name, "labels": self.labels},
            "spec": {
                "taints": [{"key": k, "value": v, "effect": e} for k, v, e in self.taints],
                "unschedulable": self.unschedulable,
            },
            "status": {
                "allocatable": self.allocatable,
                "conditions": [{"type": "Ready", "status": s} for s in self.ready],
            },
        }
