"""Where a create's CPU goes, with and without admission: the API server's CPU profile and ours.

Usage, from the repository root (Go on the PATH for ``go tool pprof``; py-spy installed in the
environment for our side, else our side is left out):
    python -m benchmarks.admission_profile [--seconds 20] [--rounds 2] [--out DIR]

The same set-up as ``benchmarks.admission_latency`` (proving ground, one ``dask-gpu-parity run
--no-drift``, the namespaces of the ``none``, ``after`` and ``cel`` modes), with the API server
started ``--profiling=true`` (the proving ground turns it off; only this benchmark turns it on).
For each mode in turn, ``rounds`` times interleaved: one client creates GPU DaskClusters in a
closed loop while the API server's ``/debug/pprof/profile`` samples ``--seconds`` of its CPU
and, for ``after``, py-spy samples our process for the same time. Reported: per mode, the API
server's CPU per create split by what the samples were doing (a sample counts once, in the
first row whose pattern one of its frames matches), and the same for our process. The raw
profiles stay in ``--out`` for ``go tool pprof``.
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import re
import shutil
import ssl
import subprocess
import sys
import threading
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

from benchmarks.admission_latency import (
    MODES,
    ROOT,
    Bench,
    cpu_seconds,
    delete_all,
)
from provingground import ProvingGround, install_crds
from provingground.parity import ParityOperator

# The API server's samples, by phase: the first row one of a sample's frames matches.
APISERVER = (
    ("webhook: JSON Patch decode and apply", r"json-patch|jsonpatch"),
    ("webhook: request encode, call, answer decode", r"\(\*webhook\)\.Call|rest\.\(\*Request\)"),
    ("webhook: rest of the mutating dispatcher", r"mutating\.\(\*mutatingDispatcher\)"),
    ("webhook: validating dispatcher", r"validating\.\(\*validatingDispatcher\)"),
    ("HTTP client transport (webhook connections)", r"net/http\.\(\*persistConn\)"),
    ("admission policies (CEL) and match conditions", r"cel-go|/plugin/cel|/policy/|matchcondit"),
    ("field manager (managedFields)", r"fieldmanager|structured-merge-diff"),
    ("CRD schema: validation", r"kube-openapi/pkg/validation|apiserver/validation"),
    ("CRD schema: pruning, defaulting, CEL rules", r"structural|pruning|defaulting"),
    ("storage (etcd client, watch cache)", r"storage/etcd3|cacher|grpc|etcd/client"),
    ("decode request body", r"serializer/json|Decode|Unmarshal"),
    ("encode response", r"Encode|Marshal|responsewriters"),
    ("serving TLS", r"crypto/tls"),
    ("garbage collection", r"runtime\.gcBgMarkWorker|runtime\.bgsweep|runtime\.bgscavenge"),
    ("other", r""),
)
# Ours (py-spy's frames: "function (file:line)"): each sample in the row of its innermost frame
# that one of these matches. py-spy counts a thread that waits for a core as running (a socket
# write on loopback wakes the API server, which then often takes the core): the shares are of
# our samples, the milliseconds those shares of our process's CPU time from /proc.
OURS = (
    ("socket send and recv (waiting for a core counts here)", r"selector_events\.py"),
    ("TLS (ssl, asyncio's SSL protocol)", r"\(ssl\.py|sslproto\.py"),
    ("JSON", r"\(json/"),
    ("the rules (core)", r"dask_gpu_parity/core/"),
    ("admission: triage, decisions, answers", r"dask_gpu_parity/admission/(decide|runtime/server)"),
    ("metrics (prometheus_client and ours)", r"prometheus_client/|admission/runtime/metrics"),
    ("aiohttp", r"aiohttp/"),
    ("event loop: epoll", r"selectors\.py"),
    ("asyncio and the rest", r""),
)


def fetch_profile(bench: Bench, seconds: int, out: Path) -> threading.Thread:
    """Start sampling the API server's CPU for ``seconds`` in the background, into ``out``."""
    cp = bench.cp
    context = ssl.create_default_context(cafile=str(cp.ca_cert_path))
    context.load_cert_chain(cp.pki / "admin.crt", cp.pki / "admin.key")
    url = f"{cp.server}/debug/pprof/profile?seconds={seconds}"

    def get() -> None:
        with urllib.request.urlopen(url, context=context, timeout=seconds + 30) as response:
            out.write_bytes(response.read())

    thread = threading.Thread(target=get)
    thread.start()
    return thread


