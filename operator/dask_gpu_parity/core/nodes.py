"""GPU nodes as placement sees them: GFD labels, driver classes, allocatable GPUs.

A *driver class* is the pair (NVIDIA driver version, CUDA version the driver supports) that GPU
Feature Discovery publishes on each GPU node. Parity means the scheduler runs in the workers'
driver class. A :class:`GpuNode` keeps only what placement needs of a Node. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

from . import quantity
from .gpu import is_gpu_resource
from .plain import as_list, as_map

__all__ = [
    "CUDA_FULL",
    "DRIVER_FULL",
    "LEGACY_CUDA",
    "LEGACY_DRIVER",
    "DriverClass",
    "GpuNode",
    "driver_class",
]

DRIVER_FULL = "nvidia.com/cuda.driver-version.full"
CUDA_FULL = "nvidia.com/cuda.runtime-version.full"
# GFD's labels before v0.15 (2024): the versions split into parts, in this order.
LEGACY_DRIVER = (
    "nvidia.com/cuda.driver.major",
    "nvidia.com/cuda.driver.minor",
    "nvidia.com/cuda.driver.rev",
)
LEGACY_CUDA = ("nvidia.com/cuda.runtime.major", "nvidia.com/cuda.runtime.minor")


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
    if not driver and all(labels.get(k) for k in LEGACY_DRIVER[:2]):
        driver = ".".join(labels[k] for k in LEGACY_DRIVER if labels.get(k))
    cuda = labels.get(CUDA_FULL)
    if not cuda and all(labels.get(k) for k in LEGACY_CUDA):
        cuda = ".".join(labels[k] for k in LEGACY_CUDA)
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
