"""Create latency of DaskClusters through the real kube-apiserver, with and without our webhooks.

Usage, from the repository root:
    python -m benchmarks.admission_latency [--rounds 5] [--concurrency 1,10,50]
        [--requests 200,400,1000] [--write docs/performance.md]

On the proving ground (no dask operator: pure admission; the GPU node pools feed the inventory),
with ``dask-gpu-parity run --no-drift`` on the host and its webhooks applied (failurePolicy Fail).
Four kinds of run, in the same process against the same API server, interleaved (the order
rotates every round), closed loop (each of N clients sends its next create when the last one
returned), each create a distinct GPU DaskCluster (examples/gpu-cluster-tcp.yaml with a unique
name and a unique worker env value, so no cache can answer for the rules):

* (a) as written, no webhooks: a namespace labelled ``gpuparity.dask.org/skip=true``, which the
  webhooks' namespaceSelector excludes, so the API server never calls us;
* (b) as written, our webhooks: a plain namespace; mutate-daskcluster fixes it (the stored
  object grows from 2 to 25 kB: the verifier embeds the probe's source), validate-daskcluster
  checks the result. **(b) - (a) is what our webhooks add.**
* (c) already fixed (what ``dask-gpu-parity fix`` writes into Git), no webhooks;
* (d) already fixed, our webhooks: both webhooks run every rule and change nothing.
  (c) - (a) is the cost of the bigger object alone, (d) - (c) the webhook calls alone.

Reported per level: the median over rounds of each run's p50 and p99, and every failed request
(non-201 or exception). Server side: the API server's own view of each webhook call
(``apiserver_admission_webhook_admission_duration_seconds``, mean), our handler alone
(``dgp_admission_duration_seconds``: mean and bucket-interpolated p50/p99), sequential direct
POSTs of the AdmissionReview the API server sends (TLS over loopback, keep-alive: handler + kopf +
HTTP), and the CPU time per create of our operator, kube-apiserver and etcd, by kind of run (on a
saturated machine, latency is clients / throughput, and throughput is cores / CPU per create).
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import datetime as dt
import json
import os
import platform
import shutil
import ssl
import statistics
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import aiohttp
import yaml
from kubernetes import client

from dask_gpu_parity.core.engine import evaluate
from dask_gpu_parity.core.inventory import Inventory
from provingground import ProvingGround, install_crds, node_manifests
from provingground.parity import ParityOperator

ROOT = Path(__file__).resolve().parents[1]

MODES = {  # mode -> (manifest, webhooks called)
    "a": ("as written", False),
    "b": ("as written", True),
    "c": ("fixed", False),
    "d": ("fixed", True),
}
WEBHOOKS = ("mutate-daskcluster", "validate-daskcluster")
PROCESSES = ("dask-gpu-parity", "kube-apiserver", "etcd")  # whose CPU time is counted
DASK = ("kubernetes.dask.org", "v1")
SKIP_LABEL = "gpuparity.dask.org/skip=true"
Samples = dict[str, list[tuple[float, float]]]


def quantile(values: list[float], q: float) -> float:
    """Nearest-rank quantile."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered) + 0.5) - 1))]


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f}"


