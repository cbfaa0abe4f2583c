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
    node = _compiled(kind)
    if node is None:
        return []
    issues: list[Issue] = []
    body = {k: v for k, v in document.items() if k not in ("apiVersion", "kind", "metadata")}
    _check(body, node, None, issues)
    return issues


# A path as the walk goes: (parent, key), built for every node but turned into a JSON Pointer
# only for an issue. Path strings for all nodes cost more than the checks themselves.
_At = tuple[Any, str | int] | None


def _pointer(at: _At) -> str:
    keys: list[str | int] = []
    while at is not None:
        at, key = at
        keys.append(key)
    return pointer(*reversed(keys))


@dataclass(slots=True, eq=False)
class _Node:
    """One schema node, compiled: what to check, without dictionary lookups per value."""

    schema: Mapping[str, Any]
    expected: str | None = None
    types: tuple[type, ...] | None = None  # None: any type
    exact: frozenset[type] = frozenset()  # classes that pass without isinstance checks
    numeric: bool = False  # integer or number: a bool is neither
    nullable: bool = False
    enum: list[Any] | None = None
    properties: dict[Any, _Node] | None = None
    extra: _Node | None = None  # additionalProperties as a schema
    open: bool = False  # unknown fields are kept, not pruned
    required: tuple[str, ...] = ()
    items: _Node | None = None
    unique: bool = False  # x-kubernetes-list-type map or set
    leaf: bool = True  # nothing to check but the type


_CLOSED = _Node({})


@cache
def _compiled(kind: str) -> _Node | None:
    schema = schemas().get(kind)
    return None if schema is None else _compile(schema, {})


def _compile(schema: Mapping[str, Any], done: dict[int, _Node]) -> _Node:
    if id(schema) in done:
        return done[id(schema)]
    expected = schema.get("type")
    node = done[id(schema)] = _Node(
        schema,
        expected=expected,
        types=_TYPES.get(expected) if expected else None,
        numeric=expected in ("integer", "number"),
        nullable=bool(schema.get("nullable", False)),
        enum=schema.get("enum"),
        open=bool(schema.get("x-kubernetes-preserve-unknown-fields"))
        or schema.get("additionalProperties") is True,
        required=tuple(schema.get("required", ())),
        unique=schema.get("x-kubernetes-list-type") in ("map", "set"),
    )
    if node.types is not None:
        node.exact = frozenset(t for t in node.types if not (node.numeric and t is bool))
    properties = schema.get("properties")
    if properties is not None:
        node.properties = {k: _compile(v, done) for k, v in properties.items()}
    extra = schema.get("additionalProperties")
    if isinstance(extra, Mapping):
        node.extra = _compile(extra, done)
    if "items" in schema:
        node.items = _compile(schema["items"], done)
    node.leaf = not (
        node.enum is not None
        or node.properties is not None
        or node.extra is not None
        or node.required
        or node.items is not None
        or (not node.open and expected in (None, "object"))
    )
    return node


def _type_name(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    for name in ("object", "array", "string", "integer", "number"):
        if isinstance(value, _TYPES[name]):
            return name
    return type(value).__name__


def _wrong_type(value: Any, node: _Node) -> bool:
    if value.__class__ in node.exact:  # the common case: one set lookup
        return False
    return node.types is not None and (
        not isinstance(value, node.types) or (node.numeric and isinstance(value, bool))
    )


def _type_issue(value: Any, node: _Node, at: _At) -> Issue:
    return Issue(
        _pointer(at), f'Invalid value: "{_type_name(value)}": must be of type {node.expected}'
    )


def _check(value: Any, node: _Node, at: _At, issues: list[Issue]) -> None:
    if _wrong_type(value, node):
        issues.append(_type_issue(value, node, at))
        return
    if node.enum is not None and value not in node.enum:
        allowed = ", ".join(json.dumps(v) for v in node.enum)
        issues.append(
            Issue(
                _pointer(at), f"Unsupported value: {json.dumps(value)}: supported values: {allowed}"
            )
        )
    if isinstance(value, dict):
        _check_object(value, node, at, issues)
    elif isinstance(value, list) and node.items is not None:
        items = node.items
        for index, item in enumerate(value):
            if not items.leaf:
                _check(item, items, (at, index), issues)
            elif _wrong_type(item, items):
                issues.append(_type_issue(item, items, (at, index)))
        if node.unique:
            _check_unique(value, node.schema, at, issues)


def _check_object(value: Mapping[Any, Any], node: _Node, at: _At, issues: list[Issue]) -> None:
    properties = node.properties
    for key, item in value.items():
        sub = properties.get(key) if properties is not None else None
        if sub is None:
            sub = node.extra
        if item is None and (sub is None or not sub.nullable):
            continue  # dropped by the API server before validation
        if sub is None:
            if not node.open:
                issues.append(
                    Issue(
                        _pointer((at, str(key))), "Unknown field: dropped by the API server", True
                    )
                )
        elif not sub.leaf:
            _check(item, sub, (at, str(key)), issues)
        elif item.__class__ not in sub.exact and _wrong_type(item, sub):
            issues.append(_type_issue(item, sub, (at, str(key))))
    for key in node.required:
        item = value.get(key)
        sub = properties.get(key) if properties is not None else None
        if item is None and not (key in value and (sub or node.extra or _CLOSED).nullable):
            issues.append(Issue(_pointer(at) + pointer(key), "Required value"))


def _check_unique(
    value: list[Any], schema: Mapping[str, Any], at: _At, issues: list[Issue]
) -> None:
    list_type = schema.get("x-kubernetes-list-type")
    if list_type == "map":
        keys = schema.get("x-kubernetes-list-map-keys", ())
        item_props = schema["items"].get("properties", {})
        seen: set[str] = set()
        for index, item in enumerate(value):
            if not isinstance(item, Mapping):
                continue
            values = [item.get(k, item_props.get(k, {}).get("default")) for k in keys]
            key = repr(values)  # the same for equal JSON values, and cheaper than json.dumps
            if key in seen:
                shown = json.dumps(values, default=str)
                issues.append(Issue(_pointer((at, index)), f"Duplicate value: {shown}"))
            seen.add(key)
    elif list_type == "set":
        seen_items: list[Any] = []
        for index, item in enumerate(value):
            if item in seen_items:
                issues.append(Issue(_pointer((at, index)), f"Duplicate value: {json.dumps(item)}"))
            seen_items.append(item)
