"""Writing fixes: the engine's JSON Patch replayed onto the documents that changed.

Only changed documents are re-serialised (ruamel.yaml round trip, ``roundtrip``), so comments,
key order, line endings, every value the patch does not set and every other document stay byte
for byte; an edit through a YAML alias lands in its own place only. ``inplace`` writes the
result back into the file.
"""

from __future__ import annotations

import io
import itertools
import json
import re
from typing import Any

import yaml
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import YAMLError as RoundTripError
from ruamel.yaml.scalarstring import LiteralScalarString

from dask_gpu_parity.core.patch import Operation, apply_in_place

from .inplace import Signalled, signals_raise, write_in_place
from .kubeyaml import Loader
from .roundtrip import keep_anchors, round_trip, unshare
from .sources import BREAK, BREAKS, INVALID, FileError, Source

__all__ = ["Signalled", "render_fixed", "signals_raise", "write_in_place"]


def _document_starts(source: Source) -> list[int]:
    """The first line (from 0) of each document's text chunk."""
    starts: list[int] = []
    for event in yaml.parse(source.text, Loader=Loader):
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
    for items in patches.values():
        for prefix, ops in items:
            for op in ops:
                _refuse_non_json(source, prefix + op["path"], op.get("value"))
    try:
        text = _render_json(source, patches) if source.is_json else _render_yaml(source, patches)
    except (RoundTripError, yaml.YAMLError, ValueError, TypeError, RecursionError) as exc:
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise FileError(source.display, f"cannot rewrite it: {problem}", code=INVALID) from exc
    crlf = source.text.count("\r\n")
    if crlf and crlf == source.text.count("\n"):  # keep the file's CRLF line endings
        text = text.replace("\r\n", "\n").replace("\n", "\r\n")
    elif "\r" in source.text and "\n" not in source.text:  # and CR-only ones
        text = text.replace("\n", "\r")
    return text


def _render_yaml(source: Source, patches: dict[int, list[tuple[str, list[Operation]]]]) -> str:
    lines = _LINE.findall(source.text)
    starts = [*_document_starts(source), len(lines)]
    out: list[str] = []
    for index in range(len(starts) - 1):
        chunk = "".join(lines[starts[index] : starts[index + 1]])
        items = [(p, ops) for p, ops in patches.get(index, []) if ops]
        out.append(_patch_chunk(chunk, items) if items else chunk)
    return "".join(out)


def _render_json(source: Source, patches: dict[int, list[tuple[str, list[Operation]]]]) -> str:
    try:  # NaN and Infinity are no JSON (Python's reader takes them; check read them as YAML)
        data = json.loads(source.text, parse_constant=_no_constant)
    except ValueError:  # a .json file that holds YAML: check read it as YAML
        return _render_yaml(source, patches)
    for prefix, ops in patches.get(0, []):
        apply_in_place(data, _prefixed(prefix, ops))
    return json.dumps(data, indent=2, ensure_ascii=False, allow_nan=False) + "\n"


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


_LINE = re.compile(rf"[^{BREAKS}]*(?:{BREAK.pattern})|[^{BREAKS}]+$")  # lines as YAML counts them
_HEADER = re.compile(r"^(?:\s*(?:#.*)?|---\s*|%.*)$")


def _patch_chunk(chunk: str, items: list[tuple[str, list[Operation]]]) -> str:
    """Apply patches to one document's text, keeping its leading comments and ``---`` as is."""
    lines = _LINE.findall(chunk)
    head = 0
    while head < len(lines) and _HEADER.match(lines[head].rstrip("\n")):
        head += 1
    preamble, body = "".join(lines[:head]), "".join(lines[head:])
    rt = round_trip()
    rt.preserve_quotes = True
    rt.width = 2**30  # never fold a line: a long plain scalar stays on its line, as written
    rt.brace_single_entry_mapping_in_flow_sequence = True  # [{a: b}], not the terse [a: b]
    mapping, sequence, offset = _indentation(body)
    rt.indent(mapping=mapping, sequence=sequence, offset=offset)
    try:
        data = rt.load(body)
    except (RoundTripError, RecursionError):
        raise
    except Exception as exc:  # ruamel.yaml itself failing on odd input (the int-like key ``-_``)
        problem = f"the round-trip YAML reader failed on it ({type(exc).__name__}: {exc})"
        raise RoundTripError(problem) from exc
    keep_anchors(data)
    for prefix, ops in items:
        prefixed = _prefixed(prefix, [_literal(op) for op in ops])
        unshare(data, prefixed)
        apply_in_place(data, prefixed)
    stream = io.StringIO()
    rt.dump(data, stream)
    return preamble + stream.getvalue()


