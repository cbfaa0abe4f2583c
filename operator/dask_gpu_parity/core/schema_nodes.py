"""The CRD schema compiled into nodes, and the walk that checks any value against them.

:mod:`.schema` specialises this walk for the common case (plain ``dict``/``list`` documents); this
walk is the reference it falls back to for anything else, and defines every issue's words.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .patch import pointer

__all__ = [
    "At",
    "Issue",
    "Node",
    "check",
    "check_unique",
    "compile_node",
    "pointer_of",
    "type_issue",
    "wrong_type",
]

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


# A path as the walk goes: (parent, key), built for every node but turned into a JSON Pointer
# only for an issue. Path strings for all nodes cost more than the checks themselves.
At = tuple[Any, str | int] | None


def pointer_of(at: At) -> str:
    """The JSON Pointer of a walk's position."""
    keys: list[str | int] = []
    while at is not None:
        at, key = at
        keys.append(key)
    return pointer(*reversed(keys))


@dataclass(slots=True, eq=False)
class Node:
    """One schema node, compiled: what to check, without dictionary lookups per value."""

    schema: Mapping[str, Any]
    expected: str | None = None
    types: tuple[type, ...] | None = None  # None: any type
    exact: frozenset[type] = frozenset()  # classes that pass without isinstance checks
    numeric: bool = False  # integer or number: a bool is neither
    nullable: bool = False
    enum: list[Any] | None = None
    properties: dict[Any, Node] | None = None
    extra: Node | None = None  # additionalProperties as a schema
    open: bool = False  # unknown fields are kept, not pruned
    required: tuple[str, ...] = ()
    items: Node | None = None
    unique: bool = False  # x-kubernetes-list-type map or set
    leaf: bool = True  # nothing to check but the type


_CLOSED = Node({})


def compile_node(schema: Mapping[str, Any], done: dict[int, Node]) -> Node:
    """``schema`` as a node; ``done`` holds the nodes compiled so far, by schema identity."""
    if id(schema) in done:
        return done[id(schema)]
    expected = schema.get("type")
    node = done[id(schema)] = Node(
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
        node.properties = {k: compile_node(v, done) for k, v in properties.items()}
    extra = schema.get("additionalProperties")
    if isinstance(extra, Mapping):
        node.extra = compile_node(extra, done)
    if "items" in schema:
        node.items = compile_node(schema["items"], done)
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


def wrong_type(value: Any, node: Node) -> bool:
    """Whether ``value`` is not of the node's type (a bool is no number)."""
    if value.__class__ in node.exact:  # the common case: one set lookup
        return False
    return node.types is not None and (
        not isinstance(value, node.types) or (node.numeric and isinstance(value, bool))
    )


def type_issue(value: Any, node: Node, at: At) -> Issue:
    """The API server's words for a value of the wrong type."""
    return Issue(
        pointer_of(at), f'Invalid value: "{_type_name(value)}": must be of type {node.expected}'
    )


def check(value: Any, node: Node, at: At, issues: list[Issue]) -> None:
    """Add to ``issues`` what the API server would say about ``value`` at ``at``."""
    if wrong_type(value, node):
        issues.append(type_issue(value, node, at))
        return
    if node.enum is not None and value not in node.enum:
        allowed = ", ".join(json.dumps(v) for v in node.enum)
        issues.append(
            Issue(
                pointer_of(at),
                f"Unsupported value: {json.dumps(value)}: supported values: {allowed}",
            )
        )
    if isinstance(value, dict):
        check_object(value, node, at, issues)
    elif isinstance(value, list) and node.items is not None:
        items = node.items
        for index, item in enumerate(value):
            if not items.leaf:
                check(item, items, (at, index), issues)
            elif wrong_type(item, items):
                issues.append(type_issue(item, items, (at, index)))
        if node.unique:
            check_unique(value, node.schema, at, issues)


def check_object(value: Mapping[Any, Any], node: Node, at: At, issues: list[Issue]) -> None:
    """The fields of an object: pruned, nulls dropped, each checked, the required present."""
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
                        pointer_of((at, str(key))), "Unknown field: dropped by the API server", True
                    )
                )
        elif not sub.leaf:
            check(item, sub, (at, str(key)), issues)
        elif item.__class__ not in sub.exact and wrong_type(item, sub):
            issues.append(type_issue(item, sub, (at, str(key))))
    for key in node.required:
        item = value.get(key)
        sub = properties.get(key) if properties is not None else None
        if item is None and not (key in value and (sub or node.extra or _CLOSED).nullable):
            issues.append(Issue(pointer_of(at) + pointer(key), "Required value"))


def check_unique(value: list[Any], schema: Mapping[str, Any], at: At, issues: list[Issue]) -> None:
    """Duplicate keys of a list-map, duplicate items of a list-set."""
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
                issues.append(Issue(pointer_of((at, index)), f"Duplicate value: {shown}"))
            seen.add(key)
    elif list_type == "set":
        seen_items: list[Any] = []
        for index, item in enumerate(value):
            if item in seen_items:
                issues.append(
                    Issue(pointer_of((at, index)), f"Duplicate value: {json.dumps(item)}")
                )
            seen_items.append(item)
