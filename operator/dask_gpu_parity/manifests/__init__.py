"""Manifests in and out: find, read, parse, locate findings' lines, rewrite fixes, report.

The file-facing adapter of the CLI: YAML and JSON files, folders and stdin come in; reports
and comment-preserving fixes go out. The decisions themselves are ``core``'s.
"""

from .discover import DEFAULT_EXCLUDES, STDIN, Selection, discover
from .documents import Document, parse
from .locate import locate
from .rewrite import render_fixed, write_in_place
from .sources import FileError, InputError, Source, read_source

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
