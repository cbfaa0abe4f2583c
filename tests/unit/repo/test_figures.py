"""The pictures in docs/: each plot is what benchmarks/figures.py draws from the recorded results,
byte for byte, and every Mermaid diagram parses with mermaid's own parser.

The parser is the `mermaid` npm package (pinned with jsdom in tests/unit/repo/mermaid/, installed
by `make figures` and `make test` with `npm ci` into $DGP_CACHE, named by $MERMAID_DIR): its
`mermaid.parse` runs each diagram type's grammar, as GitHub's renderer does before drawing
(https://mermaid.js.org/config/usage.html#syntax-validation). Without $MERMAID_DIR the diagram
tests are skipped; without matplotlib (the 'figures' extra), the plot comparisons.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks.figures import FIGURES, OUT
from benchmarks.results import RESULTS, load

ROOT = Path(__file__).resolve().parents[3]
PARSE = Path(__file__).with_name("mermaid") / "parse.mjs"
MERMAID_DIR = os.environ.get("MERMAID_DIR", "")
BLOCK = re.compile(r"^```mermaid\n(.*?)^```$", re.M | re.S)
needs_mermaid = pytest.mark.skipif(
    not MERMAID_DIR, reason="needs $MERMAID_DIR: mermaid and jsdom as make figures installs them"
)


def _diagrams() -> dict[str, str]:
    """Every Mermaid block of the README and docs/, by file and line."""
    found = {}
    for path in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        text = path.read_text()
        for match in BLOCK.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            found[f"{path.relative_to(ROOT)}:{line}"] = match.group(1)
    return found


def _parse(diagrams: list[str]) -> list[dict[str, str]]:
    done = subprocess.run(
        ["node", str(PARSE), MERMAID_DIR],
        input=json.dumps(diagrams),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    results: list[dict[str, str]] = json.loads(done.stdout)
    return results


def test_every_recorded_run_names_its_date_commit_machine_and_command():
    files = sorted(RESULTS.glob("*.json"))
    assert {p.stem for p in files} >= {"scale", "drift_pass", "audit_scale"}
    for path in files:
        data = load(path.stem)  # checks date (ISO), commit, label, machine, command, rows
        assert data["benchmark"].startswith("benchmarks/"), path.name
        assert (ROOT / data["benchmark"]).exists(), path.name
        for run in data["runs"]:
            assert re.fullmatch(r"[0-9a-f]{7,40}(\+changes)?", run["commit"]), run
            assert run["rows"], run
            for row in run["rows"]:
                assert {"gpu_nodes", "clusters"} <= set(row), (path.name, row)


def test_every_figure_is_committed_and_shown_in_performance_md():
    text = (ROOT / "docs" / "performance.md").read_text()
    for name in FIGURES:
        assert (OUT / name).exists(), f"docs/figures/{name}: run make figures"
        assert f"](figures/{name})" in text, f"docs/performance.md does not show {name}"


def test_the_committed_figures_are_what_the_recorded_results_draw():
    pytest.importorskip("matplotlib", reason="the 'figures' extra (make figures installs it)")
    from benchmarks.figures import render

    for name in FIGURES:
        assert (OUT / name).read_bytes() == render(name), f"{name} is stale: run make figures"


def test_the_figures_are_the_same_bytes_from_any_process():
    pytest.importorskip("matplotlib", reason="the 'figures' extra (make figures installs it)")
    script = (
        "import hashlib, sys; from benchmarks.figures import FIGURES, render; "
        "print(hashlib.sha256(b''.join(render(n) for n in FIGURES)).hexdigest())"
    )
    digests = {
        subprocess.run(
            [sys.executable, "-c", script],
            cwd=ROOT,
            env={**os.environ, "PYTHONHASHSEED": seed},
            capture_output=True,
            text=True,
            timeout=300,
            check=True,
        ).stdout
        for seed in ("1", "2")
    }
    assert len(digests) == 1


def test_the_docs_draw_the_architecture_and_the_admission_path():
    diagrams = _diagrams()
    architecture = [d for k, d in diagrams.items() if k.startswith("docs/architecture.md")]
    kinds = {d.split(None, 1)[0] for d in architecture}
    assert kinds == {"flowchart", "sequenceDiagram"}
    (sequence,) = [d for d in architecture if d.startswith("sequenceDiagram")]
    order = ["kube-apiserver", "matchConditions", "mutating webhook", "validating webhook"]
    order += ["dask operator", "scheduler Pod", "gpu-parity-check"]
    actors = re.findall(r"^\s*(?:participant|actor) \w+ as (.+)$", sequence, re.M)
    named = [next(n for n, actor in enumerate(actors) if name in actor) for name in order]
    assert named == sorted(named), actors


@needs_mermaid
def test_every_mermaid_diagram_in_the_docs_parses():
    diagrams = _diagrams()
    assert len(diagrams) >= 2
    results = _parse(list(diagrams.values()))
    failed = {where: r["error"] for where, r in zip(diagrams, results, strict=True) if not r["ok"]}
    assert not failed
    assert {"flowchart-v2", "sequence"} <= {r["type"] for r in results}


@needs_mermaid
def test_the_parser_refuses_a_diagram_github_could_not_draw():
    sequence = next(d for d in _diagrams().values() if d.startswith("sequenceDiagram"))
    broken = sequence.replace("User->>API: CREATE DaskCluster", "User->>API CREATE DaskCluster")
    flow = "flowchart TB\n  a[unclosed --> b\n"
    results = _parse([broken, flow])
    assert [r["ok"] for r in results] == [False, False]
    assert all("Parse error" in r["error"] for r in results)
