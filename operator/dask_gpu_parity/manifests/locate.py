"""Where a JSON Pointer is in a manifest's text: the line a finding points at."""

from __future__ import annotations

import bisect
import functools
import re

from dask_gpu_parity.core.patch import unescape

from .documents import Document, Scope
from .sources import Source

__all__ = ["SharedLines", "locate"]

# A walk's memo: JSON Pointer -> (line, scope) of the deepest key or item found on it so far.
Memo = dict[str, tuple[int, Scope | None]]


class _Block:
    """The text of one mapping, walked alone: lines count from 1 (0: the mapping's own key)."""

    __slots__ = ("line_starts", "memo", "text")

    def __init__(self, text: str) -> None:
        self.text = text
        self.line_starts = [0, *(m.end() for m in _NEWLINE.finditer(text))]
        self.memo: Memo = {}


class SharedLines:
    """The line walks of documents that hold the same text under a top-level key.

    Manifests stamped from one template differ in their names, not in their ``spec``: the
    text under such a key is walked once, however many documents hold it (its offsets and line
    breaks relative to its first line are the same in each), and each document adds its own
    first line. Held for one report; :func:`locate` without one walks every document alone.
    """

    def __init__(self) -> None:
        self._blocks: dict[str, _Block] = {}
        self._last: tuple[Source | None, int, int, _Block | None] = (None, 0, 0, None)

    def block(self, source: Source, lo: int, hi: int) -> _Block:
        """The walk of ``source.walk_text[lo:hi]`` (the findings of one document come in a row)."""
        last_source, last_lo, last_hi, last = self._last
        if last is not None and last_source is source and last_lo == lo and last_hi == hi:
            return last
        text = source.walk_text[lo:hi]
        block = self._blocks.get(text)
        if block is None:
            block = self._blocks[text] = _Block(text)
        self._last = (source, lo, hi, block)
        return block


def locate(document: Document, ptr: str, shared: SharedLines | None = None) -> int:
    """The line (from 1) of the deepest key or item on ``ptr`` found in the document's text.

    A text walk over block-style YAML (what manifests use): no second parse, no node trees
    kept from :func:`parse`. Flow-style values end the walk at the line where they start.
    With ``shared``, the walk below the object's top-level key is shared with the documents
    that hold the same text there (the same line, found the same way).
    """
    source = document.source
    full = document.prefix + ptr
    root = (document.line, _document_scope(document))
    cut = full.find("/", len(document.prefix) + 1)  # the end of the object's top-level key
    if shared is None or cut < 0:
        return _walk(source.walk_text, source.line_starts, document.located, full, root)
    head = full[:cut]
    _walk(source.walk_text, source.line_starts, document.located, head, root)
    found, scope = document.located[head]
    if scope is None:  # no such key, or an inline value: nothing deeper to find
        return found
    lo, hi = scope
    if lo and source.walk_text[lo - 1] != "\n":  # not at a line start: walked alone
        return _walk(source.walk_text, source.line_starts, document.located, full, root)
    block = shared.block(source, lo, hi)
    line = _walk(block.text, block.line_starts, block.memo, full[cut:], (0, (0, len(block.text))))
    return found if line == 0 else bisect.bisect_right(source.line_starts, lo) + line - 1


def _walk(
    text: str, starts: list[int], memo: Memo, full: str, root: tuple[int, Scope | None]
) -> int:
    """The walk of ``full`` in ``text`` from ``root``, the (line, scope) of the empty pointer."""
    end = len(full)  # the longest prefix of the pointer already walked
    while end > 0 and full[:end] not in memo:
        end = full.rfind("/", 0, end)
    end = max(end, 0)
    found, scope = memo[full[:end]] if end else root
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
                found, scope = bisect.bisect_right(starts, step[0]), step[1]
        memo[full[:nxt]] = (found, scope)
        end = nxt
    return found


_NEWLINE = re.compile("\n")
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
