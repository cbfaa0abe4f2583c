"""Validate Dask documents against the dask-kubernetes CRD schemas, as the API server would.

The schemas ship with this package as ``data/dask_crds.json``, generated from the
``dask-kubernetes`` package by :func:`extract` (``make crd-schemas``); a test keeps the copy
identical to the package, and the CLI stays free of that heavy dependency.

What the API server does with a structural schema, and so what this module does:

* ``null`` values of non-nullable fields are dropped before validation;
* unknown fields are pruned silently (reported here as ``pruned``, since the user loses them);
* wrong types, missing required fields, enum values and duplicate list-map keys are rejected.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Any

from .patch import pointer

__all__ = ["Issue", "extract", "schemas", "validate"]

_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "integer": (int,),
    "number": (int, float),
    "boolean": (bool,),
}


@dataclass(frozen=True)
class Issue:
    """One thing the API server would reject (``pruned=False``) or silently drop."""

    path: str
    message: str
    pruned: bool = False


@cache
def schemas() -> Mapping[str, Any]:
    """The ``openAPIV3Schema`` of each Dask kind, keyed by kind."""
    text = resources.files(__package__).joinpath("data/dask_crds.json").read_text("utf-8")
    data: dict[str, Any] = json.loads(text)["schemas"]
    return data


def extract(crds: Iterable[Mapping[str, Any]]) -> dict[str, Any]:
    """The data file's content from dask-kubernetes CRD manifests (descriptions dropped)."""
    out: dict[str, Any] = {}
    for crd in crds:
        kind = crd["spec"]["names"]["kind"]
        (version,) = [v for v in crd["spec"]["versions"] if v.get("storage")]
        out[kind] = _strip(version["schema"]["openAPIV3Schema"])
    return {"schemas": dict(sorted(out.items()))}


def _strip(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _strip(v) for k, v in node.items() if k != "description"}
    if isinstance(node, list):
        return [_strip(v) for v in node]
    return node


def validate(document: Mapping[str, Any], kind: str) -> list[Issue]:
    """Every issue the API server would raise or silently cause for ``document``.

    ``apiVersion``, ``kind`` and ``metadata`` are the API server's own business and are not
    checked here beyond their types.
    """
    schema = schemas().get(kind)
    if schema is None:
        return []
    issues: list[Issue] = []
    body = {k: v for k, v in document.items() if k not in ("apiVersion", "kind", "metadata")}
    _check(body, schema, "", issues)
    return issues


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    for name in ("object", "array", "string", "integer", "number"):
        if isinstance(value, _TYPES[name]):
            return name
    return type(value).__name__


def _check(value: Any, schema: Mapping[str, Any], path: str, issues: list[Issue]) -> None:
    expected = schema.get("type")
    if expected is not None:
        ok = isinstance(value, _TYPES.get(expected, (object,)))
        if ok and expected in ("integer", "number") and isinstance(value, bool):
            ok = False
        if not ok:
            issues.append(
                Issue(path, f'Invalid value: "{_type_name(value)}": must be of type {expected}')
            )
            return
    if "enum" in schema and value not in schema["enum"]:
        allowed = ", ".join(json.dumps(v) for v in schema["enum"])
        issues.append(
            Issue(path, f"Unsupported value: {json.dumps(value)}: supported values: {allowed}")
        )
    if isinstance(value, dict):
        _check_object(value, schema, path, issues)
    elif isinstance(value, list) and "items" in schema:
        items = schema["items"]
        for index, item in enumerate(value):
            _check(item, items, path + pointer(index), issues)
        _check_unique(value, schema, path, issues)


def _check_object(
    value: Mapping[str, Any], schema: Mapping[str, Any], path: str, issues: list[Issue]
) -> None:
    properties: Mapping[str, Any] | None = schema.get("properties")
    extra = schema.get("additionalProperties")
    present = set()
    for key, item in value.items():
        child = path + pointer(str(key))
        sub = properties.get(key) if properties is not None else None
        if sub is None and isinstance(extra, Mapping):
            sub = extra
        if item is None and not (sub or {}).get("nullable", False):
            continue  # dropped by the API server before validation
        if sub is None:
            if not schema.get("x-kubernetes-preserve-unknown-fields") and extra is not True:
                issues.append(Issue(child, "Unknown field: dropped by the API server", True))
            continue
        present.add(key)
        _check(item, sub, child, issues)
    for key in schema.get("required", ()):
        if key not in present:
            issues.append(Issue(path + pointer(key), "Required value"))


def _check_unique(
    value: list[Any], schema: Mapping[str, Any], path: str, issues: list[Issue]
) -> None:
    list_type = schema.get("x-kubernetes-list-type")
    if list_type == "map":
        keys = schema.get("x-kubernetes-list-map-keys", ())
        item_props = schema["items"].get("properties", {})
        seen: set[str] = set()
        for index, item in enumerate(value):
            if not isinstance(item, Mapping):
                continue
            key = json.dumps(
                [item.get(k, item_props.get(k, {}).get("default")) for k in keys], default=str
            )
            if key in seen:
                issues.append(Issue(path + pointer(index), f"Duplicate value: {key}"))
            seen.add(key)
    elif list_type == "set":
        seen_items: list[Any] = []
        for index, item in enumerate(value):
            if item in seen_items:
                issues.append(Issue(path + pointer(index), f"Duplicate value: {json.dumps(item)}"))
            seen_items.append(item)
