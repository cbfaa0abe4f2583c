"""The known keys of a ``DaskGPUPolicy`` spec: one table that reading a manifest follows.

Each :class:`Key` says where a setting is in the manifest (its CRD path), which
:class:`~.policy.Policy` setting it fills, its type as the CRD declares it, its allowed values
or minimum, and any further check (``policy_values``). ``tests/unit/core/test_policy_crd.py`` checks
the table against the CRD's ``openAPIV3Schema``: the same keys, types, enums, minimums and
defaults.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from .findings import Severity
from .policy import Delivery, ExtendedResourceToleration, Mode, Placement, Policy, PolicyError
from .policy_values import (
    Check,
    compute_capability,
    gpu_resource,
    image,
    mapping,
    member,
    node_selector,
    optional,
    quantity_string,
    registry,
    selector,
    switch,
)

__all__ = ["KEYS", "Key", "setting_of", "with_settings"]


@dataclass(frozen=True, kw_only=True)
class Key:
    """One leaf of ``spec``: where it is, what it sets, how it is read.

    Attributes:
        path: its place in the manifest, ``spec.scheduler.gpuCount``.
        setting: the :class:`Policy` attribute it fills, ``scheduler.gpu_count``.
        type: its OpenAPI type in the CRD: ``string``, ``integer``, ``boolean`` or ``object``.
        enum: the values a string may take (read in any case unless ``exact``).
        exact: whether ``enum`` values must match case too.
        minimum: the smallest integer allowed.
        before: what the value goes through first (YAML 1.1's readings undone).
        check: what a value of the right type must also pass; returns the setting's value.
    """

    path: str
    setting: str
    type: str
    enum: tuple[str, ...] = ()
    exact: bool = False
    minimum: int | None = None
    before: Callable[[Any], Any] | None = None
    check: Check | None = None

    def read(self, value: Any) -> Any:
        """The setting's value from the manifest's ``value``.

        Raises:
            PolicyError: for this key's path.
        """
        if self.before is not None:
            value = self.before(value)
        if self.type == "boolean" and not isinstance(value, bool):
            raise PolicyError(self.path, f"expected true or false, found {value!r}")
        if self.type == "integer":
            if isinstance(value, bool) or not isinstance(value, int):
                raise PolicyError(self.path, f"expected an integer, found {value!r}")
            if self.minimum is not None and value < self.minimum:
                raise PolicyError(self.path, f"must be at least {self.minimum}, found {value}")
        if self.type == "object":
            value = mapping(value, self.path)
        if self.enum:
            text = value if self.exact else str(value).lower()
            if text not in self.enum:
                choices = ", ".join(self.enum)
                raise PolicyError(self.path, f"expected one of {choices}, found {value!r}")
            value = text
        return self.check(value, self.path) if self.check else value

    @property
    def default(self) -> Any:
        """The built-in default as a manifest would write it; ``None`` where there is none."""
        value = setting_of(Policy(), self.setting)
        if isinstance(value, enum.Enum):
            return str(value)
        return value if isinstance(value, str | int) else None


def setting_of(policy: Any, setting: str) -> Any:
    """The value of a dotted ``setting`` (``verifier.resources.cpu``) of a policy."""
    for name in setting.split("."):
        policy = getattr(policy, name)
    return policy


def with_settings(policy: Any, settings: Mapping[str, Any]) -> Any:
    """A copy of ``policy`` with dotted settings replaced (``verifier.image``): groups copied."""
    groups: dict[str, dict[str, Any]] = {}
    changes: dict[str, Any] = {}
    for setting, value in settings.items():
        head, _, rest = setting.partition(".")
        if rest:
            groups.setdefault(head, {})[rest] = value
        else:
            changes[head] = value
    for head, inner in groups.items():
        changes[head] = with_settings(getattr(policy, head), inner)
    return replace(policy, **changes) if changes else policy


def _values(kind: type[enum.StrEnum]) -> tuple[str, ...]:
    return tuple(m.value for m in kind)


_SPEC, _SCHEDULER, _PLACEMENT = "spec", "spec.scheduler", "spec.placement"
_VERIFIER, _RESOURCES = "spec.verifier", "spec.verifier.resources"

KEYS: tuple[Key, ...] = (
    Key(
        path=f"{_SPEC}.mode", setting="mode", type="string", enum=_values(Mode), check=member(Mode)
    ),
    Key(path=f"{_SPEC}.priority", setting="priority", type="integer"),
    Key(
        path=f"{_SPEC}.namespaceSelector",
        setting="namespace_selector",
        type="object",
        check=selector,
    ),
    Key(
        path=f"{_SPEC}.tcpSeverity",
        setting="tcp_severity",
        type="string",
        enum=("error", "warning"),
        exact=True,
        check=member(Severity.parse),
    ),
    Key(
        path=f"{_SCHEDULER}.gpuResource",
        setting="scheduler.gpu_resource",
        type="string",
        check=optional(gpu_resource),
    ),
    Key(path=f"{_SCHEDULER}.gpuCount", setting="scheduler.gpu_count", type="integer", minimum=1),
    Key(
        path=f"{_SCHEDULER}.nodeSelector",
        setting="scheduler.node_selector",
        type="object",
        check=node_selector,
    ),
    Key(
        path=f"{_PLACEMENT}.strategy",
        setting="placement.strategy",
        type="string",
        enum=_values(Placement),
        check=member(Placement),
    ),
    Key(
        path=f"{_PLACEMENT}.extendedResourceToleration",
        setting="placement.extended_resource_toleration",
        type="string",
        enum=_values(ExtendedResourceToleration),
        before=switch,
        check=member(ExtendedResourceToleration),
    ),
    Key(path=f"{_VERIFIER}.enabled", setting="verifier.enabled", type="boolean"),
    Key(
        path=f"{_VERIFIER}.delivery",
        setting="verifier.delivery",
        type="string",
        enum=_values(Delivery),
        check=member(Delivery),
    ),
    Key(path=f"{_VERIFIER}.image", setting="verifier.image", type="string", check=optional(image)),
    Key(
        path=f"{_VERIFIER}.registry",
        setting="verifier.registry",
        type="string",
        check=optional(registry),
    ),
    Key(
        path=f"{_VERIFIER}.minComputeCapability",
        setting="verifier.min_compute_capability",
        type="string",
        check=optional(compute_capability),
    ),
    Key(path=f"{_VERIFIER}.expectDriverVersion", setting="verifier.expect_driver", type="boolean"),
    Key(
        path=f"{_RESOURCES}.cpu",
        setting="verifier.resources.cpu",
        type="string",
        check=quantity_string,
    ),
    Key(
        path=f"{_RESOURCES}.memory",
        setting="verifier.resources.memory",
        type="string",
        check=quantity_string,
    ),
    Key(path="spec.drift.repair", setting="drift.repair", type="boolean"),
)
"""Every known leaf of ``spec``, in the CRD's order (the first invalid one is reported)."""
