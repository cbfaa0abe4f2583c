"""dask-gateway and classic-chart configurations against the verdicts written first in EXPECTED.md.

Each case runs the CLI as a user would (``check -o json``, ``fix``) on a file from
``tests/fixtures/gateway`` or ``tests/fixtures/classic-chart`` and asserts the exit code, the codes
that must appear (and, where the row says "only", that no other does), the paths the fix writes,
that ``fix`` converges and is idempotent, and that files the row calls unchanged stay byte for byte.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.unit.reports import cli

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"
HEADER_END = (
    "# -- end of source header; the published content follows unchanged except as Extracted says --"
)


@dataclass(frozen=True)
class Verdict:
    """One EXPECTED.md row."""

    exit: int
    must: frozenset[str] = frozenset()
    only: bool = True
    unchanged: bool = False
    not_fixable: frozenset[str] = frozenset()  # codes that must be reported as not fixable
    paths: tuple[str, ...] = ()  # finding paths that must appear
    writes_under: tuple[str, ...] = ()  # every changed top-level key path starts with one of these


def _v(exit: int, *must: str, **kw: Any) -> Verdict:
    return Verdict(exit, frozenset(must), **kw)


SCHED_CR = (
    "spec.config.scheduler_extra_pod_config",
    "spec.config.scheduler_extra_container_config",
)
VERDICTS: dict[str, Verdict] = {
    "gateway/gw-crd-gpu-option.yaml": _v(1, "DGP001", "DGP005", "DGP009", writes_under=SCHED_CR),
    "gateway/gw-crd-cpu.yaml": _v(0, unchanged=True),
    "gateway/gw-crd-worker-image.yaml": _v(
        1,
        "DGP001",
        "DGP003",
        "DGP009",
        paths=("/spec/config/scheduler_extra_container_config/image",),
        writes_under=SCHED_CR,
    ),
    "gateway/gw-values-gpu-workers.yaml": _v(
        1, "DGP001", "DGP005", "DGP009", writes_under=("gateway.backend.scheduler",)
    ),
    "gateway/gw-values-snippet-gpu.yaml": _v(
        1, "DGP001", "DGP009", writes_under=("dask-gateway.gateway.backend.scheduler",)
    ),
    "gateway/gw-values-snippet-scheduler.yaml": _v(
        1, "DGP001", "DGP030", only=False, unchanged=True, not_fixable=frozenset({"DGP001"})
    ),
    "gateway/2i2c-daskhub-values.yaml": _v(0, "DGP030", unchanged=True),
    "classic-chart/rapids-config.yaml": _v(
        1,
        "DGP001",
        "DGP009",
        "DGP029",
        not_fixable=frozenset({"DGP009"}),
        paths=("/jupyter/env", "/scheduler/resources"),
        writes_under=("scheduler", "jupyter.env"),
    ),
    "classic-chart/dask-values-defaults.yaml": _v(0, unchanged=True),
    "classic-chart/gpu-workers-chart-scheduler-image.yaml": _v(
        1,
        "DGP001",
        "DGP003",
        "DGP005",
        "DGP009",
        not_fixable=frozenset({"DGP009"}),
        writes_under=("scheduler",),
    ),
    "classic-chart/rendered-rapids-release.yaml": _v(
        1, "DGP001", "DGP009", writes_under=("spec.template.spec",)
    ),
}


def _check(path: Path) -> tuple[int, list[dict[str, Any]]]:
    code, out, err = cli(["check", str(path), "-o", "json"])
    assert not err
    return code, json.loads(out)["findings"]


def _fix(path: Path) -> str:
    code, out, err = cli(["fix", str(path)])
    assert code == 0, err
    assert len(err.splitlines()) <= 1
    return out


def _changed_keys(before: Any, after: Any, prefix: str = "") -> list[str]:
    """Dotted paths of the mappings' keys whose values differ (down to the first difference)."""
    if isinstance(before, dict) and isinstance(after, dict):
        out = []
        for key in sorted(set(before) | set(after), key=str):
            if before.get(key) != after.get(key):
                sub = f"{prefix}.{key}" if prefix else str(key)
                inner = _changed_keys(before.get(key), after.get(key), sub)
                out += inner or [sub]
        return out
    return [] if before == after else [prefix]


def test_every_fixture_has_a_written_verdict() -> None:
    files = {
        f"{p.parent.name}/{p.name}"
        for folder in ("gateway", "classic-chart")
        for p in (FIXTURES / folder).glob("*.yaml")
    }
    assert files == set(VERDICTS)


@pytest.mark.parametrize("name", sorted(VERDICTS))
def test_fixture_opens_with_its_source(name: str) -> None:
    text = (FIXTURES / name).read_text()
    header = text.split(HEADER_END, 1)[0]
    for key in ("# Source:", "# Commit:", "# URL:", "# Extracted:"):
        assert key in header, f"{name} lacks {key}"


@pytest.mark.parametrize("name", sorted(VERDICTS))
def test_check_says_what_expected_md_says(name: str) -> None:
    verdict = VERDICTS[name]
    code, findings = _check(FIXTURES / name)
    codes = {f["code"] for f in findings}
    assert code == verdict.exit, findings
    assert verdict.must <= codes
    if verdict.only:
        assert codes == set(verdict.must), findings
    for finding in findings:
        if finding["code"] in verdict.not_fixable:
            assert not finding["fixable"], finding
    assert set(verdict.paths) <= {f["path"] for f in findings}


@pytest.mark.parametrize("name", sorted(VERDICTS))
def test_fix_converges_in_the_deployers_own_places(name: str, tmp_path: Path) -> None:
    verdict = VERDICTS[name]
    source = FIXTURES / name
    fixed = _fix(source)
    if verdict.unchanged:
        assert fixed == source.read_text()
    target = tmp_path / source.name
    target.write_text(fixed)
    _, after = _check(target)
    assert not [f for f in after if f["fixable"]], after
    assert _fix(target) == fixed
    before_docs = list(yaml.safe_load_all(source.read_text()))
    after_docs = list(yaml.safe_load_all(fixed))
    changed = [k for b, a in zip(before_docs, after_docs, strict=True) for k in _changed_keys(b, a)]
    for key in changed:
        assert verdict.writes_under, f"{name}: changed {key}"
        assert key.startswith(verdict.writes_under), f"{name}: changed {key}"


def test_a_rendered_release_changes_only_its_scheduler_deployment() -> None:
    source = FIXTURES / "classic-chart/rendered-rapids-release.yaml"
    scheduler, worker = yaml.safe_load_all(_fix(source))
    original_worker = list(yaml.safe_load_all(source.read_text()))[1]
    assert worker == original_worker
    container = scheduler["spec"]["template"]["spec"]["containers"][0]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert container["resources"]["requests"]["nvidia.com/gpu"] == "1"
