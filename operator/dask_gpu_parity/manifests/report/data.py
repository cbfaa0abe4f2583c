"""Findings as data: our JSON, and GitLab's Code Quality report (a Code Climate subset)."""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from typing import Any

from dask_gpu_parity.core.findings import Severity

from .model import Located, fingerprints, printable, relative_path

__all__ = ["dumps", "gitlab", "json_report"]


def dumps(value: Any, **options: Any) -> str:
    r"""JSON with non-ASCII text as is, unless it holds lone surrogates (then ``\udXXX``).

    A lone surrogate (from a YAML ``"\ud800"`` escape or a file name that is not UTF-8) cannot
    be encoded as UTF-8; escaped, the report stays valid JSON and loses nothing.
    """
    text = json.dumps(value, ensure_ascii=False, **options)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(value, ensure_ascii=True, **options)
    return text


def json_report(items: Sequence[Located], counts: dict[str, int]) -> str:
    """``{"findings": [...], "summary": {...}}``, one finding per line."""
    findings = [
        {
            "code": i.finding.code,
            "severity": str(i.finding.severity),
            "message": i.finding.message,
            "path": i.finding.path,
            "fixable": i.finding.fixable,
            "resource": {
                "kind": i.kind,
                "name": i.name,
                "namespace": i.namespace,
                "file": i.file,
                "document": i.document,
                "line": i.line,
            },
        }
        for i in items
    ]
    # One finding per line: readable, diffable, and written by json's C encoder (``indent``
    # falls back to its pure-Python one, which took as long as checking the documents).
    # A quote inside a string is escaped, so '}, {"code": ' only ever separates two findings.
    rows = dumps(findings)[1:-1].replace('}, {"code": ', '},\n    {"code": ')
    body = f"[\n    {rows}\n  ]" if rows else "[]"
    return f'{{\n  "findings": {body},\n  "summary": {json.dumps(counts)}\n}}\n'


# GitLab's scale is info, minor, major, critical, blocker: an error blocks nothing by itself.
_GITLAB_SEVERITY = {Severity.ERROR: "major", Severity.WARNING: "minor", Severity.INFO: "info"}


def gitlab(items: Sequence[Located], counts: dict[str, int]) -> str:
    """GitLab Code Quality (``artifacts:reports:codequality``): a JSON array of issues.

    The fields GitLab reads: ``description``, ``check_name``, ``fingerprint`` (unique),
    ``severity`` and ``location.path`` (relative to the repository) with ``lines.begin``.
    """
    cwd = os.getcwd()
    issues = [
        {
            "type": "issue",
            "description": printable(f"{i.finding.code} {i.subject}{i.finding.message}"),
            "check_name": f"dask-gpu-parity/{i.finding.code}",
            "categories": ["Bug Risk"],
            "fingerprint": fingerprint,
            "severity": _GITLAB_SEVERITY[i.finding.severity],
            "location": {
                "path": (relative_path(i.path, cwd) if i.path else None) or i.path or i.file,
                "lines": {"begin": max(i.line, 1)},
            },
        }
        for i, fingerprint in zip(items, fingerprints(items), strict=True)
    ]
    return dumps(issues, indent=2) + "\n"
