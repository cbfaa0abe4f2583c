"""DRA DeviceClasses: which extended-resource names and claims ask for an NVIDIA GPU.

Under Dynamic Resource Allocation a GPU comes from a DeviceClass: a container asks for it by the
class' ``spec.extendedResourceName`` (``nvidia.com/gpu`` for NVIDIA's ``gpu.nvidia.com``), by the
implicit name ``deviceclass.resource.kubernetes.io/<class>`` (KEP-5004), or, in a Pod, through a
claim. A class is read from its CEL selectors: the driver (``device.driver == 'gpu.nvidia.com'``),
the device type, and any literal attribute it pins (``profile == '1g.12gb'``,
``driverVersion.compareTo(semver('580.95.5')) == 0``). A selector this module cannot read fully
(``||``, negations, functions other than those) leaves the class marked ``exact=False``: its
driver and type are still trusted, its pins are not.

:data:`NVIDIA_CLASSES` is the catalogue NVIDIA's DRA driver chart installs; it applies when no
classes are given, and classes read from a cluster or a file extend or override it
(:meth:`DeviceClasses.extend`). The catalogue is threaded explicitly and never mutated. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from .plain import as_list, as_map

__all__ = [
    "GPU_TYPES",
    "IMPLICIT_PREFIX",
    "NVIDIA_CLASSES",
    "NVIDIA_DRIVER",
    "DeviceClass",
    "DeviceClasses",
    "device_class",
    "version_key",
]

IMPLICIT_PREFIX = "deviceclass.resource.kubernetes.io/"
NVIDIA_DRIVER = "gpu.nvidia.com"
# Device types a container gets CUDA from: a full GPU or a MIG slice ("vfio" goes to a VM).
GPU_TYPES = frozenset({"gpu", "mig"})
DEVICE_CLASS_APIS = frozenset(
    {"resource.k8s.io/v1", "resource.k8s.io/v1beta1", "resource.k8s.io/v1beta2"}
)

_Q = r"""['"]([^'"]*)['"]"""
_ATTR = r"device\.attributes\[" + _Q + r"\]\.(\w+)"
_DRIVER = re.compile(r"device\.driver\s*==\s*" + _Q)
_EQUALS = re.compile(_ATTR + r"\s*==\s*" + _Q)
_SEMVER = re.compile(
    _ATTR + r"(?:\.compareTo\(semver\(" + _Q + r"\)\)\s*==\s*0|\s*==\s*semver\(" + _Q + r"\))"
)
# What a conjunction of the forms above may contain besides them.
_LEFTOVER = re.compile(r"^[\s()&]*$")


def version_key(version: str) -> tuple[tuple[int, str], ...]:
    """A version as compared everywhere: ``580.95.05`` is ``580.95.5``, ``13.0`` is ``13.0.0``.

    NVIDIA's DRA driver publishes coerced semver; GFD the driver's own spelling.
    """
    parts = [(int(p), "") if p.isdigit() else (-1, p) for p in version.strip().split(".")]
    while len(parts) > 1 and parts[-1] == (0, ""):
        parts.pop()
    return tuple(parts)


@dataclass(frozen=True)
class DeviceClass:
    """What parity reads of one DeviceClass."""

    name: str
    driver: str | None = None  # device.driver == '…'; None: any driver
    device_type: str | None = None  # the ``type`` attribute it selects; None: any
    extended_resource_name: str | None = None
    pins: Mapping[str, str] = field(default_factory=dict)  # attribute -> literal it requires
    exact: bool = True  # every selector was read in full

    @property
    def gpu(self) -> bool:
        """Whether the class hands out NVIDIA GPUs or MIG slices a container can use."""
        return self.driver == NVIDIA_DRIVER and (
            self.device_type is None or self.device_type in GPU_TYPES
        )

    @property
    def implicit_name(self) -> str:
        """The class' implicit extended-resource name (KEP-5004)."""
        return IMPLICIT_PREFIX + self.name

    def matches(self, driver: str, attributes: Mapping[str, str]) -> bool:
        """Whether a device of ``driver`` with ``attributes`` (plain strings) is of this class."""
        if self.driver is not None and driver != self.driver:
            return False
        if self.device_type is not None and attributes.get("type") != self.device_type:
            return False
        if not self.exact:
            return True
        for key, want in self.pins.items():
            have = attributes.get(key)
            if have is None or (have != want and version_key(have) != version_key(want)):
                return False
        return True


