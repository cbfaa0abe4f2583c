"""Manifests in and out: files, folders, stdin, multi-document YAML, comment-preserving fixes.

Reading uses PyYAML's libyaml loader when present (fast, and it gives each document's line).
Writing a fix replays the engine's JSON Patch onto a ruamel.yaml round-trip copy of only the
documents that changed, so comments, key order and every other document stay byte-for-byte.
"""

from __future__ import annotations

import bisect
import functools
import io
import itertools
import json
import os
import re
import sys
import tempfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from ruamel.yaml import YAML
from ruamel.yaml.scalarstring import LiteralScalarString

from . import yaml11
from .patch import Operation, apply_in_place, unescape

__all__ = [
    "Document",
    "InputError",
    "Source",
    "locate",
    "parse",
    "read",
    "render_fixed",
    "write_in_place",
]

_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_SUFFIXES = (".yaml", ".yml", ".json")
MAX_EXPANDED_NODES = 1_000_000
MAX_BYTES = 64 * 2**20


class InputError(Exception):
    """Input that cannot be read: the message is one line a user can act on."""


@dataclass(frozen=True)
class Source:
    """One input: a file (``name`` is its path) or stdin (``name`` is ``-``)."""

    name: str
    text: str

    @functools.cached_property
    def line_starts(self) -> list[int]:
        """The offset of each line's first character (line breaks as YAML counts them)."""
        text = self.text
        if _NOT_YAML_BREAK.search(text):  # str.splitlines would split there too
            return [0, *(m.end() for m in _BREAK.finditer(text))]
        lines = text.splitlines(keepends=True)
        starts = [0, *itertools.accumulate(map(len, lines))]
        if lines and not lines[-1].endswith(("\n", "\r")):
            starts.pop()  # the text's end is no line start
        return starts

    @property
    def display(self) -> str:
        """The name shown in reports."""
        return "<stdin>" if self.name == "-" else self.name


@dataclass
class Document:
    """One object of a source: a YAML document, or an item of a ``kind: List`` document."""

    source: Source
    index: int  # document number in the source, from 0
    line: int  # first line of the document, from 1
    data: Any
    end: int = 0  # last line (from 1) of the document
    prefix: str = ""  # JSON Pointer of the object inside the document (List items)
    # locate(): JSON Pointer -> (line, scope), shared by the findings of one document
    located: dict[str, tuple[int, _Scope | None]] = field(
        default_factory=dict, repr=False, compare=False
    )


def read(paths: Sequence[str], stdin: io.BufferedIOBase | None = None) -> list[Source]:
    """Read files, folders (recursively: ``*.yaml``, ``*.yml``, ``*.json``) and ``-`` (stdin)."""
    sources: list[Source] = []
    for name in paths:
        if name == "-":
            raw = (stdin or sys.stdin.buffer).read()
            sources.append(Source("-", _decode(raw, "<stdin>")))
            continue
        path = Path(name)
        if path.is_dir():
            files = sorted(p for p in path.rglob("*") if p.suffix in _SUFFIXES and p.is_file())
            sources.extend(_read_file(p) for p in files)
        elif path.exists():
            sources.append(_read_file(path))
        else:
            raise InputError(f"{name}: no such file or directory")
    return sources


def _read_file(path: Path) -> Source:
    try:
        if path.stat().st_size > MAX_BYTES:
            raise InputError(f"{path}: larger than {MAX_BYTES // 2**20} MiB; split it")
        raw = path.read_bytes()
    except OSError as exc:
        raise InputError(f"{path}: cannot read: {exc.strerror}") from exc
    return Source(str(path), _decode(raw, str(path)))


def _decode(raw: bytes, name: str) -> str:
    if b"\x00" in raw:
        raise InputError(f"{name}: binary data, not YAML or JSON text")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(
            f"{name}: not UTF-8 text (byte {exc.start}): YAML and JSON manifests must be UTF-8"
        ) from exc


def parse(source: Source) -> list[Document]:
    """The objects of a source, in order; empty documents are left out.

    Raises:
        InputError: invalid YAML, a YAML bomb, or a document that is not an object.
    """
    pieces = yaml11.split(source.text)
    if pieces is None:
        return _parse_exact(source, source.text, 0)
    documents: list[Document] = []
    for index, piece in enumerate(pieces):
        fast, data = yaml11.load(piece)
        if fast:
            documents.extend(_objects(source, index, piece.first, piece.end, data))
        else:  # padded, so PyYAML's marks are the source's line numbers
            documents.extend(_parse_exact(source, "\n" * piece.line + piece.text, index))
    return documents


