"""Time the verifier's two steps as the scheduler pod runs them, beside the inline form.

Usage (from the repository root, on a machine with an NVIDIA GPU):
    python3 benchmarks/gpu/verifier_steps.py [--python /path/to/python] [--runs 7]
        [--env NAME=VALUE ...] [--out verifier.jsonl]

By reference (the default form, docs/probe.md): the GPU-less copy step (``cp /probe.py
/gpu-parity/probe.py`` in the probe image, with ``NVIDIA_VISIBLE_DEVICES=void``), then
``gpu-parity-check``: ``python -I /gpu-parity/probe.py`` with the scheduler container's env.
Inline: ``python -I -c <source>`` with the same env. Here the copy runs the same ``cp`` into a
temporary folder standing in for the emptyDir, and ``--python`` stands in for the scheduler
image's interpreter (default: this one); ``--env`` adds the scheduler container's variables.
The forms alternate run by run. Prints one JSON line per run and a summary line (medians, ms);
needs only the standard library and the driver.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
PROBE = ROOT / "operator" / "dask_gpu_parity" / "probe.py"


def scheduler_env(extra: list[str]) -> dict[str, str]:
    """The env gpu-parity-check gets: the scheduler's (here: this process's, plus ``--env``)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPU_PARITY_")}
    env.setdefault("CUDA_VERSION", "13.0")  # as NVIDIA's CUDA images set it
    env["GPU_PARITY_TERMINATION_LOG"] = os.path.join(tempfile.gettempdir(), "gpu-parity-tl")
    for pair in extra:
        name, _, value = pair.partition("=")
        env[name] = value
    return env


def run(cmd: list[str], env: dict[str, str]) -> tuple[float, subprocess.CompletedProcess[str]]:
    start = time.perf_counter()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120, check=False)
    return (time.perf_counter() - start) * 1000, done


def summary_of(done: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    try:
        parsed: dict[str, Any] = json.loads(done.stdout.splitlines()[0])
    except (IndexError, json.JSONDecodeError):
        return {}
    return parsed


def reference(python: str, env: dict[str, str], folder: Path) -> dict[str, Any]:
    """The copy step, then the check from the copied file."""
    target = folder / "probe.py"
    target.unlink(missing_ok=True)
    copy_env = {"PATH": os.environ.get("PATH", ""), "NVIDIA_VISIBLE_DEVICES": "void"}
    copy_ms, copied = run([shutil.which("cp") or "cp", str(PROBE), str(target)], copy_env)
    check_ms, done = run([python, "-I", str(target)], env)
    summary = summary_of(done)
    return {
        "kind": "step",
        "form": "reference",
        "copy_ms": round(copy_ms, 1),
        "copy_exit": copied.returncode,
        "check_process_ms": round(check_ms, 1),
        "total_ms": round(copy_ms + check_ms, 1),
        "probe_wall_ms": summary.get("wall_ms"),
        "exit": done.returncode,
        "ok": summary.get("ok"),
        "reason": summary.get("reason"),
    }


def inline(python: str, env: dict[str, str]) -> dict[str, Any]:
    """The check with the probe's source on the command line."""
    check_ms, done = run([python, "-I", "-c", PROBE.read_text(encoding="utf-8")], env)
    summary = summary_of(done)
    return {
        "kind": "step",
        "form": "inline",
        "check_process_ms": round(check_ms, 1),
        "total_ms": round(check_ms, 1),
        "probe_wall_ms": summary.get("wall_ms"),
        "exit": done.returncode,
        "ok": summary.get("ok"),
        "reason": summary.get("reason"),
    }


def median(records: list[dict[str, Any]], key: str) -> float | None:
    values = [r[key] for r in records if isinstance(r.get(key), int | float)]
    return round(statistics.median(values), 1) if values else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--python", default=sys.executable, help="the scheduler image's python")
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--env", action="append", default=[], metavar="NAME=VALUE")
    parser.add_argument("--out", type=Path, help="also write the JSON lines here")
    args = parser.parse_args(argv)
    env = scheduler_env(args.env)
    records: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="gpu-parity-") as folder:  # the emptyDir
        for index in range(args.runs):
            forms = ("reference", "inline") if index % 2 == 0 else ("inline", "reference")
            for form in forms:
                record = (
                    reference(args.python, env, Path(folder))
                    if form == "reference"
                    else (inline(args.python, env))
                )
                record["run"] = index
                records.append(record)
                print(json.dumps(record), flush=True)
    summary: dict[str, Any] = {"kind": "summary", "python": args.python, "runs": args.runs}
    summary["env"] = args.env
    for form in ("reference", "inline"):
        mine = [r for r in records if r["form"] == form]
        summary[form] = {
            key: median(mine, key)
            for key in ("copy_ms", "check_process_ms", "total_ms", "probe_wall_ms")
            if form == "reference" or key != "copy_ms"
        }
        summary[form]["exits"] = sorted({r["exit"] for r in mine})
    print(json.dumps(summary), flush=True)
    if args.out:
        lines = [json.dumps(r) for r in [*records, summary]]
        args.out.write_text("\n".join(lines) + "\n")
    failed = any(r["exit"] != 0 or (r["form"] == "reference" and r["copy_exit"]) for r in records)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