def device_class(obj: Any) -> DeviceClass | None:
    """The :class:`DeviceClass` of a ``resource.k8s.io`` DeviceClass object, else ``None``."""
    if not isinstance(obj, Mapping) or obj.get("kind") != "DeviceClass":
        return None
    if obj.get("apiVersion") not in DEVICE_CLASS_APIS:
        return None
    name = as_map(obj.get("metadata")).get("name")
    if not isinstance(name, str) or not name:
        return None
    spec = as_map(obj.get("spec"))
    drivers: set[str] = set()
    literals: list[tuple[str, str, str]] = []  # (domain, attribute, value)
    exact = True
    for selector in as_list(spec.get("selectors")):
        expression = as_map(as_map(selector).get("cel")).get("expression")
        if not isinstance(expression, str):
            exact = False
            continue
        drivers.update(_DRIVER.findall(expression))
        literals += _EQUALS.findall(expression)
        literals += [(d, k, first or second) for d, k, first, second in _SEMVER.findall(expression)]
        rest = _SEMVER.sub("", _EQUALS.sub("", _DRIVER.sub("", expression)))
        exact = exact and bool(_LEFTOVER.match(rest))
    driver = next(iter(drivers)) if len(drivers) == 1 else None
    # Attributes of the driver's own domain are bare in a slice; others keep their domain.
    pins = {(k if d == driver else f"{d}/{k}"): v for d, k, v in literals}
    types = {v for d, k, v in literals if k == "type" and d == driver}
    pins.pop("type", None)
    extended = spec.get("extendedResourceName")
    return DeviceClass(
        name=name,
        driver=driver,
        device_type=types.pop() if len(types) == 1 else None,  # "gpu || mig": any type
        extended_resource_name=extended if isinstance(extended, str) and extended else None,
        pins=MappingProxyType(pins),
        exact=exact and len(drivers) <= 1 and len(types) <= 1,
    )


@dataclass(frozen=True, eq=False)
class DeviceClasses:
    """A catalogue of DeviceClasses by name, and the extended-resource names of its GPU classes.

    Immutable; :meth:`extend` returns a new catalogue. ``gpu_names`` is what
    :func:`~.gpu.is_gpu_resource` looks names up in: one set lookup, however many classes.
    """

    by_name: Mapping[str, DeviceClass]
    gpu_names: frozenset[str]

    @classmethod
    def of(cls, classes: Iterable[DeviceClass]) -> DeviceClasses:
        """A catalogue of ``classes`` (a later class of the same name wins)."""
        by_name = {c.name: c for c in classes}
        names = set()
        for c in by_name.values():
            if c.gpu:
                names.add(c.implicit_name)
                if c.extended_resource_name:
                    names.add(c.extended_resource_name)
        return cls(MappingProxyType(by_name), frozenset(names))

    def extend(self, classes: Iterable[DeviceClass]) -> DeviceClasses:
        """This catalogue with ``classes`` added, replacing any of the same name."""
        return DeviceClasses.of([*self.by_name.values(), *classes])

    def gpu_classes(self) -> list[DeviceClass]:
        """The GPU classes, by name."""
        return [c for _, c in sorted(self.by_name.items()) if c.gpu]

    def unknown_class(self, resource: str) -> str | None:
        """The class an implicit ``deviceclass.resource.kubernetes.io/`` name names, if unknown."""
        if not resource.startswith(IMPLICIT_PREFIX):
            return None
        name = resource[len(IMPLICIT_PREFIX) :]
        return name if name and name not in self.by_name else None

    def pinned_to(self, driver_version: str, device_type: str = "gpu") -> DeviceClass | None:
        """A GPU class that selects exactly ``device_type`` devices of one driver version."""
        for c in self.gpu_classes():
            pinned = c.pins.get("driverVersion")
            if (
                c.exact
                and c.device_type == device_type
                and pinned is not None
                and version_key(pinned) == version_key(driver_version)
            ):
                return c
        return None


# NVIDIA's DRA driver chart (kubernetes-sigs/dra-driver-nvidia-gpu, deployments/helm/…/templates/
# deviceclass-{gpu,mig,vfio-gpu}.yaml) as rendered for resource.k8s.io/v1.
NVIDIA_CLASSES = DeviceClasses.of(
    [
        DeviceClass("gpu.nvidia.com", NVIDIA_DRIVER, "gpu", "nvidia.com/gpu"),
        DeviceClass("mig.nvidia.com", NVIDIA_DRIVER, "mig"),
        DeviceClass("vfio.gpu.nvidia.com", NVIDIA_DRIVER, "vfio"),
    ]
)
