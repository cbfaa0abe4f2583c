"""The GPU node inventory: the questions placement rules ask about a cluster's GPU nodes.

The inventory keeps only GPU nodes (:mod:`.nodes`), and of them only what placement needs, so its
size does not grow with CPU-only nodes. Whether one pod fits one node is :mod:`.fits`; both are
re-exported here.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from .fits import PodFilter, gpu_demand, node_fits, pod_gpu_demand, toleration_matches
from .nodes import CUDA_FULL, DRIVER_FULL, DriverClass, GpuNode, driver_class
from .providers import PROVIDERS, PoolClass, Provider

__all__ = [
    "CUDA_FULL",
    "DRIVER_FULL",
    "DriverClass",
    "GpuNode",
    "Inventory",
    "Overlap",
    "PodFilter",
    "driver_class",
    "gpu_demand",
    "node_fits",
    "pod_gpu_demand",
    "toleration_matches",
]


@dataclass(frozen=True)
class Overlap:
    """The workers' nodes by allocatable GPUs, and where the scheduler can go among them.

    ``groups`` counts the workers' nodes by (allocatable units of the resource, whether the
    scheduler fits there too); ``elsewhere``: the scheduler fits some node the workers cannot
    use, so it need not take one of their GPUs.
    """

    groups: Counter[tuple[Decimal, bool]]
    elsewhere: bool


@dataclass(frozen=True)
class Inventory:
    """The GPU nodes of a cluster.

    Rules ask it questions (``fitting``, ``fits_any``, ``classes``, ``of_class``, ``size``,
    ``allocatable``, ``overlap``, ``legacy_labels``, ``label_values``, ``taints``,
    ``unlabelled``, ``labelled``, ``provider``) rather than
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

    def overlap(
        self, workers: Sequence[GpuNode], scheduler: Sequence[GpuNode], resource: str
    ) -> Overlap:
        """How ``workers`` (from ``fitting``) and ``scheduler`` (from ``fitting``) share nodes."""
        mine = {n.name for n in scheduler}
        theirs = {n.name for n in workers}
        groups = Counter((n.allocatable.get(resource, Decimal(0)), n.name in mine) for n in workers)
        return Overlap(groups, bool(mine - theirs))

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
