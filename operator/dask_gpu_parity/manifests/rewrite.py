"""Writing fixes: the engine's JSON Patch replayed onto the documents that changed.

Only changed documents are re-serialised (ruamel.yaml round trip), so comments, key order,
line endings and every other document stay byte for byte. Files are replaced as careful
formatters replace them (the README's "fix --in-place" section compares ruff and prettier):
through symlinks, keeping mode, owner and hard links, atomically where the folder allows, and
never leaving a temporary file behind on an error or a signal that can be caught.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import json
import os
import re
import signal
import tempfile
import threading
from collections.abc import Iterator
from typing import Any

import yaml
from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap, CommentedSeq
from ruamel.yaml.error import YAMLError as RoundTripError
from ruamel.yaml.scalarstring import LiteralScalarString

from dask_gpu_parity.core.patch import Operation, apply_in_place

from .documents import Loader
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
    try:
        text = _render_json(source, patches) if source.is_json else _render_yaml(source, patches)
    except (RoundTripError, yaml.YAMLError, ValueError, RecursionError) as exc:
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
    rt = YAML(typ="rt")
    rt.preserve_quotes = True
    rt.width = 4096
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
    for prefix, ops in items:
        apply_in_place(data, _prefixed(prefix, [_literal(op) for op in ops]))
    stream = io.StringIO()
    rt.dump(data, stream)
    return preamble + stream.getvalue()


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


class Signalled(BaseException):  # a signal, like KeyboardInterrupt
    """A catchable termination signal (SIGTERM, SIGHUP) raised where the program was."""

    def __init__(self, signum: int):
        super().__init__(signum)
        self.signum = signum


@contextlib.contextmanager
def signals_raise() -> Iterator[None]:
    """Turn SIGTERM and SIGHUP into :class:`Signalled` while the block runs (main thread only).

    A signal already ignored (as ``nohup`` ignores SIGHUP) is left ignored.

    So the ``except BaseException`` of :func:`write_in_place` removes its temporary file on them
    as on Ctrl-C. SIGKILL cannot be caught: the temporary file's name starts with the target's
    and ends in ``.dgp-tmp`` so that it can be found.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def handler(signum: int, _frame: Any) -> None:
        raise Signalled(signum)

    wanted = [getattr(signal, n) for n in ("SIGTERM", "SIGHUP") if hasattr(signal, n)]
    # A signal ignored by whoever started us (``nohup`` ignores SIGHUP) stays ignored.
    wanted = [sig for sig in wanted if signal.getsignal(sig) is not signal.SIG_IGN]
    previous = {sig: signal.signal(sig, handler) for sig in wanted}
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


def write_in_place(path: str, text: str) -> str:
    """Replace a file's content; return how (``replaced`` or ``overwritten``).

    A symlink is followed: its target changes, the link stays. The new content goes to a
    temporary file beside the target, which gets the target's mode and owner and is renamed over
    it (atomic: a crash leaves the old file or the new one). Where that would change the file
    beyond its content, the file is overwritten in place, as ruff format and prettier always do:
    a file with several hard links (a rename would split them), an owner that cannot be given to
    a new file, a folder that cannot be written.
    """
    target = os.path.realpath(path)
    info = os.stat(target)
    data = text.encode("utf-8")
    if info.st_nlink > 1:
        _overwrite(target, data)
        return "overwritten"
    try:
        fd, tmp = tempfile.mkstemp(
            prefix=f".{os.path.basename(target)}.", suffix=".dgp-tmp", dir=os.path.dirname(target)
        )
    except PermissionError:
        _overwrite(target, data)
        return "overwritten"
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, info.st_mode & 0o7777)
        if (info.st_uid, info.st_gid) != (os.geteuid(), os.getegid()):
            try:
                os.chown(tmp, info.st_uid, info.st_gid)
            except PermissionError:
                os.unlink(tmp)
                _overwrite(target, data)
                return "overwritten"
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise
    return "replaced"


def _overwrite(target: str, data: bytes) -> None:
    with open(target, "r+b") as handle:
        handle.write(data)
        handle.truncate()
