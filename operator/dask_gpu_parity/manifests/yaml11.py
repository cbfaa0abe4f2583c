"""kubectl's cut of a YAML stream into documents, and the fast path that reads most of them.

kubectl (``k8s.io/apimachinery/pkg/util/yaml``, ``YAMLReader``) cuts a stream at every line that
starts with ``---`` (the rest of the line must be blank or a comment, else it refuses the file)
and decodes only the first YAML document of each piece (what follows a ``...`` in the same piece
is ignored). :func:`split` cuts the same way.

The exact reader (:mod:`.kubeyaml`, libyaml's parser with go-yaml's decoding) builds every node
in Python; ``yaml-rs`` (Rust, YAML 1.2) reads several times faster. The two read some plain
scalars differently (``y``/``yes``/``on``/``off``, ``0755``, ``1e3``, ``+.5``, ``_1``,
``1:30``, dates, ``<<``), and some rarer syntax (empty block scalars, indicators opening a flow
scalar, empty keys); tags, anchors, escapes, tabs and line breaks other than LF are left to the
exact reader as well. A piece goes to ``yaml-rs`` only when the patterns below find none of those
anywhere in its text (keys, values, comments and quoted strings alike, so a false alarm only
costs speed), and its value only when every key is a string. The unit tests hold both paths to
the same result.
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from .kubescalar import Refused
from .sources import BREAK

yaml_rs: Any
try:
    import yaml_rs
except ImportError:  # pragma: no cover - no wheel for this platform: the exact reader reads all
    yaml_rs = None

__all__ = ["Piece", "Separator", "load", "split"]

_END = r"(?:[ ]*(?:$|,|\]|\}|:(?:[ \r\n]|$))|[ ]+\#)"
_SAFE_NUMBER = (  # the same int, float or string in both
    r"[-+]?(?:0|[1-9][0-9]{0,17})(?:\.[0-9]+)?"  # 8786, -1, 0.5, 25.06
    r"|(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[KMGTPE]i|[numkMGTP])"  # quantities: 16Gi, 500m, 2k
)
_SCALAR = (
    r"(?=[yYnNoO=<?:+._0-9-])"  # a quick refusal for every other first character
    rf"(?:(?:[yY](?:es)?|YES|[nN]o?|NO|[oO]n|ON|[oO]ff|OFF|=|<<)(?={_END})"  # YAML 1.1 words
    r"|[?:](?=[ \n]|$)"  # a complex key, an empty key
    # numbers: 0755, 1e3, +.5, 1:30, dates; YAML 1.2 loaders also take _1, +_1, ._1 for numbers
    rf"|(?=[-+]?[._]*[0-9])(?!(?:{_SAFE_NUMBER})(?={_END})))"
)
# Each with whether it needs flow style ([...], {...}) to find anything.
_SCALARS = tuple(
    (flow, re.compile(before + _SCALAR, re.MULTILINE))
    for flow, before in (
        (False, r"\n[ ]*+"),
        (False, r":[ ]++"),
        (False, r"-[ ]++"),
        (True, r"\[[ ]*+"),
        (True, r"\{[ ]*+"),
        (True, r",[ ]*+"),
        (False, '":'),
        (False, "':"),
    )
)
# In flow style: a flow collection as a key, an indicator opening a scalar ([|], [:x], {?: 1}),
# a key with nothing or a "?" after its colon ([a:], [a:?]): PyYAML refuses or reads them
# differently.
_FLOW_ODD = re.compile(r"[\]}][ ]*:|[\[{,][ ]*[|>:?]|:[ ]*\?|:[\]},]")
# A block scalar's header (|, >-, |+2 ...) at the end of its line.
_BLOCK_HEADER = re.compile(r"(?:^|[ ])[|>][-+0-9]*[ ]*(?:#[^\n]*)?$", re.MULTILINE)
_SPACES = re.compile("[ ]*")
_ODD = "&*!\\"  # anchors, aliases, tags, escapes
# Beyond ASCII: what PyYAML refuses, line breaks other than \n, byte order marks.
_UNUSUAL = re.compile(
    "[^\n\x20-\x7e\xa0-\u2027\u202a-\ud7ff\ue000-\ufefe\uff00-\ufffd\U00010000-\U0010ffff]"
)
# Directives and document ends, searched from a line break (a literal first character).
_WHOLE = re.compile(r"\n(?:%|\.\.\.)")
_CONTENT = re.compile(r"^(?!---(?:[ \r\n]|$))[ ]*[^\s#]|^---[ ]+[^\s#]", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class Piece:
    """One piece of the stream as kubectl cuts it: the text of (at most) one document."""

    text: str
    line: int  # the line (from 0) of the text's first character
    first: int  # the line (from 1) of the document's content: the parser's node start
    end: int  # the last line (from 1) of the text
    index: int  # the document's number in the stream as YAML counts documents (fix's numbering)
    fast: bool  # nothing in it that go-yaml and a YAML 1.2 loader read differently
    content: bool  # anything but blank lines, comments and markers


class Separator(Refused):
    """A line starting with ``---`` followed by more than a comment: kubectl refuses the file."""

    def __init__(self, rest: str, line: int) -> None:
        super().__init__(f"invalid document separator: {rest} (kubectl refuses it)")
        self.line = line


# Go's unicode.IsSpace, which kubectl strips the rest of a separator line with.
_GO_SPACE = "\t\n\v\f\r \x85\xa0\u1680\u2028\u2029\u202f\u205f\u3000" + "".join(
    map(chr, range(0x2000, 0x200B))
)
# Searched from a line break: a literal first character lets the regex engine skip ahead.
_SEPARATOR = re.compile(r"\n---([^\n]*)")
# _CONTENT where \r, \x85, \u2028 and \u2029 break lines too.
_CONTENT_ANY_BREAK = re.compile(
    r"(?:^|(?<=[\r\n\x85\u2028\u2029]))(?:(?!---(?:[ \r\n\x85\u2028\u2029]|$))[ ]*[^\s#]"
    r"|---[ ]+[^\s#])"
)
_ODD_LINE_BREAKS = re.compile("[\x85\u2028\u2029]|\r(?!\n)")


def split(text: str) -> list[Piece]:
    """The pieces of a YAML stream, in order, as kubectl cuts them.

    Raises:
        Separator: a ``---`` line followed by more than a comment.
    """
    odd_breaks = _ODD_LINE_BREAKS.search(text) is not None

    cursor = [0, 0]  # an offset and the line breaks before it: offsets asked only grow

    def lines_before(offset: int) -> int:
        at, lines = cursor
        if offset < at:
            at = lines = 0
        lines += (
            len(BREAK.findall(text, at, offset)) if odd_breaks else text.count("\n", at, offset)
        )
        cursor[:] = [offset, lines]
        return lines

    separators: list[int] = []
    bounds: list[tuple[int, int]] = []
    start = 0
    for at, after in _separators(text):
        rest = after.strip(_GO_SPACE)
        if rest and rest[0] != "#":
            raise Separator(rest, lines_before(at) + 1)
        separators.append(at)
        if at > start:  # a piece ends; the separator line belongs to no piece
            bounds.append((start, at))
            start = min(at + 4 + len(after), len(text))
        # else: nothing read since the last cut: kubectl keeps the line in the next piece
    if start < len(text):
        bounds.append((start, len(text)))
    head = text[: separators[0]] if separators else text
    implicit_first = _CONTENT.search(head) is not None  # a document before the first ---
    pieces: list[Piece] = []
    for start, stop in bounds:
        piece = text[start:stop]
        line = lines_before(start)
        lines = len(BREAK.findall(piece)) if odd_breaks else piece.count("\n")
        end = line + lines + (0 if piece.endswith(("\n", "\r")) else 1)
        content = (_CONTENT_ANY_BREAK if odd_breaks else _CONTENT).search(piece)
        if content is None:
            pieces.append(Piece(piece, line, line + 1, end, 0, fast=False, content=False))
            continue
        at = start + content.start()
        index = bisect.bisect_left(separators, at) - (0 if implicit_first else 1)
        first = lines_before(at) + 1
        whole = _WHOLE.search("\n" + piece) is not None  # directives, document ends
        fast = (
            yaml_rs is not None
            and not whole
            and not odd_breaks
            and piece[content.end() - 1] not in "[{"
            and not (piece.startswith("---") and piece[3:4] not in ("", " ", "\r", "\n"))
            and not _risky(piece)
        )
        pieces.append(Piece(piece, line, first, end, max(index, 0), fast, content=True))
    return pieces


def _separators(text: str) -> Iterator[tuple[int, str]]:
    """Each line that starts with ``---``: its offset, and the rest of the line."""
    if text.startswith("---"):
        end = text.find("\n")
        yield 0, text[3:] if end < 0 else text[3:end]
    for match in _SEPARATOR.finditer(text):
        yield match.start() + 1, match.group(1)


def _risky(piece: str) -> bool:
    """Whether anything in the piece may read differently in YAML 1.1 and 1.2."""
    if any(c in piece for c in _ODD):
        return True
    if piece.isascii():  # tabs, carriage returns, control characters are not printable
        if not piece.replace("\n", " ").isprintable():
            return True
    elif _UNUSUAL.search(piece):
        return True
    text = "\n" + piece  # every plain scalar now follows one of the _SCALARS' characters
    # Substring tests are many times faster than a regex that finds nothing.
    if ("|" in piece or ">" in piece) and _empty_block_scalar(piece):
        return True
    flow = any(c in piece for c in "[]{}")
    if flow and _FLOW_ODD.search(piece):
        return True
    return any(rx.search(text) for needs_flow, rx in _SCALARS if flow or not needs_flow)


def _empty_block_scalar(piece: str) -> bool:
    """Whether a block scalar has no content line (YAML 1.2 loaders read it as a line break).

    Conservative: a header followed by a blank line, the end, or a line indented no deeper.
    """
    for header in _BLOCK_HEADER.finditer(piece):
        line = piece.rfind("\n", 0, header.start()) + 1
        indent = _SPACES.match(piece, line).end() - line  # type: ignore[union-attr]
        below = header.end() + 1  # the next line: header.end() is at the header's line break
        content = _SPACES.match(piece, below).end()  # type: ignore[union-attr]
        if content >= len(piece) or piece[content] == "\n" or content - below <= indent:
            return True
    return False


def load(piece: Piece) -> tuple[bool, Any]:
    """``(True, data)`` read by ``yaml-rs``, or ``(False, None)``: the exact reader must read it.

    The data is as ``yaml-rs`` built it: :func:`.kubejson.wire` (with ``string_keys``) turns it
    into kubectl's JSON.
    """
    if not piece.fast or yaml_rs is None:
        return False, None
    try:
        data = yaml_rs.loads(
            piece.text,
            parse_datetime=False,
            duplicate_key_policy=yaml_rs.DuplicateKeyPolicy.LastWins,
        )
    except Exception:  # the exact reader reads it again, and explains what is wrong
        return False, None
    return True, data
