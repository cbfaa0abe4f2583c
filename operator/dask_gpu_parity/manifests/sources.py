"""Reading inputs: files and stdin; size-capped, UTF-8, with YAML's line numbering.

Every read is bounded: at most :data:`MAX_BYTES` are read from a file, a device or stdin,
whatever size the file claims. A file that cannot be read is a :class:`FileError`, which the CLI
reports as a finding of its own while it goes on with the other files.
"""

from __future__ import annotations

import functools
import io
import itertools
import os
import re
import stat
import sys
from dataclasses import dataclass
from typing import BinaryIO

__all__ = [
    "BREAK",
    "BREAKS",
    "INVALID",
    "MAX_BYTES",
    "UNREADABLE",
    "FileError",
    "InputError",
    "Source",
    "read_source",
]

MAX_BYTES = 64 * 2**20
UNREADABLE, INVALID = "DGP900", "DGP901"  # the finding codes of FileError (docs/findings.md)
# The line breaks of YAML 1.1 (str.splitlines also splits on form feeds and more).
BREAKS = "\\r\\n\\x85\\u2028\\u2029"  # as a regex class body
BREAK = re.compile(rf"\r\n|[{BREAKS}]")
_NOT_YAML_BREAK = re.compile("[\v\f\x1c-\x1e]")  # line breaks to str.splitlines only
_ONE_CHAR_BREAK = re.compile("\r(?!\n)|[\x85\u2028\u2029]")  # YAML line breaks other than \n
_CHUNK = 2**20


class InputError(Exception):
    """A usage error (exit 2): the message is one line a user can act on."""


class FileError(InputError):
    """One input that cannot be checked: a finding (``code``) about ``file``; the others go on.

    Raised where a file is an argument of its own (``--policy``), it is a usage error like any
    other, and its message names the file and line.
    """

    def __init__(
        self, file: str, message: str, *, code: str = UNREADABLE, line: int = 0, column: int = 0
    ):
        self.file, self.detail, self.code, self.line = file, message, code, line
        where = file + (f":{line}" if line else "") + (f":{column}" if line and column else "")
        super().__init__(f"{where}: {message}")


@dataclass(frozen=True)
class Source:
    """One input: a file (``name`` is its path) or stdin (``name`` is ``-``).

    ``label`` is the name stdin is reported under (``--stdin-filename``); ``bom``: whether the
    bytes began with a UTF-8 byte order mark (not part of ``text``; ``fix`` writes it back).
    """

    name: str
    text: str
    label: str = ""
    bom: bool = False

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

    @functools.cached_property
    def walk_text(self) -> str:
        r"""The text with every one-character line break as ``\n``, for the line walk of locate.

        The offsets are the same; a file with CR line ends then has its many lines there too.
        """
        text = self.text
        if "\r" not in text and text.isascii():
            return text
        return _ONE_CHAR_BREAK.sub("\n", text)

    @property
    def display(self) -> str:
        """The name shown in reports."""
        return self.label or ("<stdin>" if self.name == "-" else self.name)

    @property
    def is_json(self) -> bool:
        """Whether the input is a ``.json`` file (any case), so ``fix`` writes JSON back."""
        return self.display.lower().endswith(".json")


def read_source(
    name: str, *, label: str = "", stdin: BinaryIO | None = None, regular_only: bool = False
) -> Source:
    """Read one file, or stdin for ``-``, at most :data:`MAX_BYTES` of it.

    With ``regular_only`` (what ``fix --in-place`` can rewrite), a FIFO, a device or a socket
    is refused before a byte is read: reading a FIFO would wait for a writer.

    Raises:
        FileError: the input cannot be read, is too large, binary or not UTF-8.
    """
    shown = label or ("<stdin>" if name == "-" else name)
    try:
        if name == "-":
            raw = _bounded(stdin or sys.stdin.buffer, shown)
        else:
            with _open(name, shown, regular_only) as handle:
                raw = _bounded(handle, shown)
    except OSError as exc:
        raise FileError(shown, f"cannot read: {exc.strerror or exc}") from exc
    return Source(name, _decode(raw, shown), label, raw.startswith(_BOM))


_BOM = b"\xef\xbb\xbf"
_KINDS = (
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def _open(name: str, shown: str, regular_only: bool) -> BinaryIO:
    if not regular_only:
        return open(name, "rb")
    # O_NONBLOCK: opening a FIFO does not wait for a writer (regular files ignore it).
    fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        kind = next((k for test, k in _KINDS if test(mode)), "a special file")
        raise FileError(
            shown,
            f"{kind}, not a regular file: fix --in-place rewrites regular files only; "
            "fix it to stdout instead",
        )
    os.set_blocking(fd, True)
    return os.fdopen(fd, "rb")


def _bounded(handle: BinaryIO | io.BufferedIOBase, shown: str) -> bytes:
    """At most MAX_BYTES of a stream; more is an error, whatever the file's size says."""
    parts: list[bytes] = []
    total = 0
    while chunk := handle.read(min(_CHUNK, MAX_BYTES + 1 - total)):
        parts.append(chunk)
        total += len(chunk)
        if total > MAX_BYTES:
            raise FileError(shown, f"larger than {MAX_BYTES // 2**20} MiB: split it")
    return b"".join(parts)


def _decode(raw: bytes, name: str) -> str:
    if b"\x00" in raw:
        raise FileError(name, "binary data, not YAML or JSON text")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise FileError(
            name, f"not UTF-8 text (byte {exc.start}): YAML and JSON manifests must be UTF-8"
        ) from exc
