"""Run the gpu-parity-check probe against the real driver and time it beside nvidia-smi.

Usage (from the repository root, on a machine with an NVIDIA GPU):
    python3 benchmarks/gpu/probe_bench.py --out probe.jsonl [--runs 7]

Prints and writes one JSON line per measurement. Needs only the standard library and the driver.
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
CORE = {"rmm", "cupy"}  # checks that import the image's own GPU stack, timed apart
OUT: list[dict[str, Any]] = []


def emit(record: dict[str, Any]) -> None:
    OUT.append(record)
    print(json.dumps(record), flush=True)


def base_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPU_PARITY_")}
    env.pop("CUDA_VISIBLE_DEVICES", None)
    env.setdefault("CUDA_VERSION", "13.0")  # as NVIDIA's CUDA images set it
    env["GPU_PARITY_TERMINATION_LOG"] = "/tmp/gpu-parity-termination-log"
    return env


def timed(cmd: list[str], env: dict[str, str], timeout: float = 60) -> tuple[float, Any]:
    t0 = time.perf_counter()
    try:
        done = subprocess.run(
            cmd, env=env, capture_output=True, text=True, timeout=timeout, check=False
        )
    except (subprocess.TimeoutExpired, OSError):
        return (time.perf_counter() - t0) * 1000, None
    return (time.perf_counter() - t0) * 1000, done


def probe(case: str, extra: dict[str, str], runs: int = 1, form: str = "file") -> dict[str, Any]:
    """form: file (python -I probe.py), c (python -I -c source), no-site (-I -S: no cupy/rmm)."""
    env = {**base_env(), **extra}
    src = {
        "file": ["-I", str(PROBE)],
        "c": ["-I", "-c", PROBE.read_text()],
        "no-site": ["-I", "-S", str(PROBE)],
    }[form]
    walls, summaries, last = [], [], None
    for _ in range(runs):
        wall, done = timed([sys.executable, *src], env)
        walls.append(wall)
        last = done
        if done is not None and done.stdout.strip():
            summaries.append(json.loads(done.stdout.splitlines()[0]))
    s = summaries[-1] if summaries else {}
    durations: dict[str, list[float]] = {}
    for x in summaries:
        for c in x["checks"]:
            durations.setdefault(c["name"], []).append(c["duration_ms"])
    checks = {k: round(statistics.median(v), 1) for k, v in durations.items()}
    imports: dict[str, list[float]] = {}
    for x in summaries:
        for module, ms in x.get("import_ms", {}).items():
            imports.setdefault(module, []).append(ms)
    record = {
        "kind": "probe",
        "case": case,
        "env": extra,
        "form": form,
        "runs": runs,
        "exit_code": None if last is None else last.returncode,
        "process_wall_ms": [round(w, 1) for w in walls],
        "process_wall_ms_median": round(statistics.median(walls), 1),
        "probe_wall_ms_median": round(statistics.median(x["wall_ms"] for x in summaries), 1)
        if summaries
        else None,
        "core_wall_ms_median": round(
            statistics.median(
                x["wall_ms"] - sum(c["duration_ms"] for c in x["checks"] if c["name"] in CORE)
                for x in summaries
            ),
            1,
        )
        if summaries
        else None,
        "check_ms_median": checks,
        "import_ms_median": {  # rmm and CuPy, imported in the background beside the checks
            k: round(statistics.median(v), 1) for k, v in imports.items()
        },
        "failed_check": s.get("failed_check"),
        "reason": s.get("reason"),
        "stderr": None if last is None else last.stderr.strip()[-2000:],
        "termination_log": Path(env["GPU_PARITY_TERMINATION_LOG"]).read_text().strip()
        if Path(env["GPU_PARITY_TERMINATION_LOG"]).exists()
        else None,
        "summary": s,
    }
    emit(record)
    return record


def nvidia_smi(case: str, args: list[str], runs: int, extra: dict[str, str]) -> None:
    env = {**base_env(), **extra}
    walls, out = [], ""
    for _ in range(runs):
        wall, done = timed(["nvidia-smi", *args], env)
        walls.append(wall)
        out = "" if done is None else (done.stdout + done.stderr).strip()
    emit(
        {
            "kind": "nvidia-smi",
            "case": case,
            "args": args,
            "env": extra,
            "runs": runs,
            "wall_ms": [round(w, 1) for w in walls],
            "wall_ms_median": round(statistics.median(walls), 1),
            "output_tail": out[-600:],
        }
    )


NVML_AND_CUDA = r"""
import ctypes, json, os, time
out = {"CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES")}
nvml = ctypes.CDLL("libnvidia-ml.so.1")
n = ctypes.c_uint()
out["nvmlInit"] = nvml.nvmlInit_v2()
out["nvmlDeviceGetCount"] = (nvml.nvmlDeviceGetCount_v2(ctypes.byref(n)), n.value)
cuda = ctypes.CDLL("libcuda.so.1")
t0 = time.perf_counter()
code = cuda.cuInit(0)
out["cuInit_ms"] = round((time.perf_counter() - t0) * 1000, 1)
name = ctypes.c_char_p()
cuda.cuGetErrorName(code, ctypes.byref(name))
c = ctypes.c_int(-1)
if code == 0:
    cuda.cuDeviceGetCount(ctypes.byref(c))
