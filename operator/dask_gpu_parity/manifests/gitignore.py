r"""Gitignore patterns, matched as git matches them.

A port of git's rules (``dir.c``: ``trim_trailing_spaces``, ``parse_path_pattern``,
``match_basename``, ``match_pathname``; ``wildmatch.c`` with ``WM_PATHNAME``) to byte regular
expressions, because libraries that translate gitignore to regular expressions disagree with git
on hostile lines: git accepts every line, and one that cannot match (``[``, a lone ``\\`` or
``!``, an unknown ``[[:class:]]``) simply matches nothing, while ``[z-a]`` matches ``z``.
``tests/unit/manifests/test_gitignore.py`` compares the result with ``git check-ignore``.

Paths and patterns are bytes, as git reads them: ``?`` matches one byte of a UTF-8 name.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

__all__ = ["Pattern", "Spec", "pattern_problem"]

_SPECIAL = b"*?[\\"
# POSIX classes as git's sane ctype reads them: ASCII only.
_CLASSES = {
    b"alnum": rb"0-9A-Za-z",
    b"alpha": rb"A-Za-z",
    b"blank": rb" \t",
    b"cntrl": rb"\x00-\x1f\x7f",
    b"digit": rb"0-9",
    b"graph": rb"\x21-\x7e",
    b"lower": rb"a-z",
    b"print": rb"\x20-\x7e",
    b"punct": rb"\x21-\x2f\x3a-\x40\x5b-\x60\x7b-\x7e",
    b"space": rb"\t\n\r ",
    b"upper": rb"A-Z",
    b"xdigit": rb"0-9A-Fa-f",
}


class _NeverMatchesError(Exception):
    """The pattern cannot match any path (git ignores it); the message says why."""


@dataclass(frozen=True)
class Pattern:
    """One line of a gitignore file."""

    text: bytes
    negative: bool
    dir_only: bool
    basename: bool  # no slash in the pattern: it matches a name in any folder
    regex: re.Pattern[bytes] | None  # None: the pattern matches nothing

    @classmethod
    def parse(cls, line: bytes) -> Pattern | None:
        """The pattern of one line; None for a blank line or a comment."""
        if not line or line.startswith(b"#"):
            return None
        text = _trim_trailing_spaces(line)
        negative = text.startswith(b"!")
        body = text[1:] if negative else text
        dir_only = body.endswith(b"/")
        if dir_only:
            body = body[:-1]
        basename = b"/" not in body
        try:
            regex = re.compile(_pattern_regex(body, basename=basename), re.DOTALL)
        except _NeverMatchesError:
            regex = None
        return cls(line, negative, dir_only, basename, regex)

    def matches(self, path: bytes, *, folder: bool) -> bool:
        """Whether ``path`` (relative to the pattern's folder, ``/``-separated) matches."""
        if self.regex is None or (self.dir_only and not folder):
            return False
        name = path.rpartition(b"/")[2] if self.basename else path
        return self.regex.fullmatch(name) is not None


class Spec:
    """The patterns of one gitignore file (or of the command line), in order."""

    def __init__(self, patterns: Iterable[Pattern]) -> None:
        self.patterns = tuple(reversed(list(patterns)))  # the last matching line decides

    @classmethod
    def from_bytes(cls, data: bytes) -> Spec:
        """A gitignore file's content, read as git reads it (``add_patterns_from_buffer``)."""
        data = data.removeprefix(b"\xef\xbb\xbf")
        lines = (line.removesuffix(b"\r") if line else line for line in data.split(b"\n"))
        return cls(p for p in map(Pattern.parse, (ln.split(b"\0")[0] for ln in lines)) if p)

    @classmethod
    def from_lines(cls, lines: Sequence[str]) -> Spec:
        """Patterns given one per string (the command line's ``--exclude``)."""
        found = (Pattern.parse(line.encode("utf-8", "surrogateescape")) for line in lines)
        return cls(p for p in found if p)

    def decide(self, path: bytes, *, folder: bool) -> bool | None:
        """True: ignored; False: re-included by a ``!`` line; None: no line matches."""
        for pattern in self.patterns:
            if pattern.matches(path, folder=folder):
                return not pattern.negative
        return None


def pattern_problem(line: str) -> str | None:
    """Why ``line`` as an ``--exclude`` pattern would match nothing (git ignores such lines).

    None when it is usable. A ``.gitignore`` keeps such lines, as git does; on the command line
    they are mistakes.
    """
    text = line.encode("utf-8", "surrogateescape")
    if not text.strip(b" "):
        return "it is blank"
    if text.startswith(b"#"):
        return r"a pattern that begins with # is a comment: write \# for a literal #"
    body = _trim_trailing_spaces(text).removeprefix(b"!").removesuffix(b"/")
    if not body.strip(b"/"):
        return "it names no file"
    try:
        _pattern_regex(body, basename=b"/" not in body, strict=True)
    except _NeverMatchesError as exc:
        return str(exc)
    return None


def _trim_trailing_spaces(line: bytes) -> bytes:
    """Drop trailing spaces unless a backslash quotes them (git's ``trim_trailing_spaces``)."""
    last_space = None
    i = 0
    while i < len(line):
        char = line[i]
        if char == 0x20:
            last_space = i if last_space is None else last_space
        elif char == 0x5C:
            i += 1
            if i == len(line):
                return line
            last_space = None
        else:
            last_space = None
        i += 1
    return line if last_space is None else line[:last_space]


def _pattern_regex(body: bytes, *, basename: bool, strict: bool = False) -> bytes:
    """The regular expression of a pattern without its ``!`` and trailing ``/``.

    ``match_basename`` matches the whole pattern against the name; ``match_pathname`` drops a
    leading ``/``, compares the part before the first special character literally and wildmatches
    the rest on its own (so a ``**`` right after that part counts as a leading one, as in git).
    """
    if basename:
        return _wildmatch(body, strict=strict)
    body = body.removeprefix(b"/")
    prefix = len(body)
    for special in _SPECIAL:
        found = body.find(bytes([special]))
        if found >= 0:
            prefix = min(prefix, found)
    return re.escape(body[:prefix]) + _wildmatch(body[prefix:], strict=strict)


def _wildmatch(pattern: bytes, *, strict: bool) -> bytes:
    r"""Git's ``wildmatch(pattern, WM_PATHNAME)`` as a regular expression.

    Raises:
        _NeverMatchesError: the pattern can match nothing (an unclosed ``[``, a trailing ``\\``,
            an unknown class); with ``strict``, also a reversed range, which git reads as its
            first character only.
    """
    out: list[bytes] = []
    i, n = 0, len(pattern)
    while i < n:
        char = pattern[i : i + 1]
        if char == b"?":
            out.append(b"[^/]")
            i += 1
        elif char == b"*":
            j = i
            while j < n and pattern[j] == 0x2A:
                j += 1
            leading = i == 0 or pattern[i - 1] == 0x2F
            rest = pattern[j:]
            if j - i >= 2 and leading and (not rest or rest.startswith((b"/", b"\\/"))):
                if rest.startswith(b"/"):
                    out.append(b"(?:.*/)?")
                    j += 1
                else:
                    out.append(b".*")
            else:
                out.append(b"[^/]*")
            i = j
        elif char == b"\\":
            if i + 1 == n:
                raise _NeverMatchesError("it ends in a lone backslash: write \\\\ for a backslash")
            out.append(re.escape(pattern[i + 1 : i + 2]))
            i += 2
        elif char == b"[":
            fragment, i = _bracket(pattern, i, strict=strict)
            out.append(fragment)
        else:
            out.append(re.escape(char))
            i += 1
    return b"".join(out)


def _bracket(pattern: bytes, start: int, *, strict: bool) -> tuple[bytes, int]:  # noqa: PLR0915  # one state machine, as wildmatch.c's
    """A ``[...]`` expression at ``start``: its regular expression and the index after it."""
    n = len(pattern)
    j = start + 1
    negated = j < n and pattern[j] in b"!^"
    j += negated
    items: list[bytes] = []
    prev = 0
    while True:
        if j >= n:
            raise _NeverMatchesError(f"the [ at position {start + 1} is never closed")
        char = pattern[j]
        current = char
        if char == 0x5C:
            j += 1
            if j >= n:
                raise _NeverMatchesError(f"the [ at position {start + 1} is never closed")
            current = pattern[j]
            items.append(b"\\x%02x" % current)
        elif char == 0x2D and prev and j + 1 < n and pattern[j + 1] != 0x5D:
            j += 1
            high = pattern[j]
            if high == 0x5C:
                j += 1
                if j >= n:
                    raise _NeverMatchesError(f"the [ at position {start + 1} is never closed")
                high = pattern[j]
            if prev <= high:
                items.append(b"\\x%02x-\\x%02x" % (prev, high))
            elif strict:
                shown = f"{chr(prev)}-{chr(high)}"
                raise _NeverMatchesError(f"the range {shown} is reversed: write it low to high")
            current = 0
        elif char == 0x5B and pattern[j + 1 : j + 2] == b":":
            close = pattern.find(b"]", j + 2)
            if close < 0:
                raise _NeverMatchesError(f"the [ at position {start + 1} is never closed")
            if close - (j + 2) - 1 < 0 or pattern[close - 1] != 0x3A:
                items.append(b"\\x5b")  # no ":]": a literal [
            else:
                name = pattern[j + 2 : close - 1]
                if name not in _CLASSES:
                    shown = name.decode(errors="replace")
                    raise _NeverMatchesError(f"[:{shown}:] is no character class")
                items.append(_CLASSES[name])
                j, current = close, 0
        else:
            items.append(b"\\x%02x" % char)
        prev = current
        j += 1
        if j < n and pattern[j] == 0x5D:
            break
    body = b"".join(items)
    if negated:
        return b"[^/" + body + b"]", j + 1
    return (b"(?!/)[" + body + b"]" if body else b"(?!)"), j + 1
