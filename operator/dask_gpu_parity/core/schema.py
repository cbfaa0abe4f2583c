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
import pkgutil
from collections.abc import Callable, Iterable, Mapping
from functools import cache
from typing import Any

from .patch import pointer
from .schema_nodes import (
    At,
    Issue,
    Node,
    check,
    check_unique,
    compile_node,
    pointer_of,
    type_issue,
    wrong_type,
)

__all__ = ["Issue", "extract", "schemas", "validate"]


@cache
def schemas() -> Mapping[str, Any]:
    """The ``openAPIV3Schema`` of each Dask kind, keyed by kind."""
    # pkgutil, not importlib.resources, which imports tempfile and zipfile (`check`'s start-up)
    raw = pkgutil.get_data(__package__, "data/dask_crds.json")
    if raw is None:  # a loader that cannot read data files: none of Python's own
        raise FileNotFoundError("dask_gpu_parity/core/data/dask_crds.json is not installed")
    data: dict[str, Any] = json.loads(raw)["schemas"]
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
    checker = _validator(kind)
    if checker is None:
        return []
    issues: list[Issue] = []
    body = {k: v for k, v in document.items() if k not in ("apiVersion", "kind", "metadata")}
    checker(body, None, issues)
    return issues


# The schema specialised once per kind: one closure per schema node that has more to check than
# a type, each with its fields' table at hand. The closures take the common case (plain dicts
# and lists, what the readers make, no enum on containers) and hand anything else to
# ``schema_nodes.check``, the reference walk, so every issue is the same either way.
_Check = Callable[[Any, At, list[Issue]], None]
# A field as its object's closure checks it: the closure (None for a type-only leaf), the
# classes a leaf accepts at once (None: any), its node, and whether null is kept for it.
_Field = tuple[_Check | None, frozenset[type] | None, Node, bool]


@cache
def _validator(kind: str) -> _Check | None:
    schema = schemas().get(kind)
    return None if schema is None else _specialise(compile_node(schema, {}), {})


def _specialise(node: Node, done: dict[int, _Check]) -> _Check:
    if id(node) in done:
        return done[id(node)]
    fast = node.enum is None
    if fast and node.items is not None and (node.types is None or list in node.exact):
        made = _list_check(node, _field(node.items, done))
    elif fast and (node.types is None or dict in node.exact) and node.items is None:
        made = _object_check(node, done)
    else:

        def made(value: Any, at: At, issues: list[Issue]) -> None:
            check(value, node, at, issues)

    done[id(node)] = made
    return made


def _field(node: Node, done: dict[int, _Check]) -> _Field:
    if node.leaf:
        return None, None if node.types is None else node.exact, node, node.nullable
    return _specialise(node, done), None, node, node.nullable


def _object_check(node: Node, done: dict[int, _Check]) -> _Check:
    fields = {k: _field(sub, done) for k, sub in (node.properties or {}).items()}
    extra = None if node.extra is None else _field(node.extra, done)
    closed = not node.open
    properties = node.properties or {}
    required = tuple(
        (key, bool(sub and sub.nullable))
        for key in node.required
        for sub in [properties.get(key) or node.extra]
    )

    def check_object(value: Any, at: At, issues: list[Issue]) -> None:
        if value.__class__ is not dict:
            check(value, node, at, issues)
            return
        for key, item in value.items():
            entry = fields.get(key, extra)
            if entry is None:
                if item is not None and closed:
                    issues.append(
                        Issue(
                            pointer_of((at, str(key))),
                            "Unknown field: dropped by the API server",
                            True,
                        )
                    )
                continue
            sub_check, exact, sub, nullable = entry
            if item is None and not nullable:
                continue  # dropped by the API server before validation
            if sub_check is not None:
                sub_check(item, (at, str(key)), issues)
            elif exact is not None and item.__class__ not in exact and wrong_type(item, sub):
                issues.append(type_issue(item, sub, (at, str(key))))
        for key, nullable in required:
            if value.get(key) is None and not (nullable and key in value):
                issues.append(Issue(pointer_of(at) + pointer(key), "Required value"))

    return check_object


def _list_check(node: Node, items: _Field) -> _Check:
    item_check, exact, sub, _ = items
    unique = node.unique
    map_keys = _map_keys(node) if node.schema.get("x-kubernetes-list-type") == "map" else None

    def check_list(value: Any, at: At, issues: list[Issue]) -> None:
        if value.__class__ is not list:
            check(value, node, at, issues)
            return
        if item_check is not None:
            for index, item in enumerate(value):
                item_check(item, (at, index), issues)
        elif exact is not None:
            for index, item in enumerate(value):
                if item.__class__ not in exact and wrong_type(item, sub):
                    issues.append(type_issue(item, sub, (at, index)))
        if map_keys is not None:
            _unique_map(value, map_keys, at, issues)
        elif unique:
            check_unique(value, node.schema, at, issues)

    return check_list


def _map_keys(node: Node) -> tuple[tuple[str, Any], ...]:
    """A list-map's keys, each with the default an item without it takes."""
    item_props = node.schema["items"].get("properties", {})
    keys = node.schema.get("x-kubernetes-list-map-keys", ())
    return tuple((k, item_props.get(k, {}).get("default")) for k in keys)


def _unique_map(
    value: list[Any], keys: tuple[tuple[str, Any], ...], at: At, issues: list[Issue]
) -> None:
    """``check_unique`` for a list-map, with its keys and defaults looked up once."""
    seen: set[str] = set()
    for index, item in enumerate(value):
        if item.__class__ is not dict and not isinstance(item, Mapping):
            continue
        values = [item.get(k, default) for k, default in keys]
        key = repr(values)  # the same for equal JSON values, and cheaper than json.dumps
        if key in seen:
            shown = json.dumps(values, default=str)
            issues.append(Issue(pointer_of((at, index)), f"Duplicate value: {shown}"))
        seen.add(key)
