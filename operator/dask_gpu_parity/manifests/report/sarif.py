"""SARIF 2.1.0 for GitHub code scanning (and any SARIF viewer).

Locations are RFC 3986 URIs: a file under the current folder is a percent-encoded relative
reference with ``uriBaseId`` ``%SRCROOT%`` (``originalUriBaseIds`` holds the folder as a
``file:`` URI); any other file is an absolute ``file:`` URI; stdin without
``--stdin-filename`` has a description and no URI. ``partialFingerprints`` are unique per
result. The tests validate every output against the OASIS schema.
"""

from __future__ import annotations

import os
import urllib.parse
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dask_gpu_parity import __version__
from dask_gpu_parity.core.findings import RULES, Severity

from .data import dumps
from .model import Located, fingerprints, printable, relative_path

__all__ = ["DOCS", "SARIF_LEVEL", "SRCROOT", "sarif", "sarif_driver"]

DOCS = "https://github.com/dask-gpu-parity/dask-gpu-parity/blob/main/docs/findings.md"
SRCROOT = "%SRCROOT%"
_SCHEMA = (
    "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"
)
SARIF_LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}


def sarif_driver() -> dict[str, Any]:
    """A run's ``tool.driver``: this tool and every rule, in :data:`RULES` order.

    A result's ``ruleIndex`` is its rule's position in :data:`RULES`.
    """
    rules = [
        {
            "id": rule.code,
            "name": rule.name,
            "shortDescription": {"text": rule.title},
            "helpUri": f"{DOCS}#{rule.code.lower()}",
            "defaultConfiguration": {"level": SARIF_LEVEL[rule.severity]},
        }
        for rule in RULES.values()
    ]
    return {
        "name": "dask-gpu-parity",
        "version": __version__,
        "informationUri": DOCS,
        "rules": rules,
    }


def _artifact(path: str | None, cwd: str) -> dict[str, Any]:
    if path is None:
        return {"description": {"text": "standard input"}}
    rel = relative_path(path, cwd)
    if rel is None:
        return {"uri": Path(os.path.normpath(os.path.join(cwd, path))).as_uri()}
    # quote() of the bytes keeps names that are not UTF-8 (surrogate escapes) exact.
    return {"uri": urllib.parse.quote(os.fsencode(rel), safe="/"), "uriBaseId": SRCROOT}


def _result(item: Located, index: int, fingerprint: str, cwd: str) -> dict[str, Any]:
    location: dict[str, Any] = {"artifactLocation": _artifact(item.path, cwd)}
    if item.line >= 1:
        location["region"] = {"startLine": item.line}
    return {
        "ruleId": item.finding.code,
        "ruleIndex": index,
        "level": SARIF_LEVEL[item.finding.severity],
        "message": {"text": printable(item.subject + item.finding.message)},
        "locations": [{"physicalLocation": location}],
        "partialFingerprints": {"dgp/v2": fingerprint},
    }


def sarif(items: Sequence[Located], counts: dict[str, int]) -> str:
    """A SARIF log with one run: every rule, and a result per finding."""
    cwd = os.getcwd()
    codes = {code: n for n, code in enumerate(RULES)}
    results = [
        _result(i, codes[i.finding.code], fingerprint, cwd)
        for i, fingerprint in zip(items, fingerprints(items), strict=True)
    ]
    root = Path(cwd).as_uri().rstrip("/") + "/"  # a base URI ends with a slash
    log = {
        "$schema": _SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {"driver": sarif_driver()},
                "originalUriBaseIds": {SRCROOT: {"uri": root}},
                "invocations": [{"executionSuccessful": True}],
                "results": results,
            }
        ],
    }
    return dumps(log, indent=2) + "\n"
