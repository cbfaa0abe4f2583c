"""The known keys of a ``DaskGPUPolicy`` spec: one table that reading a manifest follows.

Each :class:`Key` says where a setting is in the manifest (its CRD path), which
:class:`~.policy.Policy` setting it fills, its type as the CRD declares it, its allowed values
or minimum, and any further validation. ``tests/unit/test_policy_crd.py`` checks the table
against the CRD's ``openAPIV3Schema``: the same keys, types, enums, minimums and defaults.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from . import quantity
from .findings import Severity
from .gpu import is_gpu_resource
from .labels import LabelSelector
from .policy import Delivery, ExtendedResourceToleration, Mode, Placement, Policy, PolicyError

__all__ = ["KEYS", "SELECTOR_KEYS", "SELECTOR_OPERATORS", "Key", "setting_of", "with_setting"]

_CC = re.compile(r"^\d+\.\d+$")
# An image reference pinned to a tag or a digest (docker's reference grammar, loosely).
_NAME = r"[a-z0-9]+(?:[._-][a-z0-9]+)*(?::\d+)?(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*"
_TAG, _DIGEST = r":\w[\w.-]{0,127}", r"@sha256:[0-9a-f]{64}"
_PINNED = re.compile(rf"^{_NAME}(?:{_TAG}|{_DIGEST}|{_TAG}{_DIGEST})$")
_REGISTRY = re.compile(rf"^{_NAME}/?$")  # a mirror: host[:port][/path]

Check = Callable[[Any, str], Any]  # a value and its path -> the setting's value, or PolicyError


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


def with_setting(policy: Any, setting: str, value: Any) -> Any:
    """A copy of ``policy`` with the dotted ``setting`` replaced (groups copied, not changed)."""
    head, _, rest = setting.partition(".")
    if rest:
        value = with_setting(getattr(policy, head), rest, value)
    return replace(policy, **{head: value})


def mapping(value: Any, where: str) -> Mapping[str, Any]:
    """``value`` as an object; ``null`` is an empty one."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise PolicyError(where, f"expected an object, found {type(value).__name__}")
    return value


def _optional(check: Check) -> Check:
    """A string setting that may be left out: ``null`` and ``""`` are ``None``."""

    def read(value: Any, where: str) -> Any:
        if value is None or value == "":
            return None
        if not isinstance(value, str):
            raise PolicyError(where, f"expected a string, found {type(value).__name__}")
        return check(value, where)

    return read


def _gpu_resource(value: str, where: str) -> str:
    if not is_gpu_resource(value):
        raise PolicyError(
            where,
            f"{value!r} is not an NVIDIA GPU resource "
            "(nvidia.com/gpu, nvidia.com/gpu.shared or nvidia.com/mig-<profile>)",
        )
    return value


def _compute_capability(value: str, where: str) -> str:
    if not _CC.match(value):
        raise PolicyError(where, f'expected MAJOR.MINOR like "8.0", found {value!r}')
    return value


def _image(value: str, where: str) -> str:
    if not _PINNED.match(value):
        raise PolicyError(
            where,
            "expected an image reference with a tag or a digest, like "
            f'"registry.example.com/dask-gpu-parity-probe:0.2.0", found {value!r}',
        )
    return value


def _registry(value: str, where: str) -> str:
    if not _REGISTRY.match(value):
        raise PolicyError(
            where,
            "expected a registry host and optional path, like "
            f'"registry.example.com/mirror", found {value!r}',
        )
    return value


def _quantity(value: Any, where: str) -> str:
    if not isinstance(value, str) or quantity.parse(value) is None:
        raise PolicyError(where, f"expected a quantity string, found {value!r}")
    return value


def _str_map(value: Mapping[str, Any], where: str) -> dict[str, str]:
    for key, item in value.items():
        if not isinstance(item, str):
            raise PolicyError(f"{where}.{key}", f"expected a string, found {item!r}")
    return dict(value)


def _node_selector(value: Mapping[str, Any], where: str) -> tuple[tuple[str, str], ...]:
    return tuple(sorted(_str_map(value, where).items()))


def _switch(value: Any) -> Any:
    """YAML 1.1 reads ``on``/``off``/``yes``/``no`` as booleans: read them as the words meant."""
    if isinstance(value, bool):
        return "enabled" if value else "disabled"
    return value


def _member(kind: Callable[[str], Any]) -> Check:
    """The enum member of a value already checked against ``Key.enum``."""
    return lambda value, _where: kind(value)


SELECTOR_KEYS = ("matchLabels", "matchExpressions")
SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