def _parse_exact(source: Source, text: str, first_index: int) -> list[Document]:
    """The objects of ``text`` (all or part of the source) read by PyYAML."""
    documents: list[Document] = []
    loader = _Loader(text)
    anchors = "&" in text  # no anchor, no alias: skip the bomb check
    try:
        index = first_index
        while loader.check_node():
            node = loader.get_node()
            line = node.start_mark.line + 1 if node is not None else 0
            if node is not None:
                if anchors:
                    _refuse_bombs(node, source, line)
                data = loader.construct_document(node)
                mark = node.end_mark  # at column 0 it is the next document's first line
                end = mark.line + (1 if mark.column else 0)
                documents.extend(_objects(source, index, line, end, data))
            index += 1
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = source.display
        if mark is not None:
            where = f"{where}:{mark.line + 1}:{mark.column + 1}"
        raise InputError(f"{where}: invalid YAML: {exc.problem or exc.context}") from exc
    except yaml.YAMLError as exc:
        raise InputError(f"{source.display}: invalid YAML: {exc}") from exc
    except RecursionError as exc:
        raise InputError(f"{source.display}: YAML nested too deeply") from exc
    finally:
        loader.dispose()
    return documents


def _objects(source: Source, index: int, line: int, end: int, data: Any) -> Iterator[Document]:
    if data is None:
        return
    if not isinstance(data, dict):
        kind = "a list" if isinstance(data, list) else f"a {type(data).__name__}"
        raise InputError(
            f"{source.display}:{line}: document {index + 1} is {kind}, not a Kubernetes object"
        )
    if data.get("kind") == "List" and isinstance(data.get("items"), list):
        for i, item in enumerate(data["items"]):
            if isinstance(item, dict):
                yield Document(source, index, line, item, end, f"/items/{i}")
        return
    yield Document(source, index, line, data, end)


def _refuse_bombs(root: Any, source: Source, line: int) -> None:
    """Refuse documents whose aliases expand to more than MAX_EXPANDED_NODES nodes."""
    sizes: dict[int, int] = {}

    def size(node: Any) -> int:
        key = id(node)
        if key in sizes:
            return sizes[key]
        sizes[key] = 1  # cycles count once
        total = 1
        if isinstance(node, yaml.MappingNode):
            total += sum(size(k) + size(v) for k, v in node.value)
        elif isinstance(node, yaml.SequenceNode):
            total += sum(size(v) for v in node.value)
        sizes[key] = total
        return total

    if size(root) > MAX_EXPANDED_NODES:
        raise InputError(
            f"{source.display}:{line}: YAML aliases expand to more than {MAX_EXPANDED_NODES:,} "
            "nodes (a YAML bomb?): refusing to read it"
        )


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
    text = document.source.text
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


# A walk's scope: the text offsets a mapping or sequence spans. The first may be mid-line
# (a list item's first key follows its dash); the others start at line starts.
_Scope = tuple[int, int]
_BREAKS = "\\r\\n\\x85\\u2028\\u2029"  # the line breaks of YAML 1.1, as a regex class body
_BREAK = re.compile(rf"\r\n|[{_BREAKS}]")
_NOT_YAML_BREAK = re.compile("[\v\f\x1c-\x1e]")  # line breaks to str.splitlines only
_BLANKS = re.compile(r"(?:[ ]*(?:#[^\r\n]*)?(?:\r\n|[\r\n]))*[ ]*")  # blank, comment lines


def _document_scope(document: Document) -> _Scope:
    starts = document.source.line_starts
    end = starts[document.end] if document.end < len(starts) else len(document.source.text)
    return starts[document.line - 1], end


def _first(text: str, scope: _Scope) -> tuple[int, int] | None:
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


def _key(text: str, scope: _Scope, key: str) -> tuple[int, _Scope | None] | None:
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


def _item(text: str, scope: _Scope, index: int) -> tuple[int, _Scope | None] | None:
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


