"""The round-trip YAML of ``fix``: untouched values kept as written, aliases un-shared on edit.

Two things a plain ruamel.yaml round trip gets wrong for ``fix``:

* It writes every scalar again from its value, so ``+_1`` comes back as ``1``, ``1e400`` as
  ``.inf``, ``-0755`` as ``-755`` and ``null`` as a blank: the same value to ruamel.yaml's
  YAML 1.2, another one to kubectl's YAML 1.1 reader. Here an untagged plain scalar that is no
  string is read as :class:`Plain`, its text, and written back as that text.
* An anchored node used again through an alias (``*id001``, as ``yaml.safe_dump`` writes
  objects used twice) or a merge key (``<<: *base``) is one object: an edit through one place
  shows at all of them. :func:`unshare` copies a node at the place a patch goes through, so
  the anchor and its other users stay as they were.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.anchor import Anchor
from ruamel.yaml.comments import CommentedMap, CommentedSeq, merge_attrib
from ruamel.yaml.constructor import RoundTripConstructor
from ruamel.yaml.nodes import Node, ScalarNode
from ruamel.yaml.representer import RoundTripRepresenter

from dask_gpu_parity.core.patch import Operation, split_pointer

__all__ = ["Plain", "keep_anchors", "round_trip", "unshare"]

_STR, _MERGE = "tag:yaml.org,2002:str", "tag:yaml.org,2002:merge"


class Plain(str):
    """An untagged plain scalar that is no string (a number, a null, a bool), as written."""

    __slots__ = ("tag",)
    tag: str


class _Constructor(RoundTripConstructor):
    def construct_object(self, node: Node, deep: bool = False) -> Any:
        if (
            isinstance(node, ScalarNode)
            and not node.style
            and node.anchor is None  # ruamel.yaml's own types keep the anchor
            and str(node.tag) not in (_STR, _MERGE)
            and node.tag == self.resolver.resolve(ScalarNode, node.value, (True, False))
        ):
            value = Plain(node.value)
            value.tag = str(node.tag)
            return value
        return super().construct_object(node, deep)


class _Representer(RoundTripRepresenter):
    def represent_plain(self, data: Plain) -> Any:
        return self.represent_scalar(data.tag, str(data), style=None)


_Representer.add_representer(Plain, _Representer.represent_plain)


def round_trip() -> YAML:
    """A ruamel.yaml round trip that writes untouched plain scalars as they were written."""
    rt = YAML(typ="rt")
    rt.Constructor = _Constructor
    rt.Representer = _Representer
    return rt


def keep_anchors(data: Any) -> None:
    """Mark every named anchor to be written, also one whose last alias a fix un-shared.

    Anchors named as ruamel.yaml and PyYAML name them (``id001``) are named again on writing.
    """
    for node in _count(data, {}):
        if _anchor(node) is not None:
            getattr(node, Anchor.attrib).always_dump = True


def _anchor(node: Any) -> str | None:
    anchor = getattr(node, Anchor.attrib, None)
    return anchor.value if anchor is not None else None


def _children(node: Any) -> list[Any]:
    """The values a collection holds (not those a merge key brings in: the merged maps)."""
    if isinstance(node, CommentedMap):
        merged = list(getattr(node, merge_attrib, None) or ())
        return [v for k, v in node.items() if k in node._ok] + merged
    if isinstance(node, CommentedSeq):
        return list(node)
    return []


def _counted(node: Any) -> bool:
    return isinstance(node, CommentedMap | CommentedSeq) or _anchor(node) is not None


def _count(data: Any, counts: dict[int, int]) -> list[Any]:
    """The collections and anchored values in ``data``; ``counts``: how many hold each."""
    found: list[Any] = []
    stack = [data]
    seen: set[int] = set()
    while stack:
        for child in _children(stack.pop()):
            if not _counted(child):
                continue
            counts[id(child)] = counts.get(id(child), 0) + 1
            if id(child) not in seen:
                seen.add(id(child))
                found.append(child)
                stack.append(child)
    return found


class Unfixable(ValueError):
    """A patch that cannot be replayed onto the YAML as written: the message says why."""


def unshare(data: Any, ops: Sequence[Operation]) -> None:
    """Copy, at the place each operation goes through, every node that is also elsewhere.

    Raises:
        Unfixable: an operation removes a key that comes from a merge key (``<<``).
    """
    counts: dict[int, int] = {}
    _count(data, counts)
    for op in ops:
        path = split_pointer(op["path"])
        node = data
        for segment in path[:-1]:
            key: Any = segment
            if isinstance(node, CommentedSeq):
                if not segment.isdigit() or int(segment) >= len(node):
                    break
                key = int(segment)
            elif not isinstance(node, CommentedMap) or segment not in node:
                break
            child = node[key]
            if not isinstance(child, CommentedMap | CommentedSeq):
                break
            merged = isinstance(node, CommentedMap) and key not in node._ok
            if merged or counts.get(id(child), 0) > 1:
                if not merged:
                    counts[id(child)] -= 1
                child = _copy(child, counts)
                node[key] = child
            node = child
        else:
            last = path[-1] if path else ""
            if op["op"] == "remove" and isinstance(node, CommentedMap) and last not in node._ok:
                raise Unfixable(
                    f"{op['path']} comes from a YAML merge key (<<) that other places share: "
                    "write the key out in this place, then fix it"
                )


def _copy(node: CommentedMap | CommentedSeq, counts: dict[int, int]) -> Any:
    """A copy of ``node`` without its anchor; what else holds, or is anchored, stays shared."""
    memo: dict[int, Any] = {}
    stack = [node]
    while stack:
        for child in _children(stack.pop()):
            if not _counted(child):
                continue
            if id(child) in memo or _anchor(child) is not None or counts.get(id(child), 0) > 1:
                memo[id(child)] = child  # the copy holds it too
                counts[id(child)] = counts.get(id(child), 0) + 1
            else:
                stack.append(child)
    duplicate = copy.deepcopy(node, memo)
    setattr(duplicate, Anchor.attrib, Anchor())
    return duplicate