def _refuse_non_json(source: Source, path: str, value: Any) -> None:
    """A FileError if ``value`` holds what no JSON, so no Kubernetes object, can hold.

    YAML reads ``{{ .Values.image }}``, an unrendered Helm value, as a mapping whose key is a
    mapping; a rule copying it would write it into another place.
    """
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            bad = [k for k in item if not isinstance(k, str | int | float | bool | None)]
            if bad:
                kind = "a mapping" if isinstance(bad[0], frozenset | dict) else "a sequence"
                _unfixable(source, f"{path} would get {kind} as a key")
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif not isinstance(item, str | int | float | bool | None):
            _unfixable(source, f"{path} would get a value of type {type(item).__name__}")


def _unfixable(source: Source, what: str) -> None:
    hint = (
        " (an unrendered template such as {{ .Values.image }}?): render or correct the manifest"
        if "{{" in source.text
        else ": correct the manifest"
    )
    message = f"cannot rewrite it: {what}, which no Kubernetes object has{hint}, then fix it"
    raise FileError(source.display, message, code=INVALID)


def _prefixed(prefix: str, ops: list[Operation]) -> list[Operation]:
    return [{**op, "path": prefix + op["path"]} for op in ops]


def _literal(op: Operation) -> Operation:
    """Lay out a new value for review: short collections on one line, long strings as blocks.

    Multi-line strings (an inline probe) become ``|`` blocks. Collections nested in the value,
    at most ``_FLOW_DEPTH`` levels deep and about ``_FLOW_WIDTH`` characters long in flow style,
    take flow style: an injected init container then reads as one line per field
    (``command: [cp, …]``, ``resources: {limits: …}``) instead of one per word. The value itself
    stays in block style, like the user's YAML around it.
    """

    def convert(value: Any, nested: bool) -> Any:
        if isinstance(value, str) and "\n" in value:
            return LiteralScalarString(value)
        if isinstance(value, dict):
            node: Any = CommentedMap((k, convert(v, True)) for k, v in value.items())
        elif isinstance(value, list):
            node = CommentedSeq(convert(v, True) for v in value)
        else:
            return value
        if nested and _depth(value) <= _FLOW_DEPTH and _flow_width(value) <= _FLOW_WIDTH:
            node.fa.set_flow_style()
        return node

    return {**op, "value": convert(op["value"], False)} if "value" in op else op


_FLOW_WIDTH, _FLOW_DEPTH = 176, 3


def _depth(value: Any) -> int:
    """How deep collections nest in ``value`` (a scalar is 0, ``{drop: [ALL]}`` is 2)."""
    if isinstance(value, dict):
        return 1 + max(map(_depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(_depth, value), default=0)
    return 0


_PLAIN = re.compile(r"^[A-Za-z0-9/_.=+-][A-Za-z0-9/_.=+ :-]*$")


def _flow_width(value: Any) -> int:
    """About how many characters ``value`` takes in flow style (quotes counted where likely)."""
    if isinstance(value, dict):
        return 2 + sum(_flow_width(k) + 2 + _flow_width(v) + 2 for k, v in value.items())
    if isinstance(value, list):
        return 2 + sum(_flow_width(v) + 2 for v in value)
    if isinstance(value, LiteralScalarString) or (isinstance(value, str) and "\n" in value):
        return _FLOW_WIDTH + 1  # a block scalar cannot be inside a flow collection
    text = json.dumps(value) if not isinstance(value, str) else value
    return len(text) + (0 if isinstance(value, str) and _PLAIN.match(value) else 2)


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
