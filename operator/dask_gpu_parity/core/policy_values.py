"""How each value of a ``DaskGPUPolicy`` spec is checked beyond its type: the table's checks.

Each check takes the value and its manifest path and returns the setting's value, or raises a
:class:`~.policy.PolicyError` for that path.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from . import quantity
from .gpu import is_gpu_resource
from .labels import LabelSelector
from .policy import PolicyError

__all__ = [
    "SELECTOR_KEYS",
    "SELECTOR_OPERATORS",
    "Check",
    "compute_capability",
    "gpu_resource",
    "image",
    "mapping",
    "member",
    "node_selector",
    "optional",
    "quantity_string",
    "registry",
    "selector",
    "switch",
]

_CC = re.compile(r"^\d+\.\d+$")
# An image reference pinned to a tag or a digest (docker's reference grammar, loosely).
_NAME = r"[a-z0-9]+(?:[._-][a-z0-9]+)*(?::\d+)?(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*"
_TAG, _DIGEST = r":\w[\w.-]{0,127}", r"@sha256:[0-9a-f]{64}"
_PINNED = re.compile(rf"^{_NAME}(?:{_TAG}|{_DIGEST}|{_TAG}{_DIGEST})$")
_REGISTRY = re.compile(rf"^{_NAME}/?$")  # a mirror: host[:port][/path]

Check = Callable[[Any, str], Any]  # a value and its path -> the setting's value, or PolicyError


def mapping(value: Any, where: str) -> Mapping[str, Any]:
    """``value`` as an object; ``null`` is an empty one."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise PolicyError(where, f"expected an object, found {type(value).__name__}")
    return value


def optional(check: Check) -> Check:
    """A string setting that may be left out: ``null`` and ``""`` are ``None``."""

    def read(value: Any, where: str) -> Any:
        if value is None or value == "":
            return None
        if not isinstance(value, str):
            raise PolicyError(where, f"expected a string, found {type(value).__name__}")
        return check(value, where)

    return read


# Under DRA a GPU is asked for by a DeviceClass's name: its implicit
# ``deviceclass.resource.kubernetes.io/<class>`` (KEP-5004), or its ``extendedResourceName``,
# which an administrator chooses under nvidia.com (``nvidia.com/gpu``, ``nvidia.com/mig-1g.12gb``
# in NVIDIA's chart, ``nvidia.com/gpu-580`` for a class of one driver). Another vendor's domain
# is refused: a class named so is asked for by its implicit name. The CRD's pattern is this one.
_EXTENDED = re.compile(
    r"^(nvidia\.com/[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?|deviceclass\.resource\.kubernetes\.io/[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?)$"
)


def gpu_resource(value: str, where: str) -> str:
    """A GPU resource name (``spec.scheduler.gpuResource``): the device plugin's, or DRA's.

    Under DRA the name is a DeviceClass's: ``deviceclass.resource.kubernetes.io/<class>`` or
    its ``extendedResourceName``. Whether that class hands out GPUs is the cluster's to say (the
    DeviceClasses the operator watches, or ``--device-classes``); here only the form is checked.
    """
    if is_gpu_resource(value) or _EXTENDED.match(value):
        return value
    raise PolicyError(
        where,
        f"{value!r} is not a GPU resource name: nvidia.com/gpu, nvidia.com/gpu.shared, "
        "nvidia.com/mig-<profile>, deviceclass.resource.kubernetes.io/<DeviceClass> or a "
        "DeviceClass's nvidia.com/<name> extendedResourceName",
    )


def compute_capability(value: str, where: str) -> str:
    """A compute capability, ``MAJOR.MINOR``."""
    if not _CC.match(value):
        raise PolicyError(where, f'expected MAJOR.MINOR like "8.0", found {value!r}')
    return value


def image(value: str, where: str) -> str:
    """An image reference pinned to a tag or a digest."""
    if not _PINNED.match(value):
        raise PolicyError(
            where,
            "expected an image reference with a tag or a digest, like "
            f'"registry.example.com/dask-gpu-parity-probe:0.2.0", found {value!r}',
        )
    return value


def registry(value: str, where: str) -> str:
    """A registry host and optional path: a mirror of this release's probe image."""
    if not _REGISTRY.match(value):
        raise PolicyError(
            where,
            "expected a registry host and optional path, like "
            f'"registry.example.com/mirror", found {value!r}',
        )
    return value


def quantity_string(value: Any, where: str) -> str:
    """A Kubernetes quantity, as a string (``100m``, ``256Mi``)."""
    if not isinstance(value, str) or quantity.parse(value) is None:
        raise PolicyError(where, f"expected a quantity string, found {value!r}")
    return value


def str_map(value: Mapping[str, Any], where: str) -> dict[str, str]:
    for key, item in value.items():
        if not isinstance(item, str):
            raise PolicyError(f"{where}.{key}", f"expected a string, found {item!r}")
    return dict(value)


def node_selector(value: Mapping[str, Any], where: str) -> tuple[tuple[str, str], ...]:
    """A node selector's labels, sorted."""
    return tuple(sorted(str_map(value, where).items()))


def switch(value: Any) -> Any:
    """YAML 1.1 reads ``on``/``off``/``yes``/``no`` as booleans: read them as the words meant."""
    if isinstance(value, bool):
        return "enabled" if value else "disabled"
    return value


def member(kind: Callable[[str], Any]) -> Check:
    """The enum member of a value already checked against ``Key.enum``."""
    return lambda value, _where: kind(value)


SELECTOR_KEYS = ("matchLabels", "matchExpressions")
SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


def selector(value: Mapping[str, Any], where: str) -> LabelSelector:
    """A namespace selector: ``matchLabels`` and ``matchExpressions``."""
    unknown = sorted(str(k) for k in value if k not in SELECTOR_KEYS)
    if unknown:
        known = ", ".join(sorted(SELECTOR_KEYS))
        raise PolicyError(f"{where}.{unknown[0]}", f"unknown field (known: {known})")
    at = f"{where}.matchLabels"
    labels = str_map(mapping(value.get("matchLabels", {}), at), at)
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
