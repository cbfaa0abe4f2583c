"""GPU nodes as placement sees them: GFD labels, DRA devices, driver classes, allocatable GPUs.

A *driver class* is the pair (NVIDIA driver version, CUDA version the driver supports) that GPU
Feature Discovery publishes on each GPU node, and NVIDIA's DRA driver on each device it publishes
in a ResourceSlice (``driverVersion``, ``cudaDriverVersion``, as coerced semver). Parity means
the scheduler runs in the workers' driver class. A :class:`GpuNode` keeps only what placement
needs of a Node and its devices. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from . import quantity
from .deviceclasses import NVIDIA_CLASSES, NVIDIA_DRIVER, DeviceClasses, version_key
from .gpu import is_gpu_resource
from .plain import as_list, as_map
from .slices import Device, node_devices

__all__ = [
    "CUDA_FULL",
    "DRIVER_FULL",
    "LEGACY_CUDA",
    "LEGACY_DRIVER",
    "DriverClass",
    "GpuNode",
    "device_class_of",
    "driver_class",
    "gpu_nodes",
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
PRODUCT = "nvidia.com/gpu.product"
COMPUTE = ("nvidia.com/gpu.compute.major", "nvidia.com/gpu.compute.minor")


@dataclass(frozen=True, order=True)
class DriverClass:
    """An NVIDIA driver version and the CUDA version it supports, e.g. 580.95.05 / 13.0.

    Compared (and hashed, and ordered) by version, not by spelling: GFD's ``580.95.05`` / ``13.0``
    and the DRA driver's ``580.95.5`` / ``13.0.0`` are one class. ``driver`` and ``cuda`` keep
    the spelling of the source they were read from (a node-label pin needs GFD's).
    """

    driver: str = field(compare=False)
    cuda: str = field(compare=False)
    key: tuple[Any, ...] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", (version_key(self.driver), version_key(self.cuda)))

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


def _short(cuda: str) -> str:
    """A CUDA version as GFD spells it: ``13.0.0`` (coerced semver) is ``13.0``."""
    parts = cuda.split(".")
    return ".".join(parts[:2]) if len(parts) == 3 and parts[2] == "0" else cuda


def device_class_of(devices: Iterable[Device]) -> DriverClass | None:
    """The driver class NVIDIA devices report; ``None`` unless they all report the same one."""
    pairs = {
        (d.attributes["driverVersion"], d.attributes["cudaDriverVersion"])
        for d in devices
        if d.driver == NVIDIA_DRIVER
        and "driverVersion" in d.attributes
        and "cudaDriverVersion" in d.attributes
    }  # a node's devices share one driver: one pair, parsed once
    found = {DriverClass(driver, _short(cuda)) for driver, cuda in pairs}
    return found.pop() if len(found) == 1 else None


def _one(devices: Iterable[Device], key: str) -> str | None:
    """The one value NVIDIA devices give attribute ``key``; ``None`` for none or several."""
    found = {
        d.attributes[key] for d in devices if d.driver == NVIDIA_DRIVER and key in d.attributes
    }
    return found.pop() if len(found) == 1 else None


def _product(name: str) -> str:
    """A product name as GFD's label spells it, less its MIG and sharing suffixes, lowercase.

    GFD replaces NVML's spaces with dashes (``NVIDIA A100-SXM4-80GB`` is
    ``NVIDIA-A100-SXM4-80GB``) and appends ``-MIG-<profile>`` (MIG single) or ``-SHARED``.
    """
    dashed = re.sub(r"\s+", "-", name.strip())
    return dashed.split("-MIG-")[0].removesuffix("-SHARED").lower()


def _dra_allocatable(
    devices: Iterable[Device], classes: DeviceClasses, plugin: Mapping[str, Decimal]
) -> dict[str, Decimal]:
    """Devices counted per extended-resource name of each GPU class they belong to.

    A name the node's allocatable lists already is the device plugin's there (KEP-5004); the
    implicit ``deviceclass.resource.kubernetes.io/<class>`` is always DRA's.
    """
    counts: dict[str, Decimal] = {}
    gpu_classes = classes.gpu_classes()
    for device in devices:
        for dc in gpu_classes:
            if not dc.matches(device.driver, device.attributes):
                continue
            names = [dc.implicit_name]
            if dc.extended_resource_name and dc.extended_resource_name not in plugin:
                names.append(dc.extended_resource_name)
            for name in names:
                counts[name] = counts.get(name, Decimal(0)) + 1
    return counts


@dataclass(frozen=True, slots=True)
class GpuNode:
    """What placement needs of one GPU node: from its Node object and its DRA devices."""

    name: str
    labels: Mapping[str, str]
    taints: tuple[tuple[str, str, str], ...]  # (key, value, effect)
    allocatable: Mapping[str, Decimal]  # GPU resources only: the device plugin's and DRA's
    unschedulable: bool = False  # cordoned (spec.unschedulable)
    ready: bool = True  # the Ready condition is True (or not reported)
    dra_class: DriverClass | None = None  # the class its DRA GPU devices report
    dra: bool = False  # DRA publishes GPU devices of it
    dra_product: str | None = None  # its devices' productName, when they have one
    dra_compute: str | None = None  # its devices' cudaComputeCapability, when they have one

    @property
    def labelled_class(self) -> DriverClass | None:
        """The driver class GFD's labels say, if GFD labelled the node."""
        return driver_class(self.labels)

    @property
    def driver_class(self) -> DriverClass | None:
        """The node's driver class: GFD's labels, else its DRA devices; ``None`` if they differ."""
        labelled = self.labelled_class
        if self.dra_class is None or labelled is None:
            return labelled or self.dra_class
        return labelled if labelled == self.dra_class else None

    @property
    def conflict(self) -> bool:
        """Whether GFD's labels and the DRA devices name different driver classes."""
        labelled = self.labelled_class
        return None not in (labelled, self.dra_class) and labelled != self.dra_class

    @property
    def disagreements(self) -> tuple[str, ...]:
        """What GFD's labels and the DRA devices say differently, after normalisation."""
        found = []
        if self.conflict:
            found.append(f"labels: {self.labelled_class}, devices: {self.dra_class}")
        product = self.labels.get(PRODUCT)
        if product and self.dra_product and _product(product) != _product(self.dra_product):
            found.append(f"product: labels {product}, devices {self.dra_product}")
        compute = ".".join(self.labels.get(k, "") for k in COMPUTE)
        if (
            all(self.labels.get(k) for k in COMPUTE)
            and self.dra_compute
            and version_key(compute) != version_key(self.dra_compute)
        ):
            found.append(f"compute capability: labels {compute}, devices {self.dra_compute}")
        return tuple(found)

    @property
    def uses_legacy_labels(self) -> bool:
        """Whether only the pre-2024 GFD labels are present."""
        return DRIVER_FULL not in self.labels and self.labelled_class is not None

    @classmethod
    def from_node(
        cls,
        node: Mapping[str, Any],
        devices: Iterable[Device] = (),
        classes: DeviceClasses = NVIDIA_CLASSES,
    ) -> GpuNode | None:
        """A :class:`GpuNode` from a Node object and its DRA devices, ``None`` without GPUs.

        A GPU node has GPU resources in its allocatable (the device plugin) or devices of a GPU
        DeviceClass in ResourceSlices (DRA), or both while it migrates.
        """
        status = as_map(node.get("status"))
        allocatable = {
            name: number
            for name, value in as_map(status.get("allocatable")).items()
            if is_gpu_resource(name, classes)
            and (number := quantity.parse(value)) is not None
            and number > 0
        }
        devices = tuple(devices)
        dra = _dra_allocatable(devices, classes, allocatable)
        if not allocatable and not dra:
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
            allocatable={**allocatable, **dra},
            unschedulable=spec.get("unschedulable") is True,
            ready=ready[-1:] in ([], ["True"]),
            dra_class=device_class_of(devices) if dra else None,
            dra=bool(dra),
            dra_product=_one(devices, "productName") if dra else None,
            dra_compute=_one(devices, "cudaComputeCapability") if dra else None,
        )


def gpu_nodes(
    nodes: Iterable[Any], slices: Iterable[Any], classes: DeviceClasses
) -> tuple[list[GpuNode], list[str]]:
    """The GPU nodes among Node objects, with their ResourceSlices' devices, by name.

    Also the notes on what was left out: slices of no single node, and of nodes not given.
    """
    given = [n for n in nodes if isinstance(n, Mapping)]
    devices, notes = node_devices(s for s in slices if isinstance(s, Mapping))
    names = [str(as_map(n.get("metadata")).get("name", "")) for n in given]
    notes += [
        f"ResourceSlice devices of node {name} are left out: no Node {name} was given"
        for name in sorted(set(devices) - set(names))
    ]
    found = (
        GpuNode.from_node(n, devices.get(name, ()), classes)
        for n, name in zip(given, names, strict=True)
    )
    return sorted((n for n in found if n), key=lambda n: n.name), notes
