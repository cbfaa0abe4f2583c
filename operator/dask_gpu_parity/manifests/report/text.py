"""Findings for people and for GitHub's log: the text format and workflow commands."""

from __future__ import annotations

from collections.abc import Sequence

from dask_gpu_parity.core.findings import Severity

from .model import Located, printable

__all__ = ["github", "text"]


def text(items: Sequence[Located], counts: dict[str, int]) -> str:
    """``file:line: severity CODE Kind ns/name /json/pointer: message``, then the counts."""
    lines = [
        printable(
            f"{i.file}{f':{i.line}' if i.line else ''}: {i.finding.severity} {i.finding.code} "
            f"{i.subject}"
            f"{i.finding.message}{' [fixable]' if i.finding.fixable else ''}"
        )
        for i in items
    ]
    tail = (
        f"{counts['errors']} error(s), {counts['warnings']} warning(s) in "
        f"{counts['resources']} Dask resource(s) of {counts['documents']} document(s)"
    )
    if counts["unchecked_files"]:
        tail += f"; {counts['unchecked_files']} file(s) could not be checked"
    if counts["fixable"]:
        tail += f"; {counts['fixable']} fixable with `dask-gpu-parity fix`"
    return "\n".join([*lines, tail]) + "\n"


def _escape(value: str, *, prop: bool = False) -> str:
    """GitHub's escaping of workflow command data (and properties), after :func:`printable`."""
    value = printable(value).replace("%", "%25")
    return value.replace(":", "%3A").replace(",", "%2C") if prop else value


def github(items: Sequence[Located], counts: dict[str, int]) -> str:
    """``::error file=…,line=…,title=…::message`` lines that annotate a workflow run."""
    level = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "notice"}
    lines = []
    for i in items:
        where = f"file={_escape(i.path or i.file, prop=True)}"
        if i.line:
            where += f",line={i.line}"
        title = _escape(i.finding.code + " " + i.finding.rule.title, prop=True)
        message = _escape(i.subject + i.finding.message)
        lines.append(f"::{level[i.finding.severity]} {where},title={title}::{message}")
    return "\n".join(lines) + ("\n" if lines else "")
