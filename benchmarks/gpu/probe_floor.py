"""The probe beside its floor: whole processes, interleaved rounds, on the real driver.

Usage (from the repository root, on a machine with an NVIDIA GPU and CuPy):
    python3 benchmarks/gpu/probe_floor.py --out floor.jsonl [--rounds 15] [--before OLD_PROBE]

Each round starts, each as a fresh process timed from spawn to exit, in an order that rotates
from round to round:

* ``python``: ``python -I -c pass``, the interpreter alone;
* ``driver``: ``cuInit``, the device and its primary context (``cuDevicePrimaryCtxRetain``,
  ``cuCtxSetCurrent``) through ctypes: the driver's share of the floor;
* ``floor-sequential``: that, then ``import cupy`` and ``cupy.zeros(1).get()`` (the probe's CuPy
  call), one after the other;
* ``floor``: the same with ``import cupy`` in a thread while the driver initialises, as the
  probe does: the least any process can do to prove CuPy runs on the GPU;
* ``call-overlapped``: CuPy's call too in that thread, beside the driver's steps (the probe does
  not: it reports CuPy's outcome only after the driver checks pass); what is left to overlap;
* ``probe``: ``python -I probe.py``, every check;
* ``probe-before`` (with ``--before``): an earlier probe, e.g. the one that imported CuPy in its
  check, for a before and after in the same run.

After one untimed run of each (a cold page cache is not what a node that already ran the
scheduler's image has), writes one JSON line per process (with the timings the process took of
its own steps) and a summary: per variant the median and range of the whole-process wall time,
the probe over the floor round by round (median and range), and where the probe's milliseconds
go (its checks, the background imports, and start-up and exit outside ``main()``).
``--extra-path`` puts a folder on the children's ``sys.path`` (tests run this against the fake
driver and a fake CuPy). Standard library only.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
PROBE = ROOT / "operator" / "dask_gpu_parity" / "probe.py"

# The floor, as one program: argv[1] is "driver", "sequential", "overlap" or "overlap-call".
FLOOR = r"""
import ctypes, json, sys, threading, time
t0 = time.perf_counter()
mode, out, box = sys.argv[1], {}, {}
def ms(start):
    return round((time.perf_counter() - start) * 1000, 1)
def import_cupy():
    start = time.perf_counter()
    import cupy
    box["cupy"], out["import_ms"] = cupy, ms(start)
def import_and_call():
    import_cupy()
    start = time.perf_counter()
    box["cupy"].zeros(1).get()
    out["call_ms"] = ms(start)
if mode in ("overlap", "overlap-call"):
    sys.setswitchinterval(0.0005)  # as the probe does while it imports beside the driver
    thread = threading.Thread(target=import_cupy if mode == "overlap" else import_and_call)
    thread.start()
cuda = ctypes.CDLL("libcuda.so.1")
start = time.perf_counter()
code = cuda.cuInit(0)
out["cuinit_ms"] = ms(start)
dev, ctx = ctypes.c_int(), ctypes.c_void_p()
start = time.perf_counter()
code = code or cuda.cuDeviceGet(ctypes.byref(dev), 0)
code = code or cuda.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev)
code = code or cuda.cuCtxSetCurrent(ctx)
out["context_ms"] = ms(start)
if code:
    sys.exit(f"CUDA driver call returned {code}")
if mode in ("overlap", "overlap-call"):
    start = time.perf_counter()
    thread.join()
    out["import_wait_ms"] = ms(start)
elif mode == "sequential":
    import_cupy()
if mode in ("overlap", "sequential"):
    start = time.perf_counter()
    box["cupy"].zeros(1).get()
    out["call_ms"] = ms(start)
