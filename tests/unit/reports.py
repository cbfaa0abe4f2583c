"""What each report format must be, checked as its consumer reads it.

SARIF against the OASIS 2.1.0 schema (vendored in tests/schemas, formats checked), JUnit as
GitLab's parser reads it, GitLab Code Quality as GitLab's widget reads it.
"""

from __future__ import annotations

import io
import json
import os
import urllib.parse
import xml.etree.ElementTree as ET
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from dask_gpu_parity.cli import main

SCHEMAS = Path(__file__).resolve().parents[1] / "schemas"


def cli(
    argv: list[str], stdin: bytes | None = None, monkeypatch: pytest.MonkeyPatch | None = None
) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    if stdin is not None:
        assert monkeypatch is not None

        class _Stdin:
            buffer = io.BytesIO(stdin)

        monkeypatch.setattr("sys.stdin", _Stdin)
    code = main(argv, out=out, err=err)
    return code, out.getvalue(), err.getvalue()


@cache
def sarif_validator() -> jsonschema.protocols.Validator:
    schema = json.loads((SCHEMAS / "sarif-schema-2.1.0.json").read_text())
    cls = jsonschema.validators.validator_for(schema)
    # Every format jsonschema knows: the schema is draft 4 but uses draft 6's uri-reference.
    checker = jsonschema.FormatChecker()
    assert {"uri", "uri-reference"} <= set(checker.checkers), "needs rfc3986-validator"
    assert not checker.conforms("<stdin>", "uri-reference")
    assert not checker.conforms("a b.yaml", "uri-reference")
    return cls(schema, format_checker=checker)  # type: ignore[no-any-return]


def assert_sarif(text: str, cwd: Path) -> list[dict[str, Any]]:
    """Valid SARIF 2.1.0; relative URIs that name real files; unique fingerprints."""
    log = json.loads(text)
    errors = sorted(sarif_validator().iter_errors(log), key=str)
    assert not errors, "\n".join(f"{list(e.absolute_path)}: {e.message}" for e in errors[:5])
    (run,) = log["runs"]
    base = run["originalUriBaseIds"]["%SRCROOT%"]["uri"]
    assert base.startswith("file:///")
    assert base.endswith("/")
    results: list[dict[str, Any]] = run["results"]
    fingerprints = [r["partialFingerprints"]["dgp/v2"] for r in results]
    assert len(set(fingerprints)) == len(fingerprints)
    rules = run["tool"]["driver"]["rules"]
    for result in results:
        assert rules[result["ruleIndex"]]["id"] == result["ruleId"]
        artifact = result["locations"][0]["physicalLocation"]["artifactLocation"]
        if "uri" not in artifact:
            assert artifact["description"]["text"] == "standard input"
            continue
        uri = artifact["uri"]
        parts = urllib.parse.urlsplit(uri)
        assert not parts.query
        assert not parts.fragment
        if "uriBaseId" in artifact:
            assert artifact["uriBaseId"] == "%SRCROOT%"
            assert not parts.scheme
            assert not uri.startswith("/")
            path = cwd / os.fsdecode(urllib.parse.unquote_to_bytes(uri))
        else:
            assert parts.scheme == "file"
            path = Path(os.fsdecode(urllib.parse.unquote_to_bytes(parts.path)))
        assert os.path.lexists(path) or result["ruleId"] == "DGP900", uri
    return results


def assert_junit(text: str) -> ET.Element:
    """Well-formed XML, read as GitLab's JUnit parser reads it (lib/gitlab/ci/parsers/test)."""
    root = ET.fromstring(text.encode("utf-8"))  # expat: strict XML 1.0
    assert root.tag == "testsuites"
    for suite in root.iter("testsuite"):
        cases = suite.findall("testcase")
        assert suite.get("tests") == str(len(cases))
        failed = [c for c in cases if c.find("failure") is not None]
        broken = [c for c in cases if c.find("error") is not None]
        assert suite.get("failures") == str(len(failed))
        assert suite.get("errors") == str(len(broken))
        for case in cases:
            assert case.get("name")
            assert case.get("classname")
            float(case.get("time", "0"))
            file = case.get("file")
            assert file
            assert not file.startswith("./")
            for child in case:
                assert child.tag in ("failure", "error", "skipped", "system-out")
                assert child.text
    return root


GITLAB_SEVERITIES = {"info", "minor", "major", "critical", "blocker"}


def assert_gitlab(text: str) -> list[dict[str, Any]]:
    """GitLab Code Quality: the fields its merge request widget reads, fingerprints unique."""
    issues: list[dict[str, Any]] = json.loads(text)
    assert isinstance(issues, list)
    fingerprints = [i["fingerprint"] for i in issues]
    assert len(set(fingerprints)) == len(fingerprints)
    for issue in issues:
        assert isinstance(issue["description"], str)
        assert issue["description"]
        assert issue["check_name"].startswith("dask-gpu-parity/DGP")
        assert issue["severity"] in GITLAB_SEVERITIES
        path = issue["location"]["path"]
        assert isinstance(path, str)
        assert path
        assert not path.startswith("./")
        assert isinstance(issue["location"]["lines"]["begin"], int)
        assert issue["location"]["lines"]["begin"] >= 1
    return issues
