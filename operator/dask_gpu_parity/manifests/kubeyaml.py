"""One YAML document read as kubectl reads it: go-yaml v2's decoding over libyaml's events.

libyaml (PyYAML's C parser) parses; the values are built here from its events as go-yaml v2
builds them (``decode.go``): scalars resolved by :mod:`.kubescalar`; the last of duplicate keys
wins; ``<<`` merges where it stands (a later merge overrides earlier keys, earlier mappings of a
merged list override later ones); anchors may be redefined; a key that is a mapping or a list,
an alias to an unknown anchor or to itself, a merge of anything but mappings, and documents that
are more than 99% aliases (go-yaml's ``excessive aliasing``) are refused. Only the first document
of a text is read (go-yaml's ``Unmarshal``).
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from dask_gpu_parity.core.plain import MAX_DEPTH

from .kubejson import TooDeep
from .kubescalar import MERGE, Limit, Refused, plain, tagged

__all__ = ["MAX_EXPANDED_NODES", "Loader", "load"]

Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
MAX_EXPANDED_NODES = 1_000_000  # our own bound on what aliases expand to
_OPEN = object()  # an anchor whose node is still being read
_MERGE_KEY = object()
_ESCAPE = re.compile(r"\\(.)", re.DOTALL)


def _allowed_alias_ratio(count: int) -> float:
    """go-yaml's allowedAliasRatio: 99% up to 400,000 decoded nodes, down to 10% at 4,000,000."""
    if count <= 400_000:
        return 0.99
    if count >= 4_000_000:
        return 0.10
    return 0.99 - 0.89 * (count - 400_000) / 3_600_000


class _Frame:
    __slots__ = ("anchor", "counted", "end", "items", "key", "merge", "start")

    def __init__(self, items: Any, anchor: str | None, start: int, *, merge: bool) -> None:
        self.items, self.anchor, self.start, self.merge = items, anchor, start, merge
        self.key: Any = _OPEN  # a mapping's pending key (_OPEN: none yet)
        self.end: Any = None


def load(text: str) -> tuple[Any, int, int] | None:
    """The first document of ``text``: its value, first and last line (from 1); None if empty.

    Raises:
        yaml.YAMLError: the text is no YAML.
        Refused: kubectl refuses the document; the message says why.
    """
    for _ in range(text.count("\\'") + 1):
        loader = Loader(text)
        try:
            return _Builder(loader, text).document()
        except yaml.scanner.ScannerError as exc:
            # go-yaml takes the escape \' in a double-quoted scalar, libyaml does not: \x27
            at = exc.problem_mark.index if exc.problem_mark is not None else 0
            at -= text[at : at + 2] != "\\'"  # libyaml marks the backslash, PyYAML the quote
            if (
                not str(exc.problem).startswith("found unknown escape")
                or text[at : at + 2] != "\\'"
            ):
                raise
            text = text[:at] + "\\x27" + text[at + 2 :]
        finally:
            loader.dispose()
    raise AssertionError("unreachable: every \\' was replaced")  # pragma: no cover


