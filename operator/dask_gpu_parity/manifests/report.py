"""Findings as text, JSON, SARIF 2.1.0, JUnit XML and GitHub workflow commands."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any
from xml.etree import ElementTree as ET

from dask_gpu_parity import __version__
from dask_gpu_parity.core.findings import RULES, Finding, Severity

__all__ = ["FORMATS", "Located", "render", "resource_label", "summary"]

FORMATS = ("text", "json", "sarif", "junit", "github")
_DOCS = "https://github.com/dask-gpu-parity/dask-gpu-parity/blob/main/docs/findings.md"


@dataclass(frozen=True)
class Located:
    """A finding with the resource and the place in the input it is about."""

    finding: Finding
    kind: str
    name: str
    namespace: str
    file: str
    document: int  # document number in the file, from 1
    line: int


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
    }


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
        return _junit(items, checked)
    return {"text": _text, "json": _json, "sarif": _sarif, "github": _github}[fmt](items, counts)


def resource_label(kind: str, namespace: str, name: str) -> str:
    """How a resource is named in reports: ``Kind namespace/name``."""
    return f"{kind} {namespace + '/' if namespace else ''}{name or '(unnamed)'}"


def _resource(item: Located) -> str:
    return resource_label(item.kind, item.namespace, item.name)


def _text(items: Sequence[Located], counts: dict[str, int]) -> str:
    lines = [
        f"{i.file}:{i.line}: {i.finding.severity} {i.finding.code} {_resource(i)} "
        f"{i.finding.path}: {i.finding.message}{' [fixable]' if i.finding.fixable else ''}"
        for i in items
    ]
    tail = (
        f"{counts['errors']} error(s), {counts['warnings']} warning(s) in "
        f"{counts['resources']} Dask resource(s) of {counts['documents']} document(s)"
    )
    if counts["fixable"]:
        tail += f"; {counts['fixable']} fixable with `dask-gpu-parity fix`"
    return "\n".join([*lines, tail]) + "\n"


def _json(items: Sequence[Located], counts: dict[str, int]) -> str:
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
    rows = json.dumps(findings, ensure_ascii=False)[1:-1].replace(
        '}, {"code": ', '},\n    {"code": '
    )
    body = f"[\n    {rows}\n  ]" if rows else "[]"
    return f'{{\n  "findings": {body},\n  "summary": {json.dumps(counts)}\n}}\n'


_SARIF_LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}


def _sarif(items: Sequence[Located], counts: dict[str, int]) -> str:
    codes = list(RULES)
    rules = [
        {
            "id": rule.code,
            "name": rule.name,
            "shortDescription": {"text": rule.title},
            "helpUri": f"{_DOCS}#{rule.code.lower()}",
            "defaultConfiguration": {"level": _SARIF_LEVEL[rule.severity]},
        }
        for rule in RULES.values()
    ]
    results: list[dict[str, Any]] = [
        {
            "ruleId": i.finding.code,
            "ruleIndex": codes.index(i.finding.code),
            "level": _SARIF_LEVEL[i.finding.severity],
            "message": {"text": f"{_resource(i)} {i.finding.path}: {i.finding.message}"},
            "locations": [
                {
                    "physicalLocation": {
                        "artifactLocation": {"uri": i.file.removeprefix("./")},
                        "region": {"startLine": max(i.line, 1)},
                    }
                }
            ],
            "partialFingerprints": {
                "dgp/v1": f"{i.finding.code}:{i.kind}/{i.namespace}/{i.name}:{i.finding.path}"
            },
        }
        for i in items
    ]
    log = {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "dask-gpu-parity",
                        "version": __version__,
                        "informationUri": _DOCS,
                        "rules": rules,
                    }
                },
                "results": results,
            }
        ],
    }
    return json.dumps(log, indent=2) + "\n"


def _junit(items: Sequence[Located], checked: Sequence[tuple[str, str]]) -> str:
    by_resource: dict[tuple[str, str], list[Located]] = {key: [] for key in checked}
    for item in items:
        by_resource.setdefault((item.file, _resource(item)), []).append(item)
    failures = sum(
        any(i.finding.severity is Severity.ERROR for i in group) for group in by_resource.values()
    )
    suites = ET.Element("testsuites", name="dask-gpu-parity")
    suite = ET.SubElement(
        suites,
        "testsuite",
        name="dask-gpu-parity",
        tests=str(len(by_resource)),
        failures=str(failures),
        errors="0",
        skipped="0",
    )
    for (file, resource), group in by_resource.items():
        case = ET.SubElement(suite, "testcase", classname=file, name=resource, file=file)
        errors = [i for i in group if i.finding.severity is Severity.ERROR]
        text = "\n".join(
            f"{i.finding.severity} {i.finding.code} {i.finding.path}: {i.finding.message}"
            for i in group
        )
        if errors:
            failure = ET.SubElement(
                case, "failure", message=errors[0].finding.message, type=errors[0].finding.code
            )
            failure.text = text
        elif text:
            ET.SubElement(case, "system-out").text = text
    ET.indent(suites)
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"
    )


def _escape(text: str, *, prop: bool = False) -> str:
    text = text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")
    return text.replace(":", "%3A").replace(",", "%2C") if prop else text


def _github(items: Sequence[Located], counts: dict[str, int]) -> str:
    level = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "notice"}
    lines = [
        f"::{level[i.finding.severity]} file={_escape(i.file, prop=True)},line={max(i.line, 1)},"
        f"title={_escape(i.finding.code + ' ' + i.finding.rule.title, prop=True)}::"
        f"{_escape(_resource(i) + ' ' + i.finding.path + ': ' + i.finding.message)}"
        for i in items
    ]
    return "\n".join(lines) + ("\n" if lines else "")
