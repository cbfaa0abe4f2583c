"""The GPU node inventory: the questions placement rules ask about a cluster's GPU nodes.

The inventory keeps only GPU nodes (:mod:`.nodes`), and of them only what placement needs, so its
size does not grow with CPU-only nodes. It holds them by shape (:mod:`.shapes`) and answers each
question once per shape, so a request's work grows with the shapes, not with the nodes. Whether
one pod fits one node is :mod:`.fits`; both are re-exported here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from decimal import Decimal
from typing import Any, NoReturn

from .deviceclasses import NVIDIA_CLASSES, DeviceClasses, device_class
from .fits import PodFilter, gpu_demand, node_fits, pod_gpu_demand, toleration_matches
from .nodes import CUDA_FULL, DRIVER_FULL, DriverClass, GpuNode, driver_class, gpu_nodes
from .providers import PROVIDERS, PoolClass, Provider
from .shapes import (
    PER_NODE_LABELS,
    Nodes,
    Overlap,
    Shape,
    group,
    overlap,
    own_name_keys,
    referenced_keys,
)

__all__ = [
    "CUDA_FULL",
    "DRIVER_FULL",
    "PER_NODE_LABELS",
    "DriverClass",
    "GpuNode",
    "Inventory",
    "Nodes",
    "Overlap",
    "PodFilter",
    "Shape",
    "driver_class",
    "gpu_demand",
    "node_fits",
    "pod_gpu_demand",
    "referenced_keys",
    "toleration_matches",
]


class Inventory:
    """The GPU nodes of a cluster, by shape. Immutable.

    Rules ask it questions (``fitting``, ``fits_any``, ``classes``, ``of_class``, ``size``,
    ``allocatable``, ``overlap``, ``legacy_labels``, ``label_values``, ``taints``,
    ``blocking_taints``, ``out_of_service``,
    ``unlabelled``, ``labelled``, ``provider``, ``pools``) rather than walking ``nodes``: each
    is answered once per shape, and the :class:`Nodes` it hands out remember their shapes, so
    asking about them is per shape too. ``nodes`` is built only when something walks it.
    """

    __slots__ = ("_classes", "_facts", "_nodes", "_per_node", "_shapes", "_size", "notes")
    _shapes: tuple[Shape, ...]
    _per_node: frozenset[str]
    _size: int
    _nodes: tuple[GpuNode, ...] | None
    _facts: dict[str, Any]  # answers that do not depend on a pod, kept once asked
    _classes: DeviceClasses
    notes: tuple[str, ...]  # what could not be resolved (slices of no node, of unknown nodes)

    def __init__(
        self,
        shapes: Iterable[Shape],
        per_node_keys: frozenset[str],
        classes: DeviceClasses = NVIDIA_CLASSES,
        notes: Iterable[str] = (),
    ) -> None:
        """An inventory of ``shapes``, whose members differ only in ``per_node_keys`` labels."""
        shapes = tuple(shapes)
        object.__setattr__(self, "_shapes", shapes)
        object.__setattr__(self, "_per_node", per_node_keys)
        object.__setattr__(self, "_size", sum(len(s.members) for s in shapes))
        object.__setattr__(self, "_nodes", None)
        object.__setattr__(self, "_facts", {})
        object.__setattr__(self, "_classes", classes)
        object.__setattr__(self, "notes", tuple(notes))

    def __setattr__(self, name: str, value: Any) -> NoReturn:
        raise AttributeError(f"Inventory is immutable: cannot set {name}")

    def __delattr__(self, name: str) -> NoReturn:
        raise AttributeError(f"Inventory is immutable: cannot delete {name}")

    @classmethod
    def from_nodes(
        cls,
        nodes: Iterable[Mapping[str, Any]],
        slices: Iterable[Mapping[str, Any]] = (),
        classes: DeviceClasses | None = None,
    ) -> Inventory:
        """An inventory from Node objects and the ResourceSlices of their DRA devices.

        Args:
            nodes: Node objects (e.g. ``kubectl get nodes -o yaml`` items).
            slices: ResourceSlice objects; a slice of a node not in ``nodes`` is left out, noted.
            classes: the DeviceClasses (NVIDIA's catalogue when ``None``).
        """
        catalogue = classes if classes is not None else NVIDIA_CLASSES
        found, notes = gpu_nodes(nodes, slices, catalogue)
        per_node = set(PER_NODE_LABELS)
        for node in found:
            per_node |= own_name_keys(node.labels, node.name)
        return cls(group(found, frozenset(per_node)), frozenset(per_node), catalogue, notes)

    @classmethod
    def from_objects(
        cls, objects: Iterable[Any], classes: DeviceClasses | None = None
    ) -> Inventory:
        """Nodes, ResourceSlices and DeviceClasses (which extend ``classes``) listed together.

        As ``kubectl get nodes,resourceslices,deviceclasses -o yaml`` lists them.
        """
        items = [o for o in objects if isinstance(o, Mapping)]
        found = [dc for o in items if (dc := device_class(o)) is not None]
        catalogue = (classes if classes is not None else NVIDIA_CLASSES).extend(found)
        nodes = [o for o in items if o.get("kind") == "Node"]
        slices = [o for o in items if o.get("kind") == "ResourceSlice"]
        return cls.from_nodes(nodes, slices, catalogue)

    @property
    def device_classes(self) -> DeviceClasses:
        """The DeviceClasses the inventory counted devices by."""
        return self._classes

    @property
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
        """Whether some node could take a pod with ``pod_spec`` (see :func:`node_fits`)."""
        pod = PodFilter.of(pod_spec, extended_tolerations, self._classes)
        if self._per_node_spec(pod_spec):
            return any(pod.fits(n) for s in self._shapes for n in s.members)
        return any(pod.fits(s.representative) for s in self._shapes)

    def fitting(self, pod_spec: Any, *, extended_tolerations: bool = False) -> Nodes:
        """The nodes that could take a pod with ``pod_spec`` (see :func:`node_fits`)."""
        out = Nodes()
        per_node = self._per_node_spec(pod_spec)
        pod = PodFilter.of(pod_spec, extended_tolerations, self._classes)
        for shape in self._shapes:
            if per_node:
                members: Sequence[GpuNode] = [n for n in shape.members if pod.fits(n)]
            elif pod.fits(shape.representative):
                members = shape.members
            else:
                continue
            if members:
                out.take(shape, members)
        return out

    def _all(self) -> Nodes:
        return Nodes((s, s.members) for s in self._shapes)

    def classes(self, nodes: Nodes | None = None) -> dict[DriverClass, Nodes]:
        """Nodes (of ``nodes``, else all) grouped by driver class (unlabelled nodes left out)."""
        grouped: dict[DriverClass, Nodes] = {}
        spelled: dict[DriverClass, DriverClass] = {}  # GFD's spelling where a node has labels
        for shape, members in (self._all() if nodes is None else nodes).parts:
            if (dc := shape.driver_class) is not None:
                grouped.setdefault(dc, Nodes()).take(shape, members)
                spelled[dc] = shape.representative.labelled_class or spelled.get(dc, dc)
        return {spelled[dc]: found for dc, found in grouped.items()}

    def of_class(self, dc: DriverClass) -> Nodes:
        """The nodes of one driver class."""
        return Nodes((s, s.members) for s in self._shapes if s.driver_class == dc)

    def unlabelled(self, nodes: Nodes | None = None) -> Nodes:
        """The nodes (of ``nodes``, else all) without GFD driver labels."""
        parts = (self._all() if nodes is None else nodes).parts
        return Nodes((s, m) for s, m in parts if s.driver_class is None)

    @property
    def labelled(self) -> bool:
        """Whether any node carries GFD driver labels (else driver classes cannot be told)."""
        return any(s.driver_class is not None for s in self._shapes)

    def _has_label(self, shape: Shape, members: Sequence[GpuNode], key: str) -> bool:
        if key in self._per_node:  # members may differ in it
            return any(key in n.labels for n in members)
        return key in shape.representative.labels

    def _fact(self, key: str, answer: Callable[[], Any]) -> Any:
        """``answer()``, asked once: a fact of the nodes that no pod changes."""
        if key not in self._facts:
            self._facts[key] = answer()
        return self._facts[key]

    @property
    def provider(self) -> Provider | None:
        """The managed Kubernetes service the nodes' labels name, if any (asked once)."""
        found: Provider | None = self._fact(
            "provider",
            lambda: next(
                (
                    provider
                    for provider in PROVIDERS
                    for shape in self._shapes
                    if any(self._has_label(shape, shape.members, k) for k in provider.labels)
                ),
                None,
            ),
        )
        return found

    def pools(self, nodes: Nodes) -> dict[PoolClass, Nodes]:
        """Nodes grouped by their provider's node pool label (nodes without one left out)."""
        grouped: dict[PoolClass, Nodes] = {}
        split = any(p.pool_label in self._per_node for p in PROVIDERS)
        for shape, members in nodes.parts:
            for part in ([n] for n in members) if split else (members,):
                labels = part[0].labels if split else shape.representative.labels
                for provider in PROVIDERS:  # EKS clusters mix managed node groups and Karpenter
                    if pool := labels.get(provider.pool_label):
                        grouped.setdefault(PoolClass(provider.pool_label, pool), Nodes()).take(
                            shape, part
                        )
                        break
        return grouped

    def allocatable(self, nodes: Nodes, resource: str) -> Decimal:
        """How much of ``resource`` ``nodes`` have in all: per shape (its nodes have the same)."""
        return sum(
            (
                s.representative.allocatable.get(resource, Decimal(0)) * len(m)
                for s, m in nodes.parts
            ),
            Decimal(0),
        )

    def overlap(self, workers: Nodes, scheduler: Nodes, resource: str) -> Overlap:
        """How ``workers`` and ``scheduler`` (both from ``fitting``) share nodes (per shape)."""
        return overlap(workers, scheduler, resource)

    def legacy_labels(self, nodes: Nodes) -> bool:
        """Whether any of ``nodes`` has only the pre-2024 GFD driver labels."""
        return any(s.representative.uses_legacy_labels for s, _ in nodes.parts)

    def label_values(self, nodes: Nodes, key: str) -> frozenset[str]:
        """The values ``nodes`` have for the label ``key`` ("" for a node without it).

        A shape's nodes share every label but the per-node ones: one look per shape.
        """
        if key in self._per_node:
            return frozenset(n.labels.get(key, "") for n in nodes)
        return frozenset(s.representative.labels.get(key, "") for s, _ in nodes.parts)

    def out_of_service(self) -> tuple[str, ...]:
        """The names of cordoned or NotReady GPU nodes, sorted (both are part of a shape)."""
        out = (n for s in self._shapes if not _serving(s.representative) for n in s.members)
        found: tuple[str, ...] = self._fact("out", lambda: tuple(sorted(n.name for n in out)))
        return found

    def blocking_taints(self) -> frozenset[tuple[str, str, str]]:
        """The NoSchedule and NoExecute taints of the GPU nodes that are ready and uncordoned."""
        nodes = (s.representative for s in self._shapes if _serving(s.representative))
        blocking = (t for n in nodes for t in n.taints if t[2] in ("NoSchedule", "NoExecute"))
        found: frozenset[tuple[str, str, str]] = self._fact("blocking", lambda: frozenset(blocking))
        return found

    def taints(self) -> frozenset[tuple[str, str, str]]:
        """Every taint some GPU node carries (taints are part of a shape: one look per shape)."""
        every = (t for s in self._shapes for t in s.representative.taints)
        found: frozenset[tuple[str, str, str]] = self._fact("taints", lambda: frozenset(every))
        return found


def _serving(node: GpuNode) -> bool:
    """Whether the node takes new pods: Ready and not cordoned."""
    return node.ready and not node.unschedulable
