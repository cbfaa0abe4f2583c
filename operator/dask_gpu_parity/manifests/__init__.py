"""Manifests in and out: read, parse, locate findings' lines, rewrite fixes, report.

The file-facing adapter of the CLI: YAML and JSON files, folders and stdin come in; reports
and comment-preserving fixes go out. The decisions themselves are ``core``'s.
"""

from .documents import Document, parse
from .locate import locate
from .rewrite import render_fixed, write_in_place
from .sources import InputError, Source, read

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
