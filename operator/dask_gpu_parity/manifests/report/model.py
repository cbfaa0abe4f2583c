"""What every report format shares: located findings, counts, escaping, fingerprints, paths."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

from dask_gpu_parity.core.findings import Finding, Severity

__all__ = [
    "FILE_CODES",
    "Located",
    "fingerprints",
    "printable",
    "relative_path",
    "resource_label",
    "summary",
]

FILE_CODES = frozenset({"DGP900", "DGP901"})  # findings about an input file, not a resource
_SHORT = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


@dataclass(frozen=True, kw_only=True)
class Located:
    """A finding with the resource and the place in the input it is about.

    ``file`` is the name shown; ``path`` the file system path that URIs are made from (the
    ``--stdin-filename`` for stdin), or ``None`` for stdin without one. A finding about a whole
    file (DGP900, DGP901) has no resource: ``kind`` is empty.
    """

    finding: Finding
    kind: str
    name: str
    namespace: str
    file: str
    document: int  # document number in the file, from 1 (0: the whole file)
    line: int  # from 1 (0: the whole file)
    path: str | None = None

    @property
    def resource(self) -> str:
        """``Kind namespace/name``, or empty for a finding about a file."""
        return resource_label(self.kind, self.namespace, self.name) if self.kind else ""

    @property
    def subject(self) -> str:
        """The resource and JSON Pointer a message is about (empty for a file)."""
        where = " ".join(p for p in (self.resource, self.finding.path) if p)
        return where + ": " if where else ""


def resource_label(kind: str, namespace: str, name: str) -> str:
    """How a resource is named in reports: ``Kind namespace/name``."""
    return f"{kind} {namespace + '/' if namespace else ''}{name or '(unnamed)'}"


def summary(items: Sequence[Located], resources: int, documents: int, files: int) -> dict[str, int]:
    """Counts for the report footer and the JSON summary."""
    return {
        "errors": sum(i.finding.severity is Severity.ERROR for i in items),
        "warnings": sum(i.finding.severity is Severity.WARNING for i in items),
        "infos": sum(i.finding.severity is Severity.INFO for i in items),
        "fixable": sum(i.finding.fixable for i in items),
        "resources": resources,
        "documents": documents,
        "files": files,
        "unchecked_files": len({i.file for i in items if i.finding.code in FILE_CODES}),
    }


def printable(text: str) -> str:
    r"""``text`` with every character that is not printable escaped as Python would (``\x1b``).

    Names and values come from the input: a newline, a terminal escape sequence or a bidi
    override in them must not forge a line or rewrite the screen of whoever reads the report.
    """
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else _SHORT.get(c) or _hex(c) for c in text)


def _hex(char: str) -> str:
    code = ord(char)
    return (
        f"\\x{code:02x}"
        if code < 0x100
        else f"\\u{code:04x}"
        if code < 0x10000
        else (f"\\U{code:08x}")
    )


def relative_path(path: str, cwd: str) -> str | None:
    """``path`` relative to ``cwd`` with ``/`` separators, or ``None`` when outside it."""
    absolute = os.path.normpath(os.path.join(cwd, path))
    rel = os.path.relpath(absolute, cwd)
    if rel == os.pardir or rel.startswith(os.pardir + os.sep) or os.path.isabs(rel):
        return None
    return rel.replace(os.sep, "/")


def fingerprints(items: Sequence[Located]) -> list[str]:
    """One stable fingerprint per finding, unique within the report.

    It hashes what identifies a finding across runs (file, code, resource, JSON Pointer,
    message) but not its line, so an edit above it does not make it new; identical findings
    get an ordinal so that code scanning and GitLab never merge two of them.
    """
    import hashlib  # noqa: PLC0415 - SARIF and GitLab only (start-up of the other formats)

    seen: dict[str, int] = {}
    out = []
    for item in items:
        parts = (item.file, item.finding.code, item.kind, item.namespace, item.name)
        key = "\0".join((*parts, item.finding.path, item.finding.message))
        digest = hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()[:32]
        seen[digest] = seen.get(digest, 0) + 1
        out.append(digest if seen[digest] == 1 else f"{digest}:{seen[digest]}")
    return out
