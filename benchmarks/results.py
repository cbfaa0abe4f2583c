"""The benchmarks' recorded results: one JSON file per benchmark under ``benchmarks/results/``.

A file holds the benchmark, what it measures, and its runs; a run holds the date, the commit that
was measured, the machine and its load, the command, and one row per size (and tree, or mode).
The figures in ``docs/figures/`` are drawn from these files alone (``benchmarks/figures.py``), so
a new run is recorded here (``--record`` on ``audit_scale`` and ``drift_pass``) and the plots
follow with ``make figures``.
"""

from __future__ import annotations

import datetime as dt
import json
import subprocess
from pathlib import Path
from typing import Any

__all__ = ["RESULTS", "ROOT", "commit", "load", "record"]

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
_RUN_KEYS = {"date", "commit", "label", "machine", "command", "rows"}


def load(name: str) -> dict[str, Any]:
    """``benchmarks/results/<name>.json``, every run checked for its date, commit and rows."""
    path = RESULTS / f"{name}.json"
    data: dict[str, Any] = json.loads(path.read_text())
    for n, run in enumerate(data["runs"]):
        missing = _RUN_KEYS - set(run)
        if missing:
            raise ValueError(f"{path.name}: run {n} lacks {', '.join(sorted(missing))}")
        dt.date.fromisoformat(run["date"])
    return data


def _git(tree: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(tree), *args], capture_output=True, text=True, check=True
    ).stdout.strip()


def commit(tree: Path = ROOT) -> str:
    """The short commit of ``tree``, with ``+changes`` when its work tree differs from it."""
    head = _git(tree, "rev-parse", "--short", "HEAD")
    dirty = _git(tree, "status", "--porcelain", "--untracked-files=no")
    return head + ("+changes" if dirty else "")


def record(path: Path, run: dict[str, Any]) -> None:
    """Append ``run`` (today's date added when it has none) to the results file ``path``."""
    data = json.loads(path.read_text())
    data["runs"].append({"date": dt.datetime.now(dt.UTC).date().isoformat(), **run})
    path.write_text(json.dumps(data, indent=2) + "\n")