out["main_ms"] = ms(t0)
print(json.dumps(out))
"""


def child(argv: list[str], extra: list[str]) -> list[str]:
    """``python -I`` running a file or ``-c`` source, with ``extra`` folders on ``sys.path``."""
    if not extra:
        return [sys.executable, "-I", *argv]
    path = f"import sys; sys.path[:0] = {extra!r}; "
    if argv[0] == "-c":
        return [sys.executable, "-I", "-c", path + argv[1], *argv[2:]]
    boot = path + f"import runpy; runpy.run_path({argv[0]!r}, run_name='__main__')"
    return [sys.executable, "-I", "-c", boot, *argv[1:]]


def variants(before: Path | None, extra: list[str]) -> dict[str, list[str]]:
    """The command of each variant."""
    out = {
        "python": child(["-c", "pass"], extra),
        "driver": child(["-c", FLOOR, "driver"], extra),
        "floor-sequential": child(["-c", FLOOR, "sequential"], extra),
        "floor": child(["-c", FLOOR, "overlap"], extra),
        "call-overlapped": child(["-c", FLOOR, "overlap-call"], extra),
        "probe": child([str(PROBE)], extra),
    }
    if before is not None:
        out["probe-before"] = child([str(before)], extra)
    return out


def run(variant: str, argv: list[str], env: dict[str, str], index: int) -> dict[str, Any]:
    """One whole process, spawn to exit; its own timings from its JSON line."""
    t0 = time.perf_counter()
    try:
        done = subprocess.run(
            argv, env=env, capture_output=True, text=True, timeout=120, check=False
        )
        code, stdout, stderr = done.returncode, done.stdout, done.stderr
    except subprocess.TimeoutExpired:
        code, stdout, stderr = None, "", "timed out after 120 s"
    wall = round((time.perf_counter() - t0) * 1000, 1)
    inner: dict[str, Any] = {}
    if stdout.strip():
        try:
            inner = json.loads(stdout.splitlines()[0])
        except ValueError:
            inner = {"stdout": stdout[-300:]}
    return {
        "kind": "floor-run",
        "variant": variant,
        "round": index,
        "exit_code": code,
        "process_wall_ms": wall,
        "inner": inner,
        "stderr": stderr.strip()[-600:],
    }


def spread(values: list[float]) -> dict[str, float]:
    return {
        "median": round(statistics.median(values), 1),
        "min": round(min(values), 1),
        "max": round(max(values), 1),
    }


def breakdown(probes: list[dict[str, Any]]) -> dict[str, Any]:
    """Where the probe's milliseconds go: medians over its passing runs."""
    runs = [r for r in probes if r["exit_code"] == 0 and "checks" in r["inner"]]
    if not runs:
        return {}
    checks: dict[str, list[float]] = {}
    imports: dict[str, list[float]] = {}
    for r in runs:
        for check in r["inner"]["checks"]:
            checks.setdefault(check["name"], []).append(check["duration_ms"])
        for module, ms in r["inner"].get("import_ms", {}).items():
            imports.setdefault(module, []).append(ms)
    outside = [r["process_wall_ms"] - r["inner"]["wall_ms"] for r in runs]
    return {
        "runs": len(runs),
        "check_ms": {k: round(statistics.median(v), 1) for k, v in checks.items()},
        "background_import_ms": {k: round(statistics.median(v), 1) for k, v in imports.items()},
        "main_ms": round(statistics.median(r["inner"]["wall_ms"] for r in runs), 1),
        "outside_main_ms": round(statistics.median(outside), 1),
    }


def summarise(records: list[dict[str, Any]], names: list[str]) -> dict[str, Any]:
    """Medians and ranges per variant, the probe over the floor round by round, the breakdown."""
    ok = [r for r in records if r["exit_code"] == 0]
    walls = {v: [r["process_wall_ms"] for r in ok if r["variant"] == v] for v in names}
    summary: dict[str, Any] = {
        "kind": "floor-summary",
        "failed_runs": [
            {k: r[k] for k in ("variant", "round", "exit_code", "stderr")}
            for r in records
            if r["exit_code"] != 0
        ],
        "process_wall_ms": {v: spread(w) for v, w in walls.items() if w},
    }
    by_round: dict[int, dict[str, float]] = {}
    for r in ok:
        by_round.setdefault(r["round"], {})[r["variant"]] = r["process_wall_ms"]
    for probe in ("probe", "probe-before"):
        ratios = [w[probe] / w["floor"] for w in by_round.values() if {probe, "floor"} <= set(w)]
        if ratios:
            summary[f"{probe}_over_floor"] = {
                "median": round(statistics.median(ratios), 3),
                "min": round(min(ratios), 3),
                "max": round(max(ratios), 3),
            }
    floor_steps: dict[str, list[float]] = {}
    for r in ok:
        if r["variant"] == "floor":
            for step, ms in r["inner"].items():
                floor_steps.setdefault(step, []).append(ms)
    summary["floor_steps_ms"] = {k: round(statistics.median(v), 1) for k, v in floor_steps.items()}
    summary["probe_breakdown"] = breakdown([r for r in records if r["variant"] == "probe"])
    return summary


def main() -> int:
    """Run the rounds; print and write one JSON line per process and the summary."""
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--before", type=Path, help="an earlier probe.py to time beside this one")
    parser.add_argument("--extra-path", action="append", default=[], help="a folder for sys.path")
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds takes a whole number from 1")
    if args.before is not None and not args.before.is_file():
        parser.error(f"--before {args.before}: no such file")
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPU_PARITY_")}
    env.setdefault("CUDA_VERSION", "13.0")  # as NVIDIA's CUDA images set it
    env["GPU_PARITY_TERMINATION_LOG"] = os.devnull
    commands = variants(args.before, args.extra_path)
    names = list(commands)
    records = []
    for variant in names:  # one untimed run each: the page cache holds CuPy and the driver
        run(variant, commands[variant], env, -1)
    with args.out.open("w") as out:
        for index in range(args.rounds):
            shift = index % len(names)
            for variant in names[shift:] + names[:shift]:
                record = run(variant, commands[variant], env, index)
                records.append(record)
                out.write(json.dumps(record) + "\n")
        summary = summarise(records, names)
        out.write(json.dumps(summary) + "\n")
    print(json.dumps(summary, indent=1))
    return 0 if not summary["failed_runs"] else 1


if __name__ == "__main__":
    sys.exit(main())