def _selector(value: Mapping[str, Any], where: str) -> LabelSelector:
    unknown = sorted(str(k) for k in value if k not in SELECTOR_KEYS)
    if unknown:
        known = ", ".join(sorted(SELECTOR_KEYS))
        raise PolicyError(f"{where}.{unknown[0]}", f"unknown field (known: {known})")
    at = f"{where}.matchLabels"
    labels = _str_map(mapping(value.get("matchLabels", {}), at), at)
    expressions = value.get("matchExpressions", [])
    if not isinstance(expressions, list):
        raise PolicyError(f"{where}.matchExpressions", "expected a list")
    terms = []
    for i, term in enumerate(expressions):
        at = f"{where}.matchExpressions[{i}]"
        expression = mapping(term, at)
        operator = expression.get("operator")
        if operator not in SELECTOR_OPERATORS:
            raise PolicyError(
                f"{at}.operator",
                f"expected In, NotIn, Exists or DoesNotExist, found {operator!r}",
            )
        key = expression.get("key")
        if not isinstance(key, str) or not key:
            raise PolicyError(f"{at}.key", "expected a label key")
        values = expression.get("values", [])
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            raise PolicyError(f"{at}.values", "expected a list of strings")
        if operator in ("In", "NotIn") and not values:
            raise PolicyError(f"{at}.values", f"{operator} needs at least one value")
        terms.append((key, operator, tuple(values)))
    return LabelSelector(tuple(sorted(labels.items())), tuple(terms))


def _values(kind: type[enum.StrEnum]) -> tuple[str, ...]:
    return tuple(m.value for m in kind)


_SPEC, _SCHEDULER, _PLACEMENT = "spec", "spec.scheduler", "spec.placement"
_VERIFIER, _RESOURCES = "spec.verifier", "spec.verifier.resources"

KEYS: tuple[Key, ...] = (
    Key(
        path=f"{_SPEC}.mode", setting="mode", type="string", enum=_values(Mode), check=_member(Mode)
    ),
    Key(path=f"{_SPEC}.priority", setting="priority", type="integer"),
    Key(
        path=f"{_SPEC}.namespaceSelector",
        setting="namespace_selector",
        type="object",
        check=_selector,
    ),
    Key(
        path=f"{_SPEC}.tcpSeverity",
        setting="tcp_severity",
        type="string",
        enum=("error", "warning"),
        exact=True,
        check=_member(Severity.parse),
    ),
    Key(
        path=f"{_SCHEDULER}.gpuResource",
        setting="scheduler.gpu_resource",
        type="string",
        check=_optional(_gpu_resource),
    ),
    Key(path=f"{_SCHEDULER}.gpuCount", setting="scheduler.gpu_count", type="integer", minimum=1),
    Key(
        path=f"{_SCHEDULER}.nodeSelector",
        setting="scheduler.node_selector",
        type="object",
        check=_node_selector,
    ),
    Key(
        path=f"{_PLACEMENT}.strategy",
        setting="placement.strategy",
        type="string",
        enum=_values(Placement),
        check=_member(Placement),
    ),
    Key(
        path=f"{_PLACEMENT}.extendedResourceToleration",
        setting="placement.extended_resource_toleration",
        type="string",
        enum=_values(ExtendedResourceToleration),
        before=_switch,
        check=_member(ExtendedResourceToleration),
    ),
    Key(path=f"{_VERIFIER}.enabled", setting="verifier.enabled", type="boolean"),
    Key(
        path=f"{_VERIFIER}.delivery",
        setting="verifier.delivery",
        type="string",
        enum=_values(Delivery),
        check=_member(Delivery),
    ),
    Key(
        path=f"{_VERIFIER}.image", setting="verifier.image", type="string", check=_optional(_image)
    ),
    Key(
        path=f"{_VERIFIER}.registry",
        setting="verifier.registry",
        type="string",
        check=_optional(_registry),
    ),
    Key(
        path=f"{_VERIFIER}.minComputeCapability",
        setting="verifier.min_compute_capability",
        type="string",
        check=_optional(_compute_capability),
    ),
    Key(path=f"{_VERIFIER}.expectDriverVersion", setting="verifier.expect_driver", type="boolean"),
    Key(path=f"{_RESOURCES}.cpu", setting="verifier.resources.cpu", type="string", check=_quantity),
    Key(
        path=f"{_RESOURCES}.memory",
        setting="verifier.resources.memory",
        type="string",
        check=_quantity,
    ),
    Key(path="spec.drift.repair", setting="drift.repair", type="boolean"),
)
"""Every known leaf of ``spec``, in the CRD's order (the first invalid one is reported)."""