def load_until(bench: Bench, mode: str, done: threading.Thread) -> int:
    """One client's closed-loop creates in ``mode`` until ``done`` ends; how many returned."""
    kind, label = MODES[mode]
    namespace = bench.namespaces[label]
    creates = 0
    while done.is_alive():
        latencies, failures = asyncio.run(bench.load.run(namespace, kind, 1, 20))
        creates += len(latencies) + len(failures)
    return creates


def go_stacks(profile: Path) -> list[tuple[float, list[str]]]:
    """CPU seconds and frames (function names) of each sample, from ``go tool pprof -raw``."""
    text = subprocess.run(
        ["go", "tool", "pprof", "-raw", str(profile)], capture_output=True, text=True, check=True
    ).stdout
    names: dict[str, str] = {}
    for line in text.split("Locations", 1)[1].splitlines():
        match = re.match(r"\s*(\d+): 0x[0-9a-f]+ M=\d+ (\S+)", line)
        if match:
            names[match.group(1)] = match.group(2)
        elif line.strip() and names:
            last = list(names)[-1]  # inlined frames continue the location above
            names[last] += " " + line.split()[0]
    samples: list[tuple[float, list[str]]] = []
    body = text.split("Samples:", 1)[1].split("Locations", 1)[0]
    for line in body.splitlines()[2:]:
        parts = line.split(":", 1)
        if len(parts) != 2 or not parts[0].strip().split():
            continue
        values, locations = parts[0].split(), parts[1].split()
        samples.append((int(values[1]) / 1e9, [names.get(loc, loc) for loc in locations]))
    return samples


def py_stacks(raw: Path, rate: int) -> list[tuple[float, list[str]]]:
    """CPU seconds and frames of each py-spy stack (its ``--format raw``: collapsed stacks)."""
    samples = []
    for line in raw.read_text().splitlines():
        stack, _, count = line.rpartition(" ")
        if stack:
            samples.append((int(count) / rate, stack.split(";")))
    return samples


def innermost(
    samples: list[tuple[float, list[str]]], rows: tuple[tuple[str, str], ...]
) -> dict[str, float]:
    """Seconds per row: each sample in the row of its innermost frame that a pattern matches."""
    patterns = [(name, re.compile(pattern)) for name, pattern in rows if pattern]
    out: dict[str, float] = collections.defaultdict(float)
    for seconds, frames in samples:
        row = rows[-1][0]
        for frame in reversed(frames):  # py-spy's stacks run from the root to the leaf
            found = next((name for name, pattern in patterns if pattern.search(frame)), None)
            if found:
                row = found
                break
        out[row] += seconds
    return out


def split(
    samples: list[tuple[float, list[str]]], rows: tuple[tuple[str, str], ...]
) -> dict[str, float]:
    """Seconds per row: each sample in the first row one of whose frames its pattern matches."""
    patterns = [(name, re.compile(pattern)) for name, pattern in rows]
    out: dict[str, float] = collections.defaultdict(float)
    for seconds, frames in samples:
        joined = "\n".join(frames)
        for name, pattern in patterns:
            if pattern.search(joined):
                out[name] += seconds
                break
    return out


def table(
    title: str, rows: tuple[tuple[str, str], ...], per_mode: dict[str, dict[str, float]]
) -> list[str]:
    """ms per create per row and mode, with each mode's added over ``none``."""
    modes = list(per_mode)
    lines = [
        f"| {title} | " + " | ".join(modes) + "".join(f" | {m} - none" for m in modes[1:]) + " |",
        "| --- |" + " --- |" * (2 * len(modes) - 1),
    ]
    for name, _ in (*rows, ("all", "")):
        values = [
            sum(per_mode[m].values()) if name == "all" else per_mode[m].get(name, 0.0)
            for m in modes
        ]
        cells = [f"{v * 1000:.2f}" for v in values]
        cells += [f"{(v - values[0]) * 1000:+.2f}" for v in values[1:]]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


@dataclass
class Window:
    """One profiled window of one mode."""

    creates: int
    cpu: dict[str, float]  # CPU seconds per process, from /proc
    apiserver: dict[str, float]  # seconds per APISERVER row
    ours: dict[str, float]  # seconds per OURS row (empty without py-spy)