def fixed(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` as the webhook leaves it on the proving ground (same node inventory)."""
    inventory = Inventory.from_nodes(list(node_manifests()))
    result: dict[str, Any] = evaluate(doc, None, inventory).patched
    return result


class Load:
    """Closed-loop DaskCluster creates against the API server (aiohttp, one connection each)."""

    def __init__(self, ground: ProvingGround) -> None:
        cp = ground.control_plane
        self.server = cp.server
        self.context = ssl.create_default_context(cafile=str(cp.ca_cert_path))
        self.context.load_cert_chain(cp.pki / "admin.crt", cp.pki / "admin.key")
        written = yaml.safe_load((ROOT / "examples" / "gpu-cluster-tcp.yaml").read_text())
        self.templates = {"as written": written, "fixed": fixed(written)}
        self.seq = 0

    def body(self, namespace: str, manifest: str) -> bytes:
        self.seq += 1
        doc = copy.deepcopy(self.templates[manifest])
        doc["metadata"] = {"name": f"bench-{self.seq}", "namespace": namespace}
        worker = doc["spec"]["worker"]["spec"]["containers"][0]
        worker["env"].append({"name": "BENCH_ID", "value": f"{self.seq}-{uuid.uuid4().hex}"})
        return json.dumps(doc).encode()

    async def run(
        self, namespace: str, manifest: str, clients: int, requests: int
    ) -> tuple[list[float], list[str]]:
        """``requests`` creates by ``clients`` concurrent clients: latencies (s) and failures."""
        url = f"{self.server}/apis/{DASK[0]}/{DASK[1]}/namespaces/{namespace}/daskclusters"
        bodies = [self.body(namespace, manifest) for _ in range(requests)]
        latencies: list[float] = []
        failures: list[str] = []
        connector = aiohttp.TCPConnector(ssl=self.context, limit=clients)
        timeout = aiohttp.ClientTimeout(total=60)
        headers = {"Content-Type": "application/json"}
        async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:

            async def worker() -> None:
                while bodies:
                    body = bodies.pop()
                    start = time.perf_counter()
                    try:
                        async with session.post(url, data=body, headers=headers) as response:
                            text = await response.read()
                            elapsed = time.perf_counter() - start
                    except (aiohttp.ClientError, TimeoutError) as exc:
                        failures.append(f"{type(exc).__name__}: {exc}")
                        continue
                    if response.status != 201:
                        failures.append(f"{response.status}: {text[:200]!r}")
                    else:
                        latencies.append(elapsed)

            await asyncio.gather(*(worker() for _ in range(clients)))
        return latencies, failures


def delete_all(api: client.ApiClient, namespace: str) -> None:
    custom = client.CustomObjectsApi(api)
    custom.delete_collection_namespaced_custom_object(*DASK, namespace, "daskclusters")
    deadline = time.monotonic() + 120
    while custom.list_namespaced_custom_object(*DASK, namespace, "daskclusters", limit=1)["items"]:
        if time.monotonic() > deadline:
            raise TimeoutError(f"DaskClusters in {namespace} not deleted within 120s")
        time.sleep(0.2)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (and its reaped children)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def samples(
    text: str, name: str, match: Callable[[dict[str, str]], bool]
) -> list[tuple[dict, float]]:
    """(labels, value) of Prometheus text samples named ``name`` whose labels ``match``."""
    out = []
    for line in text.splitlines():
        if not line.startswith(name + "{"):
            continue
        labels_text, value = line[len(name) + 1 :].rsplit("} ", 1)
        labels = dict(part.split("=", 1) for part in labels_text.split('",') if "=" in part)
        labels = {k: v.strip('"') for k, v in labels.items()}
        if match(labels):
            out.append((labels, float(value)))
    return out


class Counters:
    """Snapshots of what the API server and our operator count per webhook."""

    def __init__(self, ground: ProvingGround, parity: ParityOperator) -> None:
        self.cp, self.parity = ground.control_plane, parity

    def pids(self) -> dict[str, int]:
        assert self.parity.process is not None
        return {
            "dask-gpu-parity": self.parity.process.pid,
            "kube-apiserver": self.cp.processes["kube-apiserver"].pid,
            "etcd": self.cp.processes["etcd"].pid,
        }

    def snapshot(self) -> dict[str, Any]:
        api_text = self.cp.kubectl("get", "--raw", "/metrics").stdout
        ours = self.parity.metrics() or {}
        snap: dict[str, Any] = {"cpu": {n: cpu_seconds(pid) for n, pid in self.pids().items()}}
        for webhook in WEBHOOKS:
            full = f"{webhook}.gpuparity.dask.org"
            for kind in ("sum", "count"):
                found = samples(
                    api_text,
                    f"apiserver_admission_webhook_admission_duration_seconds_{kind}",
                    lambda labels, full=full: labels.get("name") == full,
                )
                snap[("api", webhook, kind)] = sum(v for _, v in found)
            buckets = {}
            for (name, labels), value in ours.items():
                labels_d = dict(labels)
                if labels_d.get("webhook") != webhook:
                    continue
                if name == "dgp_admission_duration_seconds_bucket":
                    buckets[float(labels_d["le"])] = value
                elif name == "dgp_admission_duration_seconds_sum":
                    snap[("ours", webhook, "sum")] = value
            snap[("ours", webhook, "buckets")] = buckets
        return snap


def histogram_stats(before: dict[float, float], after: dict[float, float]) -> dict[str, float]:
    """Count and bucket-interpolated p50/p99 of the observations between two snapshots."""
    delta = {le: after.get(le, 0.0) - before.get(le, 0.0) for le in after}
    total = delta.get(float("inf"), 0.0)
    stats = {"count": total}
    low, below = 0.0, 0.0
    for q in (0.5, 0.99):
        rank = q * total
        low, below = 0.0, 0.0
        for le in sorted(delta):
            if delta[le] >= rank:
                high = le if le != float("inf") else low
                stats[f"p{round(q * 100)}"] = low + (high - low) * (rank - below) / max(
                    delta[le] - below, 1e-9
                )
                break
            low, below = le, delta[le]
    return stats


def direct_posts(parity: ParityOperator, count: int) -> dict[str, tuple[float, float]]:
    """Sequential POSTs of real AdmissionReviews to our server: (p50, p99) per webhook."""
    written = yaml.safe_load((ROOT / "examples" / "gpu-cluster-tcp.yaml").read_text())
    objects = {"mutate-daskcluster": written, "validate-daskcluster": fixed(written)}
    conn = parity.connection()
    out = {}
    for webhook, template in objects.items():
        times = []
        for index in range(count):
            obj = copy.deepcopy(template)
            obj["metadata"] = {"name": f"direct-{index}", "namespace": "bench-direct"}
            obj["spec"]["worker"]["spec"]["containers"][0]["env"].append(
                {"name": "BENCH_ID", "value": uuid.uuid4().hex}
            )
            review = {
                "apiVersion": "admission.k8s.io/v1",
                "kind": "AdmissionReview",
                "request": {
                    "uid": str(uuid.uuid4()),
                    "kind": {"group": DASK[0], "version": DASK[1], "kind": "DaskCluster"},
                    "resource": {"group": DASK[0], "version": DASK[1], "resource": "daskclusters"},
                    "operation": "CREATE",
                    "userInfo": {"username": "bench"},
                    "namespace": "bench-direct",
                    "name": obj["metadata"]["name"],
                    "object": obj,
                    "dryRun": False,
                },
            }
            body = json.dumps(review).encode()
            start = time.perf_counter()
            status, raw = parity.post(f"/{webhook}", body, conn=conn)
            times.append(time.perf_counter() - start)
            if status != 200 or not json.loads(raw)["response"]["allowed"]:
                raise RuntimeError(f"Direct POST to /{webhook} failed: {status} {raw[:300]!r}")
        out[webhook] = (quantile(times, 0.5), quantile(times, 0.99))
    conn.close()
    return out


def report(setup: dict[str, Any], levels: dict[int, Samples], totals: dict[str, Any]) -> str:
    def med(clients: int, mode: str, index: int) -> float:
        return statistics.median(run[index] for run in levels[clients][mode])

    lines = [
        "## Admission latency",
        "",
        f"Measured {setup['date']} on {setup['machine']}, shared with other work; Kubernetes "
        "v1.36.3 proving ground (etcd, kube-apiserver, kwok GPU node pools; no dask operator: "
        "pure admission), `dask-gpu-parity run --no-drift` on the same host.",
        "",
        "```bash",
        setup["command"],
        "```",
        "",
        "Closed loop: N clients each create distinct GPU DaskClusters "
        "(`examples/gpu-cluster-tcp.yaml`, unique name and worker env) through the real "
        "kube-apiserver as fast as it answers. (a) as written, in a namespace the webhooks' "
        "`namespaceSelector` excludes, so no webhook is called; (b) as written, our webhooks "
        "called (mutate fixes it, validate checks the result); (c) the already fixed manifest "
        "(what `dask-gpu-parity fix` writes into Git), no webhooks; (d) the fixed manifest, our "
        "webhooks called (nothing to change). Runs interleave a, b, c, d in one process (order "
        f"rotating per round); every cell is the median over {setup['rounds']} rounds of that "
        "run's percentile, in ms.",
        "",
        "| clients | creates/run | (a) p50 | (b) p50 | **added p50** (b-a) | (a) p99 | (b) p99 "
        "| **added p99** (b-a) | target |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for clients in levels:
        a50, b50, a99, b99 = (
            med(clients, m, i) for i, m in ((0, "a"), (0, "b"), (1, "a"), (1, "b"))
        )
        target = ""
        if clients == max(levels):
            met = b50 - a50 <= 0.003 and b99 - a99 <= 0.015
            target = "≤ 3 / ≤ 15: **met**" if met else "≤ 3 / ≤ 15: **missed**"
        lines.append(
            f"| {clients} | {setup['requests'][clients]} | {ms(a50)} | {ms(b50)} | "
            f"**{ms(b50 - a50)}** | {ms(a99)} | {ms(b99)} | **{ms(b99 - a99)}** | {target} |"
        )
    lines += [
        "",
        "Where the added time goes (p50, ms): the fixed object is 12 times bigger (the verifier "
        "embeds the probe's source), which costs the API server and etcd even without webhooks "
        "(c-a); calling both webhooks when there is nothing to change (d-c); mutating (b-d).",
        "",
        "| clients | (c) p50 | (d) p50 | bigger object (c-a) | webhook calls (d-c) "
        "| mutation (b-d) |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for clients in levels:
        a, b, c, d = (med(clients, m, 0) for m in "abcd")
        lines.append(f"| {clients} | {ms(c)} | {ms(d)} | {ms(c - a)} | {ms(d - c)} | {ms(b - d)} |")
    failed = totals["failed"]
    lines += [
        "",
        f"Creates: {sum(totals['count'].values())} in all; **failed: "
        f"{sum(failed.values())}** ({', '.join(f'{m}: {n}' for m, n in failed.items())}).",
        "",
        "Server side, per webhook call (ms; means over all webhook runs, b and d):",
        "",
        "| webhook | as the API server sees it (mean) | our handler (mean; p50 / p99 from the "
        "histogram buckets) | direct POST p50 / p99 (TLS, loopback, sequential) |",
        "| --- | --- | --- | --- |",
    ]
    for webhook in WEBHOOKS:
        api_mean, ours_mean, hist = (
            totals["api"][webhook],
            totals["ours"][webhook],
            totals["hist"][webhook],
        )
        d50, d99 = totals["direct"][webhook]
        lines.append(
            f"| {webhook} | {ms(api_mean)} | {ms(ours_mean)}; {ms(hist['p50'])} / "
            f"{ms(hist['p99'])} | {ms(d50)} / {ms(d99)} |"
        )
    cpu = totals["cpu"]
    lines += [
        "",
        "CPU time per create (ms; each process's user + system time over all runs of a kind, "
        "divided by their creates; the machine's other work is not in it):",
        "",
        "| process | (a) | (b) | (c) | (d) | **added by our webhooks** (b-a) |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for name in (*PROCESSES, "all three"):
        row = [sum(cpu[m].values()) if name == "all three" else cpu[m][name] for m in MODES]
        cells = " | ".join(f"{v * 1000:.1f}" for v in row)
        lines.append(f"| {name} | {cells} | **{(row[1] - row[0]) * 1000:.1f}** |")
    lines.append("")
    return "\n".join(lines)


def write_section(path: Path, section: str) -> None:
    """Replace the "## Admission latency" section of ``path`` (or append it)."""
    text = path.read_text() if path.exists() else "# Performance\n"
    start = text.find("## Admission latency")
    if start == -1:
        text = text.rstrip("\n") + "\n\n" + section
    else:
        end = text.find("\n## ", start + 1)
        text = text[:start] + section + ("" if end == -1 else "\n" + text[end + 1 :])
    path.write_text(text.rstrip("\n") + "\n")


class Bench:
    """The proving ground, our operator, one namespace per mode, and what was measured."""

    def __init__(self, ground: ProvingGround, parity: ParityOperator) -> None:
        self.api = ground.api
        self.load = Load(ground)
        self.counters = Counters(ground, parity)
        self.namespaces = {mode: f"bench-{mode}" for mode in MODES}
        cp = ground.control_plane
        for mode, (_, hooked) in MODES.items():
            cp.kubectl("create", "namespace", self.namespaces[mode])
            if not hooked:
                cp.kubectl("label", "namespace", self.namespaces[mode], SKIP_LABEL)
        self.failed = dict.fromkeys(MODES, 0)
        self.count = dict.fromkeys(MODES, 0)
        self.cpu = {mode: dict.fromkeys(PROCESSES, 0.0) for mode in MODES}  # seconds
        self.api_sum = {w: [0.0, 0.0] for w in WEBHOOKS}  # seconds, calls
        self.ours_sum = dict.fromkeys(WEBHOOKS, 0.0)

    def warm_up(self) -> None:
        """Connections, caches and lazy imports, on every path."""
        for mode, (manifest, _) in MODES.items():
            asyncio.run(self.load.run(self.namespaces[mode], manifest, 10, 100))
            delete_all(self.api, self.namespaces[mode])

    def run(self, mode: str, clients: int, requests: int) -> tuple[float, float]:
        """One closed-loop run; returns (p50, p99) and accumulates the counters."""
        manifest, hooked = MODES[mode]
        before = self.counters.snapshot()
        lat, failed = asyncio.run(self.load.run(self.namespaces[mode], manifest, clients, requests))
        after = self.counters.snapshot()
        for name in PROCESSES:
            self.cpu[mode][name] += after["cpu"][name] - before["cpu"][name]
        if hooked:
            for w in WEBHOOKS:
                self.api_sum[w][0] += after[("api", w, "sum")] - before[("api", w, "sum")]
                self.api_sum[w][1] += after[("api", w, "count")] - before[("api", w, "count")]
                self.ours_sum[w] += after[("ours", w, "sum")] - before[("ours", w, "sum")]
        self.failed[mode] += len(failed)
        self.count[mode] += requests
        for failure in failed[:3]:
            print(f"  failed ({mode}): {failure}", flush=True)
        delete_all(self.api, self.namespaces[mode])
        if not lat:
            raise RuntimeError(f"Every create of run ({mode}) failed")
        return quantile(lat, 0.5), quantile(lat, 0.99)


def measure(
    bench: Bench, levels_list: list[int], requests: dict[int, int], rounds: int
) -> dict[int, Samples]:
    """Every level, ``rounds`` times each mode, the order rotating every round."""
    levels: dict[int, Samples] = {}
    order = list(MODES)
    for clients in levels_list:
        levels[clients] = {mode: [] for mode in MODES}
        for round_ in range(rounds):
            for mode in order[round_ % 4 :] + order[: round_ % 4]:
                p50, p99 = bench.run(mode, clients, requests[clients])
                levels[clients][mode].append((p50, p99))
                manifest, hooked = MODES[mode]
                print(
                    f"clients={clients:>3} round={round_} ({mode}) {manifest:>10}, "
                    f"{'webhooks' if hooked else 'no webhooks':>11}: "
                    f"p50 {ms(p50)} ms  p99 {ms(p99)} ms",
                    flush=True,
                )
    return levels


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--concurrency", default="1,10,50")
    parser.add_argument("--requests", default="200,400,1000", help="creates per run, per level")
    parser.add_argument("--direct", type=int, default=500, help="direct POSTs per webhook")
    parser.add_argument("--run-dir", type=Path, default=ROOT / ".run" / "bench-admission")
    parser.add_argument("--write", type=Path, help="put the section into this Markdown file")
    args = parser.parse_args(argv)
    levels_list = [int(c) for c in args.concurrency.split(",")]
    requests = dict(zip(levels_list, (int(r) for r in args.requests.split(",")), strict=True))
    if args.run_dir.exists():
        shutil.rmtree(args.run_dir)
    words = sys.argv[1:] if argv is None else argv
    setup = {
        "date": dt.date.today().isoformat(),
        "machine": f"{os.cpu_count()} CPUs ({platform.machine()}), "
        f"Python {platform.python_version()}",
        "command": " ".join(["python -m benchmarks.admission_latency", *words]),
        "requests": requests,
        "rounds": args.rounds,
    }
    with ProvingGround(args.run_dir, dask_operator=False) as ground:
        assert ground.api is not None
        install_crds(ground.control_plane.kubectl)
        parity = ParityOperator(ground.control_plane, ground.api, ground.control_plane.logs,
                                drift=False).start()  # fmt: skip
        print(f"dask-gpu-parity ready in {parity.ready_seconds:.1f}s", flush=True)
        ground.control_plane.kubectl("create", "namespace", "bench-direct")
        bench = Bench(ground, parity)
        bench.warm_up()
        first = bench.counters.snapshot()
        levels = measure(bench, levels_list, requests, args.rounds)
        last = bench.counters.snapshot()
        totals: dict[str, Any] = {
            "failed": bench.failed,
            "count": bench.count,
            "api": {w: s / max(n, 1) for w, (s, n) in bench.api_sum.items()},
            "ours": {w: bench.ours_sum[w] / max(bench.api_sum[w][1], 1) for w in WEBHOOKS},
            "hist": {
                w: histogram_stats(first[("ours", w, "buckets")], last[("ours", w, "buckets")])
                for w in WEBHOOKS
            },
            "cpu": {
                mode: {name: s / max(bench.count[mode], 1) for name, s in by_name.items()}
                for mode, by_name in bench.cpu.items()
            },
            "direct": direct_posts(parity, args.direct),
        }
        parity.uninstall()
    section = report(setup, levels, totals)
    print("\n" + section)
    if args.write:
        write_section(args.write, section)
        print(f"Wrote the section into {args.write}")
    return 0 if not sum(bench.failed.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
