"""Reading a ``DaskGPUPolicy`` manifest into a :class:`~.policy.Policy`, validated field by field.

The same validation serves the operator (its policy index), the CLI (``--policy``) and the
verifier flags (``with_verifier``); every error names the field.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any, TypeVar

from dask_gpu_parity.names import POLICY_API_VERSION, POLICY_KIND

from . import quantity
from .findings import Severity
from .gpu import is_gpu_resource
from .labels import LabelSelector
from .policy import (
    Delivery,
    ExtendedResourceToleration,
    Mode,
    Placement,
    Policy,
    PolicyError,
)

__all__ = ["load", "with_verifier"]

_E = TypeVar("_E", bound=enum.StrEnum)
_CC = re.compile(r"^\d+\.\d+$")
# An image reference pinned to a tag or a digest (docker's reference grammar, loosely).
_NAME = r"[a-z0-9]+(?:[._-][a-z0-9]+)*(?::\d+)?(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*"
_TAG, _DIGEST = r":\w[\w.-]{0,127}", r"@sha256:[0-9a-f]{64}"
_PINNED = re.compile(rf"^{_NAME}(?:{_TAG}|{_DIGEST}|{_TAG}{_DIGEST})$")
_REGISTRY = re.compile(rf"^{_NAME}/?$")  # a mirror: host[:port][/path]


_SPEC_KEYS = {
    "mode",
    "priority",
    "namespaceSelector",
    "tcpSeverity",
    "scheduler",
    "placement",
    "verifier",
    "drift",
}


def load(manifest: Any) -> Policy:
    """A :class:`Policy` from a ``DaskGPUPolicy`` manifest (a dict), validated.

    Raises:
        PolicyError: naming the first invalid field.
    """
    if not isinstance(manifest, Mapping):
        raise PolicyError("policy: expected a DaskGPUPolicy object (a mapping)")
    if manifest.get("kind") != POLICY_KIND:
        raise PolicyError(f"kind: expected {POLICY_KIND}, found {manifest.get('kind')!r}")
    if manifest.get("apiVersion") != POLICY_API_VERSION:
        raise PolicyError(
            f"apiVersion: expected {POLICY_API_VERSION}, found {manifest.get('apiVersion')!r}"
        )
    metadata = _mapping(manifest.get("metadata", {}), "metadata")
    spec = _mapping(manifest.get("spec", {}), "spec")
    _no_unknown(spec, _SPEC_KEYS, "spec")
    scheduler = _mapping(spec.get("scheduler", {}), "spec.scheduler")
    _no_unknown(scheduler, {"gpuResource", "gpuCount", "nodeSelector"}, "spec.scheduler")
    placement = _mapping(spec.get("placement", {}), "spec.placement")
    _no_unknown(placement, {"strategy", "extendedResourceToleration"}, "spec.placement")
    verifier = _mapping(spec.get("verifier", {}), "spec.verifier")
    _no_unknown(
        verifier,
        {
            "enabled",
            "delivery",
            "image",
            "registry",
            "minComputeCapability",
            "expectDriverVersion",
            "resources",
        },
        "spec.verifier",
    )
    resources = _mapping(verifier.get("resources", {}), "spec.verifier.resources")
    _no_unknown(resources, {"cpu", "memory"}, "spec.verifier.resources")
    drift = _mapping(spec.get("drift", {}), "spec.drift")
    _no_unknown(drift, {"repair"}, "spec.drift")

    defaults = Policy()
    gpu_resource = _optional_str(scheduler.get("gpuResource"), "spec.scheduler.gpuResource")
    if gpu_resource is not None and not is_gpu_resource(gpu_resource):
        raise PolicyError(
            f"spec.scheduler.gpuResource: {gpu_resource!r} is not an NVIDIA GPU resource "
            "(nvidia.com/gpu, nvidia.com/gpu.shared or nvidia.com/mig-<profile>)"
        )
    gpu_count = _int(scheduler.get("gpuCount", 1), "spec.scheduler.gpuCount")
    if gpu_count < 1:
        raise PolicyError(f"spec.scheduler.gpuCount: must be at least 1, found {gpu_count}")
    min_cc = _optional_str(
        verifier.get("minComputeCapability"), "spec.verifier.minComputeCapability"
    )
    if min_cc is not None and not _CC.match(min_cc):
        raise PolicyError(
            f'spec.verifier.minComputeCapability: expected MAJOR.MINOR like "8.0", found {min_cc!r}'
        )
    ert = placement.get("extendedResourceToleration", "auto")
    if isinstance(ert, bool):  # YAML 1.1 reads on/off/yes/no as booleans
        ert = "enabled" if ert else "disabled"
    image, registry = _probe_image(verifier)
    name = metadata.get("name")
    return Policy(
        name=name if isinstance(name, str) and name else "unnamed",
        mode=_enum(Mode, spec.get("mode", defaults.mode.value), "spec.mode"),
        priority=_int(spec.get("priority", 0), "spec.priority"),
        namespace_selector=_selector(spec.get("namespaceSelector", {})),
        tcp_severity=_severity(spec.get("tcpSeverity", "error")),
        scheduler_gpu_resource=gpu_resource,
        scheduler_gpu_count=gpu_count,
        scheduler_node_selector=tuple(
            sorted(
                _str_map(scheduler.get("nodeSelector", {}), "spec.scheduler.nodeSelector").items()
            )
        ),
        placement=_enum(
            Placement,
            placement.get("strategy", defaults.placement.value),
            "spec.placement.strategy",
        ),
        extended_resource_toleration=_enum(
            ExtendedResourceToleration,
            ert,
            "spec.placement.extendedResourceToleration",
        ),
        verifier_enabled=_bool(verifier.get("enabled", True), "spec.verifier.enabled"),
        verifier_delivery=_enum(
            Delivery,
            verifier.get("delivery", defaults.verifier_delivery.value),
            "spec.verifier.delivery",
        ),
        verifier_image=image,
        verifier_registry=registry,
        verifier_min_compute_capability=min_cc,
        verifier_expect_driver=_bool(
            verifier.get("expectDriverVersion", True), "spec.verifier.expectDriverVersion"
        ),
        verifier_cpu=_quantity(resources.get("cpu", defaults.verifier_cpu), "resources.cpu"),
        verifier_memory=_quantity(
            resources.get("memory", defaults.verifier_memory), "resources.memory"
        ),
        drift_repair=_bool(drift.get("repair", False), "spec.drift.repair"),
    )


def with_verifier(
    policy: Policy,
    *,
    delivery: str | None = None,
    image: str | None = None,
    registry: str | None = None,
) -> Policy:
    """``policy`` with the verifier's delivery or probe image overridden (CLI flags), validated.

    Raises:
        PolicyError: naming the setting, as :func:`load` would.
    """
    verifier: dict[str, Any] = {
        "image": policy.verifier_image,
        "registry": policy.verifier_registry,
    }
    if image is not None or registry is not None:  # one replaces the other
        verifier = {"image": image, "registry": registry}
    image, registry = _probe_image(verifier)
    return replace(
        policy,
        verifier_delivery=_enum(
            Delivery, delivery or policy.verifier_delivery.value, "spec.verifier.delivery"
        ),
        verifier_image=image,
        verifier_registry=registry,
    )


def _probe_image(verifier: Mapping[str, Any]) -> tuple[str | None, str | None]:
    image = _optional_str(verifier.get("image"), "spec.verifier.image")
    registry = _optional_str(verifier.get("registry"), "spec.verifier.registry")
    if image is not None and registry is not None:
        raise PolicyError(
            "spec.verifier.registry: set either image (a whole reference) or registry (a mirror "
            "of this release's probe image), not both"
        )
    if image is not None and not _PINNED.match(image):
        raise PolicyError(
            f"spec.verifier.image: expected an image reference with a tag or a digest, like "
            f'"registry.example.com/dask-gpu-parity-probe:0.2.0", found {image!r}'
        )
    if registry is not None and not _REGISTRY.match(registry):
        raise PolicyError(
            f"spec.verifier.registry: expected a registry host and optional path, like "
            f'"registry.example.com/mirror", found {registry!r}'
        )
    return image, registry


def _mapping(value: Any, where: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise PolicyError(f"{where}: expected an object, found {type(value).__name__}")
    return value


def _no_unknown(value: Mapping[str, Any], known: set[str], where: str) -> None:
    unknown = sorted(str(k) for k in value if k not in known)
    if unknown:
        raise PolicyError(
            f"{where}.{unknown[0]}: unknown field (known: {', '.join(sorted(known))})"
        )


def _optional_str(value: Any, where: str) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise PolicyError(f"{where}: expected a string, found {type(value).__name__}")
    return value


def _int(value: Any, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise PolicyError(f"{where}: expected an integer, found {value!r}")
    return value


def _bool(value: Any, where: str) -> bool:
    if not isinstance(value, bool):
        raise PolicyError(f"{where}: expected true or false, found {value!r}")
    return value


def _quantity(value: Any, where: str) -> str:
    if not isinstance(value, str) or quantity.parse(value) is None:
        raise PolicyError(f"spec.verifier.{where}: expected a quantity string, found {value!r}")
    return value


def _enum(kind: type[_E], value: Any, where: str) -> _E:
    try:
        return kind(str(value).lower())
    except ValueError:
        choices = ", ".join(m.value for m in kind)
        raise PolicyError(f"{where}: expected one of {choices}, found {value!r}") from None


def _severity(value: Any) -> Severity:
    if value not in ("error", "warning"):
        raise PolicyError(f"spec.tcpSeverity: expected error or warning, found {value!r}")
    return Severity.parse(value)


def _str_map(value: Any, where: str) -> dict[str, str]:
    value = _mapping(value, where)
    for key, item in value.items():
        if not isinstance(item, str):
            raise PolicyError(f"{where}.{key}: expected a string, found {item!r}")
    return dict(value)


def _selector(value: Any) -> LabelSelector:
    where = "spec.namespaceSelector"
    value = _mapping(value, where)
    _no_unknown(value, {"matchLabels", "matchExpressions"}, where)
    labels = _str_map(value.get("matchLabels", {}), f"{where}.matchLabels")
    expressions = value.get("matchExpressions", [])
    if not isinstance(expressions, list):
        raise PolicyError(f"{where}.matchExpressions: expected a list")
    terms = []
    for i, term in enumerate(expressions):
        at = f"{where}.matchExpressions[{i}]"
        expression = _mapping(term, at)
        operator = expression.get("operator")
        if operator not in ("In", "NotIn", "Exists", "DoesNotExist"):
            raise PolicyError(
                f"{at}.operator: expected In, NotIn, Exists or DoesNotExist, found {operator!r}"
            )
        key = expression.get("key")
        if not isinstance(key, str) or not key:
            raise PolicyError(f"{at}.key: expected a label key")
        values = expression.get("values", [])
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            raise PolicyError(f"{at}.values: expected a list of strings")
        if operator in ("In", "NotIn") and not values:
            raise PolicyError(f"{at}.values: {operator} needs at least one value")
        terms.append((key, operator, tuple(values)))
    return LabelSelector(tuple(sorted(labels.items())), tuple(terms))
