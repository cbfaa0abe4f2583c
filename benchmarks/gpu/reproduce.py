"""Reproduce on a real GPU how a Dask scheduler without a GPU breaks GPU workloads.

The figures are recorded in docs/verification.md §2.

For each protocol (tcp, ucx) and each scheduler (started with CUDA_VISIBLE_DEVICES="" as RAPIDS'
old guidance says, or with the GPU), start a real `dask scheduler` and one `dask worker` with the
GPU, then run two client workloads in their own processes, each bounded by a timeout:

- graph:  da.arange(1000, chunks=100, like=cupy.arange(10)).sum().compute() (GPU objects in graph)
- gather: a task returns a CuPy array, gathered through the scheduler (client.gather(direct=False))

Before each cluster starts, the gpu-parity-check probe runs with the scheduler's exact environment,
to show it fails first, fast, naming the cause. One JSON line per result on stdout and in --out;
the processes' logs go to --logs.

Usage (repository root, GPU machine, dask + distributed + distributed-ucxx-cu13 + cupy + rmm):
    python3 benchmarks/gpu/reproduce.py --out reproduce.jsonl --logs logs.txt [--hang-s 30]
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
PROBE = ROOT / "operator" / "dask_gpu_parity" / "probe.py"
RECORDS: list[dict[str, Any]] = []


def emit(record: dict[str, Any]) -> None:
    RECORDS.append(record)
    print(json.dumps(record), flush=True)


def client_main(workload: str, address: str, fake_gpu: bool) -> int:
    """One workload in this process; prints one JSON line (the parent bounds the time)."""
    t0 = time.perf_counter()
    result: dict[str, Any] = {"workload": workload}
    try:
        if fake_gpu:  # CPU dry run of this script's logic: numpy stands in for cupy
            import numpy as xp
        else:
            import cupy as xp
        import dask.array as da
        from distributed import Client

        with Client(address, timeout=30) as client:
            if workload == "graph":
                x = da.arange(1000, chunks=100, like=xp.arange(10))
                value = x.sum().compute()
            else:
                future = client.submit(lambda: xp.arange(10), pure=False)
                value = client.gather(future, direct=False).sum()
            result.update(ok=True, value=int(value), type=type(value).__module__)
    except BaseException as exc:  # report everything, including KeyboardInterrupt
        first = (str(exc).strip().splitlines() or [""])[0][:400]
        result.update(ok=False, error=f"{type(exc).__name__}: {first}")
    result["seconds"] = round(time.perf_counter() - t0, 2)
    print(json.dumps(result), flush=True)
    return 0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start(cmd: list[str], env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    handle = log.open("wb")
    return subprocess.Popen(
        cmd, env=env, stdout=handle, stderr=subprocess.STDOUT, start_new_session=True
    )


def wait_for(log: Path, text: str, proc: subprocess.Popen[bytes], timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if text in log.read_text(errors="replace"):
            return True
        if proc.poll() is not None:
            return False
        time.sleep(0.2)
    return False


def stop(proc: subprocess.Popen[bytes]) -> None:
    for sig, wait in ((signal.SIGTERM, 10), (signal.SIGKILL, 5)):
        if proc.poll() is not None:
            return
        try:
            os.killpg(proc.pid, sig)
            proc.wait(wait)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            pass


def interesting(text: str) -> list[str]:
    keys = (
        "rror",
        "cuda",
        "CUDA",
        "Couldn't gather",
        "lost dependencies",
        "Traceback",
        "FutureWarning",
    )
    seen: dict[str, str] = {}  # distinct lines, timestamps aside: a hang repeats one line forever
    for ln in text.splitlines():
        if any(k in ln for k in keys):
            seen.setdefault(ln.split(" - ", 1)[-1].strip(), ln.strip()[:300])
    return list(seen.values())[:16]


def run_probe(env: dict[str, str], label: str) -> None:
    t0 = time.perf_counter()
    try:
        done = subprocess.run(
            [sys.executable, "-I", str(PROBE)],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        summary = json.loads(done.stdout.splitlines()[0]) if done.stdout.strip() else {}
        code: int | None = done.returncode
    except subprocess.TimeoutExpired:
        summary, code = {}, None
    emit(
        {
            "kind": "probe-with-scheduler-env",
            "cluster": label,
            "exit_code": code,
            "process_wall_ms": round((time.perf_counter() - t0) * 1000, 1),
            "probe_wall_ms": summary.get("wall_ms"),
            "failed_check": summary.get("failed_check"),
            "reason": summary.get("reason"),
            "checks": summary.get("checks"),
        }
    )


def cluster(protocol: str, scheduler_gpu: bool, args: argparse.Namespace, logs: list[str]) -> None:
    label = f"{protocol}/scheduler-{'gpu' if scheduler_gpu else 'no-gpu'}"
    base = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}
    base["DASK_DISTRIBUTED__DIAGNOSTICS__NVML"] = os.environ.get(
        "DASK_DISTRIBUTED__DIAGNOSTICS__NVML", "True"
    )
    gpu_env = dict(base)
    if protocol == "ucx":  # dask-cuda's documented UCX setup: a CUDA context before UCX starts
        gpu_env["DASK_DISTRIBUTED_UCXX__CREATE_CUDA_CONTEXT"] = "True"
    sched_env = dict(gpu_env) if scheduler_gpu else {**base, "CUDA_VISIBLE_DEVICES": ""}
    run_probe({**sched_env, "GPU_PARITY_TERMINATION_LOG": "/tmp/gpu-parity-termination-log"}, label)

    port = free_port()
    address = f"{protocol}://127.0.0.1:{port}"
    tmp = Path(args.workdir)
    slog, wlog = (
        tmp / f"{protocol}-{scheduler_gpu}-scheduler.log",
        tmp / f"{protocol}-{scheduler_gpu}-worker.log",
    )
    py = sys.executable
    scheduler = start(
        [
            py,
            "-m",
            "distributed.cli.dask_scheduler",
            "--protocol",
            protocol,
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--no-dashboard",
        ],
        sched_env,
        slog,
    )
    worker = None
    try:
        if not wait_for(slog, "Scheduler at:", scheduler, 90):
            emit(
                {
                    "kind": "cluster",
                    "cluster": label,
                    "outcome": "scheduler did not start",
                    "scheduler_log": interesting(slog.read_text(errors="replace"))[-12:],
                }
            )
            return
        worker = start(
            [
                py,
                "-m",
                "distributed.cli.dask_worker",
                address,
                "--nthreads",
                "1",
                "--no-dashboard",
                "--memory-limit",
                "0",
                "--name",
                "gpu-worker",
            ],
            gpu_env,
            wlog,
        )
        if not wait_for(wlog, "Registered to:", worker, 90):
            emit(
                {
                    "kind": "cluster",
                    "cluster": label,
                    "outcome": "worker did not register",
                    "worker_log": interesting(wlog.read_text(errors="replace"))[-12:],
                }
            )
            return
        for workload in ("graph", "gather"):
            mark = len(slog.read_text(errors="replace"))
            wmark = len(wlog.read_text(errors="replace"))
            cmd = [py, str(Path(__file__).resolve()), "--client", workload, "--address", address]
            if args.fake_gpu:
                cmd.append("--fake-gpu")
            t0 = time.perf_counter()
            try:
                done = subprocess.run(
                    cmd,
                    env=gpu_env,
                    capture_output=True,
                    text=True,
                    timeout=args.hang_s,
                    check=False,
                )
                lines = [ln for ln in done.stdout.splitlines() if ln.startswith("{")]
                res = (
                    json.loads(lines[-1])
                    if lines
                    else {"ok": False, "error": f"client exited {done.returncode}"}
                )
                outcome = "ok" if res.get("ok") else "fails"
                client_err = done.stderr
            except subprocess.TimeoutExpired as exc:
                res, outcome = {}, f"hung > {args.hang_s:g} s"
                client_err = (
                    (exc.stderr or b"").decode(errors="replace")
                    if isinstance(exc.stderr, bytes)
                    else (exc.stderr or "")
                )
            emit(
                {
                    "kind": "case",
                    "cluster": label,
                    "protocol": protocol,
                    "scheduler_gpu": scheduler_gpu,
                    "workload": workload,
                    "outcome": outcome,
                    "seconds": round(time.perf_counter() - t0, 2),
                    "result": res,
                    "client_log": interesting(client_err)[-8:],
                    "scheduler_log": interesting(slog.read_text(errors="replace")[mark:])[:10],
                    "worker_log": interesting(wlog.read_text(errors="replace")[wmark:])[:6],
                }
            )
    finally:
        for proc in (worker, scheduler):
            if proc is not None:
                stop(proc)
        for log in (slog, wlog):
            if log.exists():
                text = log.read_text(errors="replace")
                if len(text) > 30000:  # keep the start (the first error) and the end
                    text = (
                        f"{text[:22000]}\n[... {len(text) - 30000} characters ...]\n{text[-8000:]}"
                    )
                logs.append(f"===== {label}: {log.name}\n{text}")


def versions() -> dict[str, str]:
    found = {}
    for name in (
        "dask",
        "distributed",
        "distributed_ucxx",
        "ucxx",
        "rmm",
        "cupy",
        "numpy",
        "cuda.core",
    ):
        try:
            mod = __import__(name, fromlist=["_"])
            found[name] = str(getattr(mod, "__version__", "?"))
        except Exception as exc:
            found[name] = f"not importable: {type(exc).__name__}: {str(exc)[:200]}"
    return found


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path)
    parser.add_argument("--logs", type=Path)
    parser.add_argument("--hang-s", type=float, default=30.0)
    parser.add_argument("--protocols", default="tcp,ucx")
    parser.add_argument("--workdir", default="/tmp/gpu-parity-repro")
    parser.add_argument(
        "--fake-gpu", action="store_true", help="CPU dry run: numpy instead of cupy"
    )
    parser.add_argument("--client", choices=["graph", "gather"])
    parser.add_argument("--address")
    args = parser.parse_args()
    if args.client:
        return client_main(args.client, args.address, args.fake_gpu)
    Path(args.workdir).mkdir(parents=True, exist_ok=True)
    emit({"kind": "versions", **versions()})
    logs: list[str] = []
    try:
        for protocol in args.protocols.split(","):
            for scheduler_gpu in (False, True):
                try:
                    cluster(protocol, scheduler_gpu, args, logs)
                except Exception as exc:
                    emit(
                        {
                            "kind": "cluster",
                            "cluster": f"{protocol}/{scheduler_gpu}",
                            "outcome": f"script error: {type(exc).__name__}: {exc}",
                        }
                    )
    finally:
        if args.out:
            args.out.write_text("".join(json.dumps(r) + "\n" for r in RECORDS))
        if args.logs:
            args.logs.write_text("\n".join(logs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
