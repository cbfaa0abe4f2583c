"""Where a JSON Pointer is in a manifest's text: the line a finding points at."""

from __future__ import annotations

import bisect
import functools
import re

from dask_gpu_parity.core.patch import unescape

from .documents import Document, Scope

__all__ = ["locate"]


def locate(document: Document, ptr: str) -> int:
    """The line (from 1) of the deepest key or item on ``ptr`` found in the document's text.

    A text walk over block-style YAML (what manifests use): no second parse, no node trees
    kept from :func:`parse`. Flow-style values end the walk at the line where they start.
    """
    memo = document.located
    full = document.prefix + ptr
    end = len(full)  # the longest prefix of the pointer already walked
    while end > 0 and full[:end] not in memo:
        end = full.rfind("/", 0, end)
    end = max(end, 0)
    found, scope = memo[full[:end]] if end else (document.line, _document_scope(document))
    text = document.source.walk_text
    while end < len(full):
        nxt = full.find("/", end + 1)
        nxt = len(full) if nxt < 0 else nxt
        if scope is not None:
            segment = unescape(full[end + 1 : nxt])
            digits = segment.isascii() and segment.isdigit()
            step = _item(text, scope, int(segment)) if digits else None
            if step is None:
                step = _key(text, scope, segment)
            if step is None:
                scope = None
            else:
                found, scope = bisect.bisect_right(document.source.line_starts, step[0]), step[1]
        memo[full[:nxt]] = (found, scope)
        end = nxt
    return found


_BLANKS = re.compile(r"(?:[ ]*(?:#[^\r\n]*)?(?:\r\n|[\r\n]))*[ ]*")  # blank, comment lines


def _document_scope(document: Document) -> Scope:
    starts = document.source.line_starts
    end = starts[document.end] if document.end < len(starts) else len(document.source.text)
    return starts[document.line - 1], end


def _first(text: str, scope: Scope) -> tuple[int, int] | None:
    """The offset and column of the scope's first content, if any."""
    lo, hi = scope
    at = _BLANKS.match(text, lo, hi)
    pos = at.end() if at else lo
    if pos >= hi or text[pos] in "\r\n#":
        return None
    return pos, pos - (text.rfind("\n", 0, pos) + 1)


@functools.cache
def _pattern(kind: str, column: int, key: str = "") -> re.Pattern[str]:
    """A regex of the walk.

    Those searched for start with a line break, so the regex engine skips ahead to line
    starts instead of trying every character.
    """
    if kind == "key":  # the key: plain, "double" or 'single' quoted, then a colon
        quoted = re.escape(key)
        return re.compile(rf"(?:{quoted}|\"{quoted}\"|'{quoted}')[ ]*:")
    if kind == "key-line":  # the key at the start of a line, indented by ``column``
        return re.compile(rf"\n {{{column}}}" + _pattern("key", 0, key).pattern)
    if kind == "item":  # a sequence item's dash at this column
        return re.compile(rf"\n {{{column}}}-(?=[ \r\n]|$)")
    # the end of a block at this column: a line indented less, or as much but not an item
    less = rf"| {{0,{column - 1}}}[^ \r\n#]" if column else ""
    return re.compile(rf"\n(?: {{{column}}}[^ \r\n#-]{less})")


def _block_end(text: str, pos: int, hi: int, column: int) -> int:
    """Where the block whose line holds ``pos`` (content at ``column``) ends."""
    end = _pattern("end", column).search(text, pos, hi)
    return end.start() + 1 if end else hi


def _key(text: str, scope: Scope, key: str) -> tuple[int, Scope | None] | None:
    first = _first(text, scope)
    if first is None:
        return None
    pos, column = first
    hi = scope[1]
    if _pattern("key", column, key).match(text, pos, hi):  # the first key may follow a dash
        at = pos
    else:
        match = _pattern("key-line", column, key).search(text, pos, hi)
        if match is None:
            return None
        at = match.start() + 1 + column
    eol = text.find("\n", at, hi)
    if text[at : eol if eol >= 0 else hi].rstrip().endswith((":", "|", ">")):
        return at, (eol + 1 if eol >= 0 else hi, _block_end(text, at, hi, column))
    return at, None  # an inline value: nothing deeper to find


def _item(text: str, scope: Scope, index: int) -> tuple[int, Scope | None] | None:
    first = _first(text, scope)
    if first is None or text[first[0]] != "-":
        return None
    pos, column = first
    end = _block_end(text, pos, scope[1], column)
    dashes = [pos, *(m.end() - 1 for m in _pattern("item", column).finditer(text, pos + 1, end))]
    if index >= len(dashes):
        return None
    stop = dashes[index + 1] - column if index + 1 < len(dashes) else end
    content = dashes[index] + 1
    while content < stop and text[content] == " ":
        content += 1
    if content < stop and text[content] in "\r\n":
        content = text.find("\n", content, stop) + 1 or stop
    return dashes[index], (content, stop)
