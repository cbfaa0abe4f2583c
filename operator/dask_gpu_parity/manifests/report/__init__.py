"""Findings as text, JSON, SARIF 2.1.0, JUnit XML, GitHub workflow commands, GitLab Code Quality.

Every format escapes what it prints from the input (:func:`model.printable`), and every format
carries the findings about files that could not be checked (DGP900, DGP901) beside the others.
"""

from __future__ import annotations

from collections.abc import Sequence

from .data import gitlab, json_report
from .junit import junit
from .model import FILE_CODES, Located, printable, resource_label, summary
from .sarif import sarif
from .text import github, text

__all__ = ["FILE_CODES", "FORMATS", "Located", "printable", "render", "resource_label", "summary"]

FORMATS = ("text", "json", "sarif", "junit", "github", "gitlab")


def render(
    fmt: str,
    items: Sequence[Located],
    counts: dict[str, int],
    checked: Sequence[tuple[str, str]] = (),
) -> str:
    """The report in ``fmt`` (one of :data:`FORMATS`).

    Args:
        fmt: the format.
        items: the findings.
        counts: from :func:`summary`.
        checked: (file, resource) of every Dask resource checked, for JUnit's passing cases.
    """
    if fmt == "junit":
        return junit(items, checked)
    formats = {"text": text, "json": json_report, "sarif": sarif, "github": github}
    return formats.get(fmt, gitlab)(items, counts)