out["cuInit"] = (code, (name.value or b"").decode())
out["cuDeviceGetCount"] = c.value
print(json.dumps(out))
"""


def nvml_vs_cuda(case: str, extra: dict[str, str]) -> None:
    env = {**base_env(), **extra}
    _, done = timed([sys.executable, "-I", "-c", NVML_AND_CUDA], env)
    result = json.loads(done.stdout) if done is not None and done.returncode == 0 else None
    emit(
        {
            "kind": "nvml-vs-cuda",
            "case": case,
            "env": extra,
            "result": result,
            "stderr": None if done is None else done.stderr[-600:],
        }
    )


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    runs = args.runs
    emit(
        {
            "kind": "env",
            "CUDA_VERSION": os.environ.get("CUDA_VERSION"),
            "NVIDIA_VISIBLE_DEVICES": os.environ.get("NVIDIA_VISIBLE_DEVICES"),
            "CUDA_VISIBLE_DEVICES": os.environ.get("CUDA_VISIBLE_DEVICES"),
            "python": sys.version.split()[0],
        }
    )
    ok = probe("all-checks-pass", {}, runs)
    driver = ok["summary"].get("driver_version", "")
    nvidia_smi("nvidia-smi", [], runs, {})
    nvidia_smi(
        "nvidia-smi-query",
        ["--query-gpu=name,driver_version,memory.total", "--format=csv,noheader"],
        runs,
        {},
    )
    probe("all-checks-pass-python-c", {}, 3, form="c")
    probe("all-checks-pass-without-cupy-rmm", {}, runs, form="no-site")
    probe("expected-driver-matches", {"GPU_PARITY_EXPECT_DRIVER": driver}, 3)
    probe("cuda-visible-devices-empty", {"CUDA_VISIBLE_DEVICES": ""}, runs)
    nvml_vs_cuda("cuda-visible-devices-empty", {"CUDA_VISIBLE_DEVICES": ""})
    nvml_vs_cuda("cuda-visible-devices-unset", {})
    nvidia_smi("nvidia-smi-L-cuda-visible-devices-empty", ["-L"], 3, {"CUDA_VISIBLE_DEVICES": ""})
    probe("cuda-visible-devices-bad-ordinal", {"CUDA_VISIBLE_DEVICES": "7"}, 3)
    probe(
        "cuda-visible-devices-unknown-uuid",
        {"CUDA_VISIBLE_DEVICES": "GPU-00000000-0000-0000-0000-000000000000"},
        3,
    )
    probe(
        "cuda-visible-devices-real-uuid", {"CUDA_VISIBLE_DEVICES": ok["summary"].get("uuid", "")}, 3
    )
    probe("wrong-expected-driver", {"GPU_PARITY_EXPECT_DRIVER": "570.86.15"}, 3)
    probe("image-cuda-newer-than-driver", {"GPU_PARITY_EXPECT_CUDA": "13.9"}, 3)
    probe("impossible-compute-capability", {"GPU_PARITY_MIN_COMPUTE_CAPABILITY": "99.0"}, 3)
    probe("nvidia-visible-devices-none", {"NVIDIA_VISIBLE_DEVICES": "none"}, 3)
    probe("free-memory-more-than-the-gpu", {"GPU_PARITY_MIN_FREE_MEMORY_MIB": "1000000"}, 3)
    args.out.write_text("".join(json.dumps(r) + "\n" for r in OUT))
    return 0


if __name__ == "__main__":
    sys.exit(main())
