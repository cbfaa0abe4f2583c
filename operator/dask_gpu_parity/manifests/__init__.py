"""Manifests in and out: find, read, parse, locate findings' lines, rewrite fixes, report.

The file-facing adapter of the CLI: YAML and JSON files, folders and stdin come in; reports
and comment-preserving fixes go out. The decisions themselves are ``core``'s.
"""

from typing import TYPE_CHECKING, Any

from .discover import DEFAULT_EXCLUDES, STDIN, Selection, discover
from .documents import Document, parse
from .locate import locate
from .sources import FileError, InputError, Source, read_source

if TYPE_CHECKING:
    from .rewrite import render_fixed, write_in_place

__all__ = [
    "DEFAULT_EXCLUDES",
    "STDIN",
    "Document",
    "FileError",
    "InputError",
    "Selection",
    "Source",
    "discover",
    "locate",
    "parse",
    "read_source",
    "render_fixed",
    "write_in_place",
]


def __getattr__(name: str) -> Any:
    """The rewriting half, imported when first asked for: ``check`` never loads ruamel.yaml."""
    if name in ("render_fixed", "write_in_place"):
        from . import rewrite  # noqa: PLC0415 - deferred on purpose (start-up of `check`)

        return getattr(rewrite, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
