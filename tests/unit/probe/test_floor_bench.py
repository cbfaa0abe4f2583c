"""The GPU benchmark of the probe beside its floor runs end to end on the fake driver and CuPy.

CI has no GPU; this keeps `benchmarks/gpu/probe_floor.py` working between runs on the H200
(benchmarks/gpu/README.md), asserting what it reports, never how fast.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from .harness import CHECKS, Fakes

SCRIPT = Path(__file__).resolve().parents[3] / "benchmarks" / "gpu" / "probe_floor.py"
VARIANTS = [
    "python",
    "driver",
    "floor-sequential",
    "floor",
    "call-overlapped",
    "probe",
    "probe-before",
]


def test_the_floor_bench_times_every_variant_and_breaks_the_probe_down(
    fakes: Fakes, tmp_path: Path
) -> None:
    out = tmp_path / "floor.jsonl"
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "LD_LIBRARY_PATH": str(fakes.libs["ok"]),
    }
    argv = [sys.executable, str(SCRIPT), "--out", str(out), "--rounds", "2"]
    argv += [
        "--extra-path",
        str(fakes.modules),
        "--before",
        str(SCRIPT.parents[2] / "operator" / "dask_gpu_parity" / "probe.py"),
    ]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stdout[-2000:]
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    runs, summary = lines[:-1], lines[-1]
    count = len(VARIANTS)  # round 0 in order, round 1 rotated by one
    assert [r["variant"] for r in runs[:count]] == VARIANTS
    assert [r["variant"] for r in runs[count:]] == [*VARIANTS[1:], VARIANTS[0]]
    assert summary["kind"] == "floor-summary"
    assert summary["failed_runs"] == []
    assert list(summary["process_wall_ms"]) == VARIANTS
    ratio = summary["probe_over_floor"]
    assert ratio["min"] <= ratio["median"] <= ratio["max"]
    assert set(summary["floor_steps_ms"]) == {
        "cuinit_ms",
        "context_ms",
        "import_ms",
        "import_wait_ms",
        "call_ms",
        "main_ms",
    }
    probe = summary["probe_breakdown"]
    assert list(probe["check_ms"]) == CHECKS
    assert set(probe["background_import_ms"]) == {"rmm", "cupy"}
    assert probe["runs"] == 2
    assert probe["outside_main_ms"] > 0