def window(
    bench: Bench, mode: str, stem: Path, args: argparse.Namespace, pyspy: str | None
) -> Window:
    """Profile the API server (and, for ``after``, our process) while one client creates."""
    assert bench.parity.process is not None
    pids = {
        "kube-apiserver": bench.cp.processes["kube-apiserver"].pid,
        "dask-gpu-parity": bench.parity.process.pid,
    }
    spy = None
    if mode == "after" and pyspy:
        spy = subprocess.Popen(
            [
                *(pyspy, "record", "--pid", str(pids["dask-gpu-parity"])),
                *("--duration", str(args.seconds), "--rate", str(args.rate)),
                *("--format", "raw", "--nonblocking", "--output", f"{stem}.pyspy.txt"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    start = {name: cpu_seconds(pid) for name, pid in pids.items()}
    profiling = fetch_profile(bench, args.seconds, stem.with_suffix(".pprof"))
    time.sleep(0.2)  # the profile has started
    made = load_until(bench, mode, profiling)
    cpu = {name: cpu_seconds(pid) - start[name] for name, pid in pids.items()}
    delete_all(bench.api, bench.namespaces[MODES[mode][1]])  # outside the CPU window
    ours: dict[str, float] = {}
    if spy is not None:
        spy.wait(timeout=args.seconds + 30)
        ours = innermost(py_stacks(Path(f"{stem}.pyspy.txt"), args.rate), OURS)
    apiserver = split(go_stacks(stem.with_suffix(".pprof")), APISERVER)
    return Window(made, cpu, apiserver, ours)


def summary(windows: dict[str, list[Window]], args: argparse.Namespace) -> list[str]:
    """The tables: ms per create per row, per mode."""
    creates = {m: sum(w.creates for w in ws) for m, ws in windows.items()}

    def per_create(mode: str, part: str) -> dict[str, float]:
        total: dict[str, float] = collections.defaultdict(float)
        for w in windows[mode]:
            for name, seconds in getattr(w, part).items():
                total[name] += seconds / creates[mode]
        return total

    lines = [
        f"Creates profiled: {', '.join(f'{m} {n}' for m, n in creates.items())} (1 client, "
        f"{args.rounds} x {args.seconds} s each, interleaved).",
        "",
        "kube-apiserver CPU per create (ms; profile samples):",
        "",
        *table("kube-apiserver", APISERVER, {m: per_create(m, "apiserver") for m in windows}),
        "",
        "CPU per create from /proc over the same windows (ms): "
        + "; ".join(
            f"{m}: kube-apiserver "
            f"{sum(w.cpu['kube-apiserver'] for w in ws) / creates[m] * 1000:.2f}, "
            f"dask-gpu-parity {sum(w.cpu['dask-gpu-parity'] for w in ws) / creates[m] * 1000:.2f}"
            for m, ws in windows.items()
        ),
    ]
    samples = per_create("after", "ours")
    if samples:
        ours = sum(w.cpu["dask-gpu-parity"] for w in windows["after"]) / creates["after"]
        total = sum(samples.values())
        lines += [
            "",
            "dask-gpu-parity in `after`: py-spy's samples by the innermost frame, and that "
            f"share of the process's CPU per create from /proc ({ours * 1000:.2f} ms):",
            "",
            "| dask-gpu-parity | samples | ms per create |",
            "| --- | --- | --- |",
            *(
                f"| {name} | {samples.get(name, 0.0) / total:.0%} | "
                f"{samples.get(name, 0.0) / total * ours * 1000:.2f} |"
                for name, _ in OURS
            ),
        ]
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=int, default=20, help="per profile")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--rate", type=int, default=200, help="py-spy samples per second")
    parser.add_argument("--out", type=Path, default=ROOT / ".run" / "profile-admission")
    parser.add_argument("--run-dir", type=Path, default=ROOT / ".run" / "bench-admission")
    args = parser.parse_args(argv)
    pyspy = shutil.which("py-spy", path=str(Path(sys.executable).parent)) or shutil.which("py-spy")
    if shutil.which("go") is None:
        print("go is not on the PATH: go tool pprof reads the API server's profiles")
        return 2
    for path in (args.run_dir, args.out):
        if path.exists():
            shutil.rmtree(path)
    args.out.mkdir(parents=True)
    modes = ["none", "after", "cel"]
    windows: dict[str, list[Window]] = {m: [] for m in modes}
    ground = ProvingGround(args.run_dir, dask_operator=False)
    ground.control_plane.extra_args["kube-apiserver"] = ["--profiling=true"]
    with ground:
        assert ground.api is not None
        install_crds(ground.control_plane.kubectl)
        parity = ParityOperator(
            ground.control_plane, ground.api, ground.control_plane.logs, drift=False
        ).start(webhooks=False)
        bench = Bench(ground, parity)
        bench.ready()
        bench.warm_up()
        for round_ in range(args.rounds):
            for mode in modes[round_ % 3 :] + modes[: round_ % 3]:
                done = window(bench, mode, args.out / f"{mode}-{round_}", args, pyspy)
                windows[mode].append(done)
                print(f"round {round_} {mode}: {done.creates} creates", flush=True)
        parity.uninstall()
    lines = summary(windows, args)
    print("\n".join(lines))
    (args.out / "summary.md").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