def _document_starts(source: Source) -> list[int]:
    """The first line (from 0) of each document's text chunk."""
    starts: list[int] = []
    for event in yaml.parse(source.text, Loader=_Loader):
        if isinstance(event, yaml.DocumentStartEvent):
            mark = event.start_mark
            starts.append(0 if not starts or mark is None else mark.line)
    return starts or [0]


def render_fixed(source: Source, patches: dict[int, list[tuple[str, list[Operation]]]]) -> str:
    """The source's text with patches applied to the documents they name.

    Args:
        source: the original input.
        patches: document index -> [(object prefix, JSON Patch)]; other documents are copied
            byte for byte.
    """
    if not any(ops for items in patches.values() for _, ops in items):
        return source.text
    if source.name.endswith(".json"):
        return _render_json(source, patches)
    lines = _LINE.findall(source.text)
    starts = [*_document_starts(source), len(lines)]
    out: list[str] = []
    for index in range(len(starts) - 1):
        chunk = "".join(lines[starts[index] : starts[index + 1]])
        items = [(p, ops) for p, ops in patches.get(index, []) if ops]
        out.append(_patch_chunk(chunk, items) if items else chunk)
    return "".join(out)


def _render_json(source: Source, patches: dict[int, list[tuple[str, list[Operation]]]]) -> str:
    data = json.loads(source.text)
    for prefix, ops in patches.get(0, []):
        apply_in_place(data, _prefixed(prefix, ops))
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


# Line breaks as YAML counts them (str.splitlines also splits on form feeds and more).
_LINE = re.compile(rf"[^{_BREAKS}]*(?:{_BREAK.pattern})|[^{_BREAKS}]+$")
_HEADER = re.compile(r"^(?:\s*(?:#.*)?|---\s*|%.*)$")


def _patch_chunk(chunk: str, items: list[tuple[str, list[Operation]]]) -> str:
    """Apply patches to one document's text, keeping its leading comments and ``---`` as is."""
    lines = _LINE.findall(chunk)
    head = 0
    while head < len(lines) and _HEADER.match(lines[head].rstrip("\n")):
        head += 1
    preamble, body = "".join(lines[:head]), "".join(lines[head:])
    rt = YAML(typ="rt")
    rt.preserve_quotes = True
    rt.width = 4096
    mapping, sequence, offset = _indentation(body)
    rt.indent(mapping=mapping, sequence=sequence, offset=offset)
    data = rt.load(body)
    for prefix, ops in items:
        apply_in_place(data, _prefixed(prefix, [_literal(op) for op in ops]))
    stream = io.StringIO()
    rt.dump(data, stream)
    return preamble + stream.getvalue()


def _prefixed(prefix: str, ops: list[Operation]) -> list[Operation]:
    return [{**op, "path": prefix + op["path"]} for op in ops]


def _literal(op: Operation) -> Operation:
    """Show new multi-line strings (the probe source) as ``|`` blocks."""

    def convert(value: Any) -> Any:
        if isinstance(value, str) and "\n" in value:
            return LiteralScalarString(value)
        if isinstance(value, dict):
            return {k: convert(v) for k, v in value.items()}
        if isinstance(value, list):
            return [convert(v) for v in value]
        return value

    return {**op, "value": convert(op["value"])} if "value" in op else op


_KEY = re.compile(r"^( *)[^\s#-][^:]*:\s*(?:#.*)?$")
_DASH = re.compile(r"^( *)- ")


def _indentation(text: str) -> tuple[int, int, int]:
    """Guess (mapping, sequence, offset) indentation from the user's YAML."""
    mapping, sequence, offset = 2, 4, 2
    lines = [ln for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")]
    for before, after in itertools.pairwise(lines):
        key = _KEY.match(before)
        if not key:
            continue
        parent = len(key.group(1))
        dash = _DASH.match(after)
        if dash:
            offset = len(dash.group(1)) - parent
            sequence = offset + 2
            break
    for before, after in itertools.pairwise(lines):
        key = _KEY.match(before)
        if key and not _DASH.match(after):
            step = (len(after) - len(after.lstrip(" "))) - len(key.group(1))
            if step > 0:
                mapping = step
                break
    return mapping, max(sequence, offset + 2), max(offset, 0)


def write_in_place(path: str, text: str) -> None:
    """Replace a file atomically (a temporary file beside it, then rename), keeping its mode."""
    target = Path(path)
    mode = target.stat().st_mode & 0o7777
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