class _Builder:
    """go-yaml v2's decoding into ``interface{}``, over libyaml's events."""

    def __init__(self, loader: Any, text: str) -> None:
        self.loader = loader
        self.text = text
        self.slash = "\\/" in text  # an escape libyaml takes and go-yaml refuses
        self.anchors: dict[str, Any] = {}  # name -> (value, decoded nodes) or _OPEN
        self.decoded = 1  # go-yaml's decodeCount (the document node counts)
        self.aliased = 0  # nodes decoded through aliases
        self.stack: list[_Frame] = []
        self.root: Any = _OPEN

    def document(self) -> tuple[Any, int, int] | None:
        get = self.loader.get_event
        get()  # stream start
        event = get()
        if isinstance(event, yaml.StreamEndEvent):
            return None
        if event.version not in (None, (1, 1)):
            raise Refused("found incompatible YAML document (go-yaml reads YAML 1.1 only)")
        event = get()  # after the document start: the root node
        first = event.start_mark.line + 1
        while True:
            try:
                self._event(event)
            except Refused as exc:
                exc.line = exc.line or event.start_mark.line + 1
                # go-yaml parses the whole document before it decodes: a syntax error first
                while not isinstance(event, yaml.DocumentEndEvent):
                    event = get()
                raise
            if self.root is not _OPEN:
                mark = event.end_mark  # at column 0 it is the next line's start
                get()  # the document's end: go-yaml parses up to it, so may a syntax error
                return self.root, first, mark.line + (1 if mark.column else 0)
            event = get()

    def _merging(self) -> bool:
        return bool(self.stack) and self.stack[-1].key is _MERGE_KEY

    def _event(self, event: Any) -> None:
        if isinstance(event, yaml.ScalarEvent):
            if self._is_merge_key(event):
                self.stack[-1].key = _MERGE_KEY
                return
            self.decoded += 1
            if self.slash and event.style == '"':
                self._no_slash_escape(event)
            if event.tag is None:
                value = plain(event.value) if event.implicit[0] else event.value
            elif event.tag == "!":
                value = event.value
            else:
                value = tagged(event.tag, event.value)
            if event.anchor is not None:
                self.anchors[event.anchor] = (value, 1)
            self._add(value, alias=False)
        elif isinstance(event, (yaml.MappingStartEvent, yaml.SequenceStartEvent)):
            mapping = isinstance(event, yaml.MappingStartEvent)
            merge = not mapping and self._merging()  # a merged list is no node of its own
            self.decoded += 0 if merge else 1
            if len(self.stack) >= MAX_DEPTH:
                raise TooDeep
            if event.anchor is not None:
                self.anchors[event.anchor] = _OPEN
            self.stack.append(
                _Frame({} if mapping else [], event.anchor, self.decoded, merge=merge)
            )
        elif isinstance(event, (yaml.MappingEndEvent, yaml.SequenceEndEvent)):
            frame = self.stack.pop()
            if frame.anchor is not None:
                self.anchors[frame.anchor] = (frame.items, self.decoded - frame.start + 1)
            self._add(frame.items, alias=False, merged_list=frame.merge)
        elif isinstance(event, yaml.AliasEvent):
            self._alias(str(event.anchor))

    def _is_merge_key(self, event: Any) -> bool:
        if event.value != "<<" or not self.stack or self.stack[-1].key is not _OPEN:
            return False
        if not isinstance(self.stack[-1].items, dict):
            return False
        return bool((event.tag is None and event.implicit[0]) or event.tag == MERGE)

    def _no_slash_escape(self, event: Any) -> None:
        raw = self.text[event.start_mark.index : event.end_mark.index]
        if any(escape == "/" for escape in _ESCAPE.findall(raw)):
            raise Refused("found unknown escape character \\/ in a double-quoted scalar")

    def _alias(self, name: str) -> None:
        target = self.anchors.get(name)
        if target is None:
            raise Refused(f"unknown anchor '{name}' referenced")
        if target is _OPEN:
            raise Refused(f"anchor '{name}' value contains itself")
        value, size = target
        self.decoded += 1 + size
        self.aliased += size
        if self.decoded > MAX_EXPANDED_NODES:
            raise Limit(
                f"YAML aliases expand to more than {MAX_EXPANDED_NODES:,} nodes (a YAML bomb?): "
                "refusing to read it"
            )
        count = self.decoded
        if (
            self.aliased > 100
            and count > 1000
            and self.aliased / count > _allowed_alias_ratio(count)
        ):
            raise Refused("document contains excessive aliasing (a YAML bomb?)")
        self._add(value, alias=True)

    def _add(self, value: Any, *, alias: bool, merged_list: bool = False) -> None:
        if not self.stack:
            self.root = value
            return
        frame = self.stack[-1]
        items = frame.items
        if isinstance(items, list):
            if frame.merge and not isinstance(value, dict):
                raise Refused("map merge requires map or sequence of maps as the value")
            items.append(value)
        elif frame.key is _OPEN:
            if isinstance(value, (dict, list)):
                raise Refused(f"invalid map key: a {type(value).__name__} cannot be a key")
            frame.key = value if type(value) is str else (type(value).__name__, value)
        elif frame.key is _MERGE_KEY:
            frame.key = _OPEN
            if merged_list:
                for mapping in reversed(value):
                    items.update(mapping)
            elif isinstance(value, dict):
                items.update(value)
            else:
                raise Refused("map merge requires map or sequence of maps as the value")
        else:
            items[frame.key] = value
            frame.key = _OPEN
