"""Reading a ``DaskGPUPolicy`` manifest into a :class:`~.policy.Policy`, validated key by key.

The same validation serves the operator (its policy index), the CLI (``--policy``) and the
CLI's overrides (``override``); each error is a :class:`PolicyError` whose ``field`` is the
manifest path. What is read, and how, is the table :data:`~.policy_keys.KEYS`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dask_gpu_parity.names import POLICY_API_VERSION, POLICY_KIND

from .policy import Policy, PolicyError
from .policy_keys import KEYS, with_settings
from .policy_values import mapping

__all__ = ["load", "override", "with_verifier"]

_BY_PATH = {key.path: key for key in KEYS}
_IMAGE, _REGISTRY = "spec.verifier.image", "spec.verifier.registry"


def _objects() -> dict[str, tuple[str, ...]]:
    """Each object on the way to a known key (``spec``, ``spec.verifier``...): its fields."""
    objects: dict[str, list[str]] = {}
    for key in KEYS:
        parts = key.path.split(".")
        for depth in range(1, len(parts)):
            known = objects.setdefault(".".join(parts[:depth]), [])
            if parts[depth] not in known:
                known.append(parts[depth])
    return {path: tuple(sorted(known)) for path, known in objects.items()}


_OBJECTS = _objects()


def load(manifest: Any) -> Policy:
    """A :class:`Policy` from a ``DaskGPUPolicy`` manifest (a dict), validated.

    Raises:
        PolicyError: naming the first invalid field.
    """
    if not isinstance(manifest, Mapping):
        raise PolicyError("", "expected a DaskGPUPolicy object (a mapping)")
    if manifest.get("kind") != POLICY_KIND:
        raise PolicyError("kind", f"expected {POLICY_KIND}, found {manifest.get('kind')!r}")
    if manifest.get("apiVersion") != POLICY_API_VERSION:
        raise PolicyError(
            "apiVersion", f"expected {POLICY_API_VERSION}, found {manifest.get('apiVersion')!r}"
        )
    metadata = mapping(manifest.get("metadata", {}), "metadata")
    found = _leaves(manifest)
    name = metadata.get("name")
    policy = Policy(name=name if isinstance(name, str) and name else "unnamed")
    return _apply(policy, found)


def override(policy: Policy, values: Mapping[str, Any]) -> Policy:
    """``policy`` with some keys set anew (by manifest path), each validated as :func:`load` would.

    Setting ``spec.verifier.image`` or ``spec.verifier.registry`` clears the other: one
    replaces the other.

    Raises:
        PolicyError: naming the key's path.
    """
    values = dict(values)
    if _IMAGE in values or _REGISTRY in values:
        values = {_IMAGE: None, _REGISTRY: None, **values}
    return _apply(policy, values)


def with_verifier(
    policy: Policy,
    *,
    delivery: str | None = None,
    image: str | None = None,
    registry: str | None = None,
) -> Policy:
    """``policy`` with the verifier's delivery or probe image overridden, validated.

    Raises:
        PolicyError: naming the key, as :func:`load` would.
    """
    values: dict[str, Any] = {"spec.verifier.delivery": delivery} if delivery else {}
    if image is not None or registry is not None:
        values |= {_IMAGE: image, _REGISTRY: registry}
    return override(policy, values)


def _leaves(manifest: Mapping[str, Any]) -> dict[str, Any]:
    """The known keys the manifest sets, by path; every object on the way checked first."""
    objects: dict[str, Mapping[str, Any]] = {}
    for path, known in _OBJECTS.items():  # parents before children
        parent, _, field = path.rpartition(".")
        value = (objects[parent] if parent else manifest).get(field, {})
        objects[path] = mapping(value, path)
        unknown = sorted(str(k) for k in objects[path] if k not in known)
        if unknown:
            raise PolicyError(f"{path}.{unknown[0]}", f"unknown field (known: {', '.join(known)})")
    found = {}
    for key in KEYS:
        parent, _, field = key.path.rpartition(".")
        if field in objects[parent]:
            found[key.path] = objects[parent][field]
    return found


def _apply(policy: Policy, values: Mapping[str, Any]) -> Policy:
    unknown = sorted(set(values) - set(_BY_PATH))
    if unknown:
        raise PolicyError(unknown[0], "unknown field")
    settings = {key.setting: key.read(values[key.path]) for key in KEYS if key.path in values}
    policy = with_settings(policy, settings)
    if policy.verifier.image is not None and policy.verifier.registry is not None:
        raise PolicyError(
            _REGISTRY,
            "set either image (a whole reference) or registry (a mirror of this release's "
            "probe image), not both",
        )
    return policy
