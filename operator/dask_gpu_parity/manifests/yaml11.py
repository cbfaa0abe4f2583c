"""YAML read as the API server reads it (YAML 1.1), fast where that is safe.

PyYAML's libyaml loader implements YAML 1.1, like the API server's decoder, but builds every
node in Python: it alone caps ``check`` at about 1,200 documents a second. ``yaml-rs`` (Rust)
reads YAML 1.2 several times faster. The two read some plain scalars differently (``yes``/
``on``/``off``, ``0755``, ``1e3``, ``+.5``, ``_1``, ``1:30``, dates, ``=``, ``<<``), and some
rarer syntax (empty block scalars, indicators opening a flow scalar, empty keys); tags,
anchors, escapes, tabs and line breaks other than LF are left to PyYAML as well. So the text
is cut into documents at their ``---`` markers (YAML forbids them inside any scalar), and a
document goes to ``yaml-rs`` only when the patterns below find none of those anywhere in its
text — keys, values, comments and quoted strings alike, so a false alarm only costs speed.
Every other document, and any document ``yaml-rs`` refuses, is read by PyYAML, whose values,
lines and error messages are the reference. The unit tests hold both paths to the same result.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from typing import Any

yaml_rs: Any
try:
    import yaml_rs
except ImportError:  # pragma: no cover - no wheel for this platform: PyYAML reads everything
    yaml_rs = None

__all__ = ["Piece", "load", "split"]

# What PyYAML (YAML 1.1) reads differently from a YAML 1.2 loader, or refuses. A plain scalar
# starts after a line's indentation, ``: ``, ``- ``, a flow indicator, or (JSON style) a
# quoted key's colon; a piece starts at a line start, so its search starts at the line break
# before it. One search per starting character: a literal first character lets the regex
# engine skip ahead quickly, where one alternation of them all is ten times slower.
_END = r"(?:[ ]*(?:$|,|\]|\}|:(?:[ \r\n]|$))|[ ]+\#)"
_SAFE_NUMBER = (  # the same int, float or string in both
    r"[-+]?(?:0|[1-9][0-9]{0,17})(?:\.[0-9]+)?"  # 8786, -1, 0.5, 25.06
    r"|(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[KMGTPE]i|[numkMGTP])"  # quantities: 16Gi, 500m, 2k
)
_SCALAR = (
    r"(?=[yYnNoO=<?:+._0-9-])"  # a quick refusal for every other first character
    rf"(?:(?:[yY]es|YES|[nN]o|NO|[oO]n|ON|[oO]ff|OFF|=|<<)(?={_END})"  # YAML 1.1 words
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
# Directives and document ends; markers. Searched from a line break (a literal first character).
_WHOLE = re.compile(r"\n(?:%|\.\.\.(?:[ \r\n]|$))")
_MARKER = re.compile(r"\n---(?=[ \r\n]|$)")
_CONTENT = re.compile(r"^(?!---(?:[ \r\n]|$))[ ]*[^\s#]|^---[ ]+[^\s#]", re.MULTILINE)


@dataclass(frozen=True, slots=True)
class Piece:
    """One document's text and where it starts."""

    text: str
    line: int  # the line (from 0) of the text's first character
    first: int  # the line (from 1) of the document's content: PyYAML's node start
    end: int  # the last line (from 1) of the text
    fast: bool  # nothing in it that YAML 1.1 and 1.2 read differently


def split(text: str) -> list[Piece] | None:
    """The documents of a YAML stream, in order; ``None`` when only PyYAML may cut it.

    A stream with directives, ``...`` document ends or line breaks other than LF and CRLF
    (PyYAML counts them in its line numbers), or a platform without ``yaml-rs``, is left
    whole to PyYAML.
    """
    if (
        yaml_rs is None
        or any(c in text for c in "\x85\u2028\u2029")  # line breaks in YAML 1.1 only
        or text.count("\r") != text.count("\r\n")  # a lone carriage return: a line break
        or _WHOLE.search("\n" + text[:4])
        or _WHOLE.search(text)
    ):
        return None
    bounds = [0, *(m.start() + 1 for m in _MARKER.finditer(text)), len(text)]
    pieces: list[Piece] = []
    line = 0
    for start, stop in itertools.pairwise(bounds):
        piece = text[start:stop]
        lines = piece.count("\n")
        content = _CONTENT.search(piece)
        if content is None:
            if start or piece.startswith("---"):  # an explicit, empty document
                pieces.append(Piece(piece, line, line + 1, line + lines, False))
        else:
            first = line + piece.count("\n", 0, content.start()) + 1
            end = line + lines + (0 if piece.endswith("\n") else 1)
            fast = piece[content.end() - 1] not in "[{" and not _risky(piece)
            pieces.append(Piece(piece, line, first, end, fast))
        line += lines
    return pieces


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
    """``(True, data)`` read by ``yaml-rs``, or ``(False, None)``: PyYAML must read it."""
    if not piece.fast or yaml_rs is None:
        return False, None
    try:
        return True, yaml_rs.loads(
            piece.text,
            parse_datetime=False,
            duplicate_key_policy=yaml_rs.DuplicateKeyPolicy.LastWins,
        )
    except Exception:  # PyYAML reads it again, and explains what is wrong
        return False, None
