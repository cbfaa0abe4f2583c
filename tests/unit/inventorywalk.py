"""A per-node reference for the inventory: every question answered by walking every node.

``same_answers`` holds the core inventory's per-shape answers to it; shared by
``test_inventory.py`` and ``test_nodeindex.py``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from decimal import Decimal
from typing import Any

from dask_gpu_parity.admission.decide.nodeindex import NodeIndex
from dask_gpu_parity.core.inventory import (
    PER_NODE_LABELS,
    DriverClass,
    GpuNode,
    Inventory,
    Overlap,
    PodFilter,
    Shape,
)
from dask_gpu_parity.core.providers import PROVIDERS, PoolClass

UPGRADE_STATE = "nvidia.com/gpu-driver-upgrade-state"  # the GPU Operator's, during upgrades


def indexed(manifests: list[dict[str, Any]]) -> Inventory:
    index = NodeIndex()
    for manifest in manifests:
        index.upsert(GpuNode.from_node(manifest), manifest["metadata"]["name"])
    snapshot = index.snapshot()
    assert snapshot is not None
    return snapshot


class Walk:
    """The reference: every question answered by walking the nodes, one by one."""

    def __init__(self, manifests: Iterable[Mapping[str, Any]]) -> None:
        found = (GpuNode.from_node(m) for m in manifests)
        self.nodes = tuple(sorted((n for n in found if n), key=lambda n: n.name))

    @property
    def size(self) -> int:
        return len(self.nodes)

    def fits_any(self, pod_spec: Any) -> bool:
        return any(PodFilter.of(pod_spec).fits(n) for n in self.nodes)

    def fitting(self, pod_spec: Any) -> list[GpuNode]:
        return [n for n in self.nodes if PodFilter.of(pod_spec).fits(n)]

    def classes(self, nodes: Sequence[GpuNode] | None = None) -> dict[DriverClass, list[GpuNode]]:
        grouped: dict[DriverClass, list[GpuNode]] = {}
        for node in self.nodes if nodes is None else nodes:
            if node.driver_class is not None:
                grouped.setdefault(node.driver_class, []).append(node)
        return grouped

    def of_class(self, dc: DriverClass) -> list[GpuNode]:
        return [n for n in self.nodes if n.driver_class == dc]

    def unlabelled(self, nodes: Sequence[GpuNode] | None = None) -> list[GpuNode]:
        return [n for n in (self.nodes if nodes is None else nodes) if n.driver_class is None]

    @property
    def labelled(self) -> bool:
        return any(n.driver_class is not None for n in self.nodes)

    @property
    def provider(self) -> object:
        for provider in PROVIDERS:
            if any(label in n.labels for n in self.nodes for label in provider.labels):
                return provider
        return None

    def pools(self, nodes: Sequence[GpuNode]) -> dict[PoolClass, list[GpuNode]]:
        grouped: dict[PoolClass, list[GpuNode]] = {}
        for node in nodes:
            for provider in PROVIDERS:
                if pool := node.labels.get(provider.pool_label):
                    grouped.setdefault(PoolClass(provider.pool_label, pool), []).append(node)
                    break
        return grouped

    def allocatable(self, nodes: Sequence[GpuNode], resource: str) -> Decimal:
        return sum((n.allocatable.get(resource, Decimal(0)) for n in nodes), Decimal(0))

    def overlap(
        self, workers: Sequence[GpuNode], scheduler: Sequence[GpuNode], resource: str
    ) -> Overlap:
        mine = {n.name for n in scheduler}
        theirs = {n.name for n in workers}
        groups = Counter((n.allocatable.get(resource, Decimal(0)), n.name in mine) for n in workers)
        return Overlap(groups, bool(mine - theirs))

    def legacy_labels(self, nodes: Sequence[GpuNode]) -> bool:
        return any(n.uses_legacy_labels for n in nodes)

    def label_values(self, nodes: Sequence[GpuNode], key: str) -> frozenset[str]:
        return frozenset(n.labels.get(key, "") for n in nodes)

    def taints(self) -> frozenset[tuple[str, str, str]]:
        return frozenset(t for n in self.nodes for t in n.taints)

    def out_of_service(self) -> tuple[str, ...]:
        return tuple(sorted(n.name for n in self.nodes if n.unschedulable or not n.ready))

    def blocking_taints(self) -> frozenset[tuple[str, str, str]]:
        return frozenset(
            t
            for n in self.nodes
            if n.ready and not n.unschedulable
            for t in n.taints
            if t[2] in ("NoSchedule", "NoExecute")
        )


def one_shape_per_node(manifests: Iterable[Mapping[str, Any]]) -> Inventory:
    """An inventory whose every shape is one node: its answers are a walk over the nodes."""
    nodes = Walk(manifests).nodes
    return Inventory([Shape(n, (n,), n.driver_class) for n in nodes], PER_NODE_LABELS)


def names(nodes: Any) -> list[str]:
    return sorted(n.name for n in nodes)


def same_answers(plain: Walk, fast: Inventory, pod_spec: Any, other: Any = None) -> None:
    assert fast.size == plain.size
    # Capacity: how the nodes of one pod (workers) and another (the scheduler) overlap.
    other = {} if other is None else other
    for resource in ("nvidia.com/gpu", "nvidia.com/mig-1g.10gb"):
        assert fast.overlap(fast.fitting(pod_spec), fast.fitting(other), resource) == plain.overlap(
            plain.fitting(pod_spec), plain.fitting(other), resource
        )
    assert fast.fits_any(pod_spec) == plain.fits_any(pod_spec)
    assert names(fast.fitting(pod_spec)) == names(plain.fitting(pod_spec))
    fast_classes = fast.classes(fast.fitting(pod_spec))
    plain_classes = plain.classes(plain.fitting(pod_spec))
    assert {dc: names(ns) for dc, ns in fast_classes.items()} == {
        dc: names(ns) for dc, ns in plain_classes.items()
    }
    assert {dc: names(ns) for dc, ns in fast.classes().items()} == {
        dc: names(ns) for dc, ns in plain.classes().items()
    }
    for dc, members in plain_classes.items():
        for resource in ("nvidia.com/gpu", "nvidia.com/mig-1g.10gb"):
            assert fast.allocatable(fast_classes[dc], resource) == plain.allocatable(
                members, resource
            )
        assert fast.legacy_labels(fast_classes[dc]) == plain.legacy_labels(members)
        for key in (UPGRADE_STATE, "kubernetes.io/hostname", "zone"):
            assert fast.label_values(fast_classes[dc], key) == plain.label_values(members, key)
    for dc in plain.classes():
        assert names(fast.of_class(dc)) == names(plain.of_class(dc))
        assert fast.legacy_labels(fast.of_class(dc)) == plain.legacy_labels(plain.of_class(dc))
        assert fast.allocatable(fast.of_class(dc), "nvidia.com/gpu") == plain.allocatable(
            plain.of_class(dc), "nvidia.com/gpu"
        )
    assert names(fast.nodes) == names(plain.nodes)
    assert fast.taints() == plain.taints()
    assert fast.out_of_service() == plain.out_of_service()
    assert fast.blocking_taints() == plain.blocking_taints()
    assert fast.labelled == plain.labelled
    assert fast.provider == plain.provider
    assert names(fast.unlabelled()) == names(plain.unlabelled())
    fitting = fast.fitting(pod_spec)
    assert names(fast.unlabelled(fitting)) == names(plain.unlabelled(plain.fitting(pod_spec)))
    assert {p: names(ns) for p, ns in fast.pools(fitting).items()} == {
        p: names(ns) for p, ns in plain.pools(plain.fitting(pod_spec)).items()
    }
