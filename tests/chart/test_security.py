"""checkov over the rendered chart and the Dockerfile; hadolint over the Dockerfile."""

from __future__ import annotations

import json
import subprocess

import yaml

from .helpers import CI_VALUES, REPO

CONFIG = REPO / "tests" / "chart" / "checkov.yaml"


def _checkov(tool, *args: str) -> list[dict]:
    proc = subprocess.run(
        [str(tool("checkov")), "--config-file", str(CONFIG), "--output", "json", *args],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert proc.stdout.strip(), proc.stderr[-3000:]
    reports = json.loads(proc.stdout)
    return reports if isinstance(reports, list) else [reports]


def _failures(reports: list[dict]) -> list[str]:
    failed = []
    for report in reports:
        for check in report.get("results", {}).get("failed_checks", []):
            failed.append(f"{check['check_id']} {check['resource']} ({check['file_path']})")
    return failed


def test_checkov_passes_on_every_render(helm, tool, tmp_path):
    for name in CI_VALUES:
        objects = helm.template([name])
        (tmp_path / name).write_text(yaml.safe_dump_all(objects, sort_keys=False))
    reports = _checkov(tool, "--directory", str(tmp_path), "--framework", "kubernetes")
    assert _failures(reports) == []
    passed = sum(r["summary"]["passed"] for r in reports)
    assert passed > 500  # the scan really ran over every render


def test_checkov_passes_on_the_dockerfile(tool):
    reports = _checkov(tool, "--file", str(REPO / "Dockerfile"), "--framework", "dockerfile")
    assert _failures(reports) == []
    assert sum(r["summary"]["passed"] for r in reports) > 20


def test_every_checkov_skip_is_justified():
    lines = CONFIG.read_text().splitlines()
    skips = yaml.safe_load(CONFIG.read_text())["skip-check"]
    assert skips
    for check in skips:
        at = next(i for i, line in enumerate(lines) if line.strip() == f"- {check}")
        assert lines[at - 1].strip().startswith("# "), f"{check} has no justification above it"


def test_hadolint_passes(tool):
    proc = subprocess.run(
        [
            str(tool("hadolint")),
            "--config",
            str(REPO / "tests" / "chart" / "hadolint.yaml"),
            str(REPO / "Dockerfile"),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
