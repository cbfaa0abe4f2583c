"""The in-process benchmarks run from the repository root at a small size, and a sweep recorded
with --record lands in its results file with its date and commit (what make figures draws from).
Figures asserted are shapes and fields, never times: the machine is shared."""

from __future__ import annotations

import datetime as dt
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

from benchmarks.results import RESULTS

ROOT = Path(__file__).resolve().parents[3]


def _run(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", *argv],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_the_drift_pass_sweep_records_each_size_with_its_date_and_commit(tmp_path):
    results = tmp_path / "drift_pass.json"
    shutil.copy(RESULTS / "drift_pass.json", results)
    before = json.loads(results.read_text())["runs"]
    done = _run(
        "benchmarks.drift_pass", "--sizes", "20/40,40/80", "--rounds", "2", "--record", str(results)
    )
    assert done.returncode == 0, done.stderr
    runs = json.loads(results.read_text())["runs"]
    assert runs[:-1] == before
    run = runs[-1]
    assert run["date"] == dt.datetime.now(dt.UTC).date().isoformat()
    assert re.fullmatch(r"[0-9a-f]{7,40}(\+changes)?", run["commit"])
    assert [(r["gpu_nodes"], r["clusters"]) for r in run["rows"]] == [(20, 40), (40, 80)]
    for row in run["rows"]:
        assert len(row["first_pass_cpu_s"]) == 2
        assert row["events"] == row["clusters"]  # every generated cluster lacks parity
        assert 0 < row["heap_after_mib"] <= row["heap_peak_mib"]


def test_the_in_process_audit_bench_reports_both_stages():
    for extra in ([], ["--distinct"]):
        done = _run(
            "benchmarks.audit_inprocess",
            "--nodes",
            "20",
            "--clusters",
            "30",
            "--rounds",
            "1",
            *extra,
        )
        assert done.returncode == 0, done.stderr
        lines = done.stdout.splitlines()
        assert lines[0] == (
            f"20 GPU nodes, 30 DaskClusters ({'distinct' if extra else 'identical'} specs)"
        )
        assert [line.split(":")[0].strip() for line in lines[1:]] == ["audit", "report"]
