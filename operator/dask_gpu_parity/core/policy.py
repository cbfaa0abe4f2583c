"""The parity policy: a typed, validated ``DaskGPUPolicy.spec`` with built-in defaults.

The same object is read from a file by the CLI (``--policy``) and from the cluster by the
operator, and both go through ``policy_manifest.load``, so an invalid policy fails the same way
everywhere: a :class:`PolicyError` naming the field.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from .findings import Severity
from .labels import LabelSelector

__all__ = [
    "Delivery",
    "DriftSettings",
    "ExtendedResourceToleration",
    "Mode",
    "Placement",
    "PlacementSettings",
    "Policy",
    "PolicyError",
    "SchedulerSettings",
    "VerifierResources",
    "VerifierSettings",
    "select",
]


class PolicyError(ValueError):
    """A policy that cannot be used: the field (its path in the manifest) and what is wrong.

    ``field`` is data (``spec.verifier.image``, or empty for the whole object), so a caller
    names its own source of the setting (a flag, a file) without reading the message;
    ``str()`` is ``field: message``.
    """

    def __init__(self, field: str, message: str) -> None:
        super().__init__(field, message)
        self.field = field
        self.message = message

    def __str__(self) -> str:
        return f"{self.field}: {self.message}" if self.field else self.message


class Mode(enum.StrEnum):
    """What admission does with findings."""

    ENFORCE = "enforce"  # mutate what is fixable, deny remaining errors
    WARN = "warn"  # mutate, never deny: remaining errors become warnings
    AUDIT = "audit"  # never mutate, never deny: report only
    OFF = "off"  # do nothing


class Delivery(enum.StrEnum):
    """How the probe reaches the ``gpu-parity-check`` init container (docs/probe.md)."""

    REFERENCE = "reference"  # copied from the probe image into an emptyDir (default)
    INLINE = "inline"  # its source embedded in the manifest (no image to pull)


class Placement(enum.StrEnum):
    """How the scheduler is placed."""

    PIN_DRIVER_CLASS = "pin-driver-class"  # copy the workers' constraints, pin one driver class
    COPY_WORKERS = "copy-workers"  # copy the workers' constraints only
    NONE = "none"  # leave placement to the user


class ExtendedResourceToleration(enum.StrEnum):
    """Whether the cluster's ExtendedResourceToleration admission plugin is on.

    The plugin makes a pod that requests ``nvidia.com/gpu`` tolerate the ``nvidia.com/gpu`` taint.
    No API shows whether a cluster enables it, so it is a setting: ``auto`` assumes it where the
    nodes' labels show GKE, AKS or EKS (which enable it) and not elsewhere (upstream Kubernetes
    does not). The values are not ``on``/``off``, which YAML 1.1 reads as booleans.
    """

    AUTO = "auto"
    ENABLED = "enabled"
    DISABLED = "disabled"


@dataclass(frozen=True)
class SchedulerSettings:
    """``spec.scheduler``: the scheduler's GPU and node pool."""

    gpu_resource: str | None = None  # default: the workers'
    gpu_count: int = 1
    node_selector: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class PlacementSettings:
    """``spec.placement``: how the scheduler is placed beside its workers."""

    strategy: Placement = Placement.PIN_DRIVER_CLASS
    extended_resource_toleration: ExtendedResourceToleration = ExtendedResourceToleration.AUTO


@dataclass(frozen=True)
class VerifierResources:
    """``spec.verifier.resources``: what the ``gpu-parity-check`` init container requests."""

    cpu: str = "100m"
    memory: str = "256Mi"


@dataclass(frozen=True)
class VerifierSettings:
    """``spec.verifier``: the ``gpu-parity-check`` init container."""

    enabled: bool = True
    delivery: Delivery = Delivery.REFERENCE
    image: str | None = None  # the probe image; default: this release's
    registry: str | None = None  # a mirror for this release's probe image
    min_compute_capability: str | None = None
    expect_driver: bool = True  # spec.verifier.expectDriverVersion
    resources: VerifierResources = field(default_factory=VerifierResources)


@dataclass(frozen=True)
class DriftSettings:
    """``spec.drift``: what the drift watch does with a drifted scheduler."""

    repair: bool = False


@dataclass(frozen=True)
class Policy:
    """Everything ``evaluate`` needs to know about what parity means here.

    Its groups mirror the ``DaskGPUPolicy`` spec: ``policy.verifier.image`` is
    ``spec.verifier.image``.
    """

    name: str = "built-in defaults"
    mode: Mode = Mode.ENFORCE
    priority: int = 0
    namespace_selector: LabelSelector = field(default_factory=LabelSelector)
    tcp_severity: Severity = Severity.ERROR
    scheduler: SchedulerSettings = field(default_factory=SchedulerSettings)
    placement: PlacementSettings = field(default_factory=PlacementSettings)
    verifier: VerifierSettings = field(default_factory=VerifierSettings)
    drift: DriftSettings = field(default_factory=DriftSettings)


_DEFAULT = Policy()  # one object: callers may key what they computed by the policy's identity


def select(policies: Iterable[Policy], namespace_labels: Mapping[str, str]) -> Policy:
    """The policy for a namespace.

    The highest ``priority`` among those whose ``namespaceSelector`` matches (then the name, for
    a stable answer), else the built-in defaults (``enforce``).
    """
    matching = [p for p in policies if p.namespace_selector.matches(namespace_labels)]
    if not matching:
        return _DEFAULT
    return min(matching, key=lambda p: (-p.priority, p.name))
