"""Reading inputs: files, folders, stdin; size-capped, UTF-8, with YAML's line numbering."""

from __future__ import annotations

import functools
import io
import itertools
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["BREAK", "BREAKS", "MAX_BYTES", "InputError", "Source", "read"]

_SUFFIXES = (".yaml", ".yml", ".json")
MAX_BYTES = 64 * 2**20
# The line breaks of YAML 1.1 (str.splitlines also splits on form feeds and more).
BREAKS = "\\r\\n\\x85\\u2028\\u2029"  # as a regex class body
BREAK = re.compile(rf"\r\n|[{BREAKS}]")
_NOT_YAML_BREAK = re.compile("[\v\f\x1c-\x1e]")  # line breaks to str.splitlines only


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
            return [0, *(m.end() for m in BREAK.finditer(text))]
        lines = text.splitlines(keepends=True)
        starts = [0, *itertools.accumulate(map(len, lines))]
        if lines and not lines[-1].endswith(("\n", "\r")):
            starts.pop()  # the text's end is no line start
        return starts

    @property
    def display(self) -> str:
        """The name shown in reports."""
        return "<stdin>" if self.name == "-" else self.name


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
