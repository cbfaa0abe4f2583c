"""JSON Pointer and JSON Patch (RFC 6901, RFC 6902), just what parity needs.

The engine computes a patched copy of a resource; :func:`diff` turns the difference into the
JSON Patch that the mutating webhook returns and that ``fix`` replays onto the user's YAML (so
comments and key order survive).
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping, MutableSequence, Sequence
from typing import Any

__all__ = ["apply_in_place", "diff", "pointer", "split_pointer", "unescape"]

Operation = dict[str, Any]


def pointer(*segments: str | int) -> str:
    """Join path segments into a JSON Pointer, escaping ``~`` and ``/``."""
    out = ""
    for segment in segments:
        text = str(segment)
        if "~" in text or "/" in text:
            text = text.replace("~", "~0").replace("/", "~1")
        out += "/" + text
    return out


def split_pointer(ptr: str) -> list[str]:
    """Split a JSON Pointer into its unescaped segments."""
    if not ptr:
        return []
    return [unescape(s) for s in ptr[1:].split("/")]


def unescape(segment: str) -> str:
    """One JSON Pointer segment as the key it names (``~1`` is ``/``, ``~0`` is ``~``)."""
    return segment.replace("~1", "/").replace("~0", "~")


def diff(old: Any, new: Any, path: str = "") -> list[Operation]:
    """The JSON Patch that turns ``old`` into ``new``.

    Lists that only grew at the end get ``add …/-`` operations (so a user's own list items are
    never rewritten); other list changes replace element by element or, when lengths differ,
    the whole list.
    """
    if isinstance(old, Mapping) and isinstance(new, Mapping):
        ops: list[Operation] = []
        for key, value in new.items():
            child = path + pointer(key)
            if key not in old:
                ops.append({"op": "add", "path": child, "value": value})
            else:
                ops.extend(diff(old[key], value, child))
        ops.extend({"op": "remove", "path": path + pointer(k)} for k in old if k not in new)
        return ops
    if _is_list(old) and _is_list(new):
        if len(new) >= len(old) and all(_same(a, b) for a, b in zip(old, new, strict=False)):
            return [{"op": "add", "path": path + "/-", "value": v} for v in new[len(old) :]]
        if len(new) == len(old):
            ops = []
            for index, (a, b) in enumerate(zip(old, new, strict=True)):
                ops.extend(diff(a, b, path + pointer(index)))
            return ops
    if _same(old, new):
        return []
    return [{"op": "replace", "path": path, "value": new}]


def _is_list(value: Any) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, str | bytes)


def _same(a: Any, b: Any) -> bool:
    # bool is an int in Python; a patch must still turn True into 1 and back.
    return type(a) is type(b) and a == b if isinstance(a, bool) or isinstance(b, bool) else a == b


def apply_in_place(document: MutableMapping[str, Any], ops: Sequence[Operation]) -> None:
    """Apply ``add``/``replace``/``remove`` operations to ``document`` in place.

    Works on any mutable mapping and sequence types, so ruamel.yaml's comment-preserving
    containers keep their comments and key order.
    """
    for op in ops:
        *parents, last = split_pointer(op["path"])
        target: Any = document
        for segment in parents:
            target = target[int(segment)] if _is_list(target) else target[segment]
        kind = op["op"]
        if isinstance(target, MutableSequence):
            if kind == "add" and last == "-":
                target.append(op["value"])
            elif kind == "add":
                target.insert(int(last), op["value"])
            elif kind == "replace":
                target[int(last)] = op["value"]
            else:
                del target[int(last)]
        elif kind in ("add", "replace"):
            target[last] = op["value"]
        else:
            del target[last]
