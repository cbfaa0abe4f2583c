"""The operator at fleet scale: ready with a full inventory, first drift pass, memory, latency.

Usage: python -m benchmarks.scale [--sizes 500/100/1000,2000/400/4000,5000/1000/10000]
       [--modes no-drift,drift|none] [--dra SHARE] [--profile DIR] [--operator-path DIR]
       [--write FILE]

One proving ground (no dask operator) grows through the sizes, each GPU/CPU/CLUSTERS: GPU nodes
in three driver classes (55 % 580.95.05 / CUDA 13.0, 35 % 570.172.08 / 12.8, 10 % 550.163.01 /
12.4, as in the baseline), CPU nodes, and GPU DaskClusters in 5 namespaces, each with the
scheduler Deployment dask-kubernetes builds for it (``replicas: 0``: no pods). Every cluster
was created without our webhooks, so every one lacks parity. kwok renews node leases every
1,200 s and kube-controller-manager waits 900 s before calling a node unreachable
(docs/performance.md: with the default 40 s, thousands of kwok nodes never settle on 2 cores);
its Deployment and ReplicaSet controllers are off (10,000 scheduler Deployments with no pods
would only keep it busy).

At each size, ``dask-gpu-parity run`` is started once per mode (``--no-drift``: a webhook
replica; ``drift``: the drift watch too), its webhooks applied before it starts
(failurePolicy Fail, timeout 10 s), and measured from the moment it is spawned:

* ready: ``/readyz`` 200 (where the operator has one) and TLS accepted;
* full inventory: the first dry-run create of the UCX example through the API server denied
  with DGP013 counting every GPU node ("none of the N GPU nodes"); answers that count fewer are
  counted as partial (there must be none);
* drift first pass: ``dgp_drift_first_pass_seconds`` appearing, and the last of the N
  "lacks GPU parity" log lines (the measure that also works for operators without the metric);
* memory: VmRSS and VmHWM from /proc, every 0.5 s; steady is the last sample, once the first
  pass is done and 5 s have passed;
* admission p50 at 1 client: 100 creates of the example TCP cluster with our webhooks, and 100
  in a namespace the webhooks skip, alternating;
* /metrics: scraped without pause from its first answer to the end, while 50 GPU nodes are
  added and removed; every scrape that fails (not 200, not parseable) is counted.

``--dra SHARE`` (0 to 1; default 0) puts that share of each driver class's GPU nodes on NVIDIA's
DRA driver: no ``nvidia.com/gpu`` capacity, no GFD labels, their GPUs published as one
ResourceSlice per node (``provingground.dra``; 1: a pure-DRA fleet, 0.5: a fleet half migrated).
Set-up then also reports how long the slices took to create, their size as JSON, and etcd's
database growth. ``--modes none`` builds the fleet and measures no operator.

``--profile DIR`` runs py-spy on the operator from start to the end of its first pass and writes
the collapsed stacks and a summary of where the time went. ``--operator-path DIR`` runs the
operator from another checkout's ``operator/`` (e.g. a worktree of an older commit: before and
after).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import datetime as dt
import json
import os
import re
import signal
import ssl
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
from dask_kubernetes.operator.controller import controller
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from benchmarks import results
from benchmarks.procfs import proc_status
from provingground import (
    POOL_LABEL,
    POOLS,
    ComponentError,
    ControlPlane,
    api_client,
    create_nodes,
    install_crds,
)
from provingground.dra import publish_pools, resource_slice
from provingground.kubeconfig import get
from provingground.nodes import node_is_schedulable
from provingground.parity import ParityOperator, example
from provingground.pools import Pool, node_manifest

ROOT = Path(__file__).resolve().parents[1]

DASK = ("kubernetes.dask.org", "v1")
CLASSES = (  # (pool name, share of GPU nodes, driver, cuda)
    ("fleet-a100", 55, "580.95.05", "13.0"),
    ("fleet-h100", 35, "570.172.08", "12.8"),
    ("fleet-old", 10, "550.163.01", "12.4"),
)
NAMESPACES = [f"fleet-{i}" for i in range(5)]
BENCH_NS, SKIP_NS = "bench-admission", "bench-skip"
MARK_START, MARK_END = "<!-- scale:start -->", "<!-- scale:end -->"
DRIFT_LINE = re.compile(r"lacks GPU parity")
SCRAPE_SECONDS = 0.25  # 60 to 120 times Prometheus' usual rate


@dataclasses.dataclass(frozen=True)
class Size:
    gpu: int
    cpu: int
    clusters: int

    def __str__(self) -> str:
        return f"{self.gpu:,} GPU + {self.cpu:,} CPU nodes, {self.clusters:,} DaskClusters"


def parse_sizes(text: str) -> list[Size]:
    sizes = []
    for part in text.split(","):
        gpu, cpu, clusters = (int(x) for x in part.split("/"))
        sizes.append(Size(gpu, cpu, clusters))
    return sorted(sizes, key=lambda s: (s.gpu, s.clusters))


def gpu_pools(size: Size, dra: float = 0.0) -> list[Pool]:
    counts = [size.gpu * share // 100 for _, share, _, _ in CLASSES]
    counts[0] += size.gpu - sum(counts)
    base = {"fleet-a100": "a100", "fleet-h100": "h100", "fleet-old": "a100"}
    return [
        dataclasses.replace(POOLS[base[name]], name=name, size=n, driver=driver, cuda=cuda, dra=dra)
        for (name, _, driver, cuda), n in zip(CLASSES, counts, strict=True)
    ]


# -- the proving ground, grown ---------------------------------------------------------------


def start_ground(run_dir: Path) -> ControlPlane:
    cp = ControlPlane(
        run_dir,
        extra_args={
            "kwok": ["--node-lease-duration-seconds=1200"],
            "kube-controller-manager": [
                "--node-monitor-grace-period=900s",
                "--controllers=*,-deployment-controller,-replicaset-controller",
            ],
        },
        start_timeout=120,
    )
    cp.start()
    install_crds(cp.kubectl)
    cp.kubectl("apply", "-f", str(ROOT / "crds"))
    for ns in [*NAMESPACES, BENCH_NS]:
        cp.kubectl("create", "namespace", ns)
    cp.kubectl("create", "namespace", SKIP_NS)
    cp.kubectl("label", "namespace", SKIP_NS, "gpuparity.dask.org/skip=true")
    return cp


def etcd_db_bytes(cp: ControlPlane) -> int:
    """etcd's database size (``etcd_mvcc_db_total_size_in_bytes``)."""
    text = get(f"http://127.0.0.1:{cp.ports.etcd}/metrics", timeout=10)[1].decode()
    (line,) = [x for x in text.splitlines() if x.startswith("etcd_mvcc_db_total_size_in_bytes ")]
    return int(float(line.split()[1]))


def first_dra_pod_seconds(api: client.ApiClient) -> float:
    """Seconds from creating a Pod with ``nvidia.com/gpu: 1`` to its binding to a DRA node.

    The scheduler makes and allocates its claim before it binds; the Pod is deleted afterwards.
    """
    core = client.CoreV1Api(api)
    body = {
        "metadata": {"name": "dra-probe"},
        "spec": {
            "containers": [
                {
                    "name": "main",
                    "image": "busybox",
                    "resources": {"limits": {"nvidia.com/gpu": "1"}},
                }
            ],
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists"}],
        },
    }
    started = time.monotonic()
    core.create_namespaced_pod(BENCH_NS, body)  # type: ignore[arg-type]  # a plain dict body
    try:
        while time.monotonic() - started < 300:
            pod = core.read_namespaced_pod("dra-probe", BENCH_NS)
            if pod.spec and pod.spec.node_name:
                return time.monotonic() - started
            time.sleep(0.1)
        return float("nan")
    finally:
        core.delete_namespaced_pod("dra-probe", BENCH_NS, grace_period_seconds=0)


def grow_slices(cp: ControlPlane, api: client.ApiClient, size: Size, dra: float) -> str:
    """Publish the DRA nodes' ResourceSlices; what it took, as a set-up line."""
    pools = gpu_pools(size, dra)
    wanted = [(p, i) for p in pools for i in range(p.size) if p.is_dra(i)]
    if not wanted:
        return ""
    json_bytes = sum(len(json.dumps(resource_slice(p, i, "0" * 36))) for p, i in wanted)
    db_before, rss_before = etcd_db_bytes(cp), cp.rss_bytes()
    started = time.monotonic()
    created = publish_pools(api, pools, concurrency=16)
    seconds = time.monotonic() - started
    db_after, rss_after = etcd_db_bytes(cp), cp.rss_bytes()
    first = first_dra_pod_seconds(api) if dra == 1 else float("nan")

    def rss(name: str) -> str:
        before, after = rss_before.get(name, 0) / 2**20, rss_after.get(name, 0) / 2**20
        return f"{name} RSS {before:.0f} -> {after:.0f} MiB"

    return (
        f"{created:,} ResourceSlices ({len(wanted):,} DRA nodes, "
        f"{sum(p.gpus for p, _ in wanted):,} GPUs) created in {seconds:.0f} s "
        f"({created / seconds:.0f}/s); {json_bytes / len(wanted) / 1024:.1f} KiB of JSON each, "
        f"{json_bytes / 2**20:.1f} MiB in all; etcd database {db_before / 2**20:.0f} -> "
        f"{db_after / 2**20:.0f} MiB; {rss('kube-apiserver')}, {rss('kube-scheduler')}; "
        f"a Pod with nvidia.com/gpu: 1 scheduled {first:.1f} s after its creation"
    )


def grow_nodes(api: client.ApiClient, size: Size, dra: float = 0.0) -> float:
    started = time.monotonic()
    pools = [
        *gpu_pools(size, dra),
        dataclasses.replace(POOLS["cpu"], name="fleet-cpu", size=size.cpu),
    ]
    manifests = [node_manifest(pool, i) for pool in pools for i in range(pool.size)]
    created = create_nodes(api, manifests, concurrency=16)
    print(f"  created {created} nodes in {time.monotonic() - started:.0f}s", flush=True)
    return time.monotonic() - started


def count_schedulable(api: client.ApiClient) -> tuple[int, int]:
    core = client.CoreV1Api(api)
    ready = total = 0
    token = None
    while True:
        page = core.list_node(limit=500, _continue=token, label_selector=POOL_LABEL)
        for node in page.items:
            total += 1
            ready += node_is_schedulable(node)
        token = page.metadata._continue if page.metadata else None
        if not token:
            return ready, total


def wait_schedulable(api: client.ApiClient, timeout: float) -> tuple[int, int, float]:
    started = time.monotonic()
    while True:
        ready, total = count_schedulable(api)
        waited = time.monotonic() - started
        if ready >= total or waited > timeout:
            return ready, total, waited
        print(f"  {ready}/{total} nodes schedulable after {waited:.0f}s", flush=True)
        time.sleep(15)


async def _post_all(cp: ControlPlane, items: list[tuple[str, dict[str, Any]]]) -> int:
    context = ssl.create_default_context(cafile=str(cp.ca_cert_path))
    context.load_cert_chain(cp.pki / "admin.crt", cp.pki / "admin.key")
    connector = aiohttp.TCPConnector(ssl=context, limit=32)
    headers = {"Content-Type": "application/json"}
    created = 0
    async with aiohttp.ClientSession(connector=connector) as session:

        async def worker() -> None:
            nonlocal created
            while items:
                path, body = items.pop()
                for attempt in range(5):
                    async with session.post(cp.server + path, json=body, headers=headers) as r:
                        if r.status in (201, 409):
                            created += r.status == 201
                            break
                        text = await r.text()
                    await asyncio.sleep(0.5 * (attempt + 1))
                else:
                    raise RuntimeError(f"POST {path} failed: {text[:300]}")

        await asyncio.gather(*(worker() for _ in range(32)))
    return created


def grow_clusters(cp: ControlPlane, size: Size) -> float:
    """DaskClusters and their scheduler Deployments, as the dask operator would have built them."""
    started = time.monotonic()
    template = example("gpu-cluster-tcp.yaml")
    items: list[tuple[str, dict[str, Any]]] = []
    for i in range(size.clusters):
        ns, name = NAMESPACES[i % len(NAMESPACES)], f"c-{i:05d}"
        doc = json.loads(json.dumps(template))
        doc["metadata"] = {"name": name, "namespace": ns}
        deployment = controller.build_scheduler_deployment_spec(
            name, doc["spec"]["scheduler"]["spec"], {}, {}
        )
        deployment["metadata"]["namespace"] = ns
        deployment["spec"]["replicas"] = 0
        items.append((f"/apis/{DASK[0]}/{DASK[1]}/namespaces/{ns}/daskclusters", doc))
        items.append((f"/apis/apps/v1/namespaces/{ns}/deployments", deployment))
    items.reverse()
    created = asyncio.run(_post_all(cp, items))
    print(f"  created {created} DaskClusters and Deployments in {time.monotonic() - started:.0f}s")
    return time.monotonic() - started


# -- one operator run ---------------------------------------------------------------------------


def cpu_seconds(pid: int) -> float:
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return float("nan")
    return sum(int(f) for f in fields[11:13]) / os.sysconf("SC_CLK_TCK")


@dataclasses.dataclass
class Run:
    size: Size
    mode: str
    gpu_nodes: int
    tls: float | None = None
    readyz: float | None = None
    full: float | None = None
    partial_answers: int = 0
    early_answers: Counter[str] = dataclasses.field(default_factory=Counter)
    first_pass_metric: float | None = None  # seen at (seconds after spawn)
    first_pass_value: float | None = None  # what the operator reports
    last_drift_line: float | None = None
    drift_lines: int = 0
    cpu_at_full: float | None = None
    cpu_at_pass: float | None = None
    rss: int = 0
    hwm: int = 0
    admission: dict[str, float] = dataclasses.field(default_factory=dict)
    scrapes: int = 0
    scrape_failures: int = 0
    tracebacks: int = 0
    notes: list[str] = dataclasses.field(default_factory=list)


class Watcher:
    """Scrapes /metrics and samples /proc without pause, from a thread."""

    def __init__(self, op: ParityOperator, pid: int, t0: float) -> None:
        self.op, self.pid, self.t0 = op, pid, t0
        self.stop = threading.Event()
        self.scrapes = self.failures = 0
        self.metrics: dict[Any, float] = {}
        self.first_pass_at: float | None = None
        self.readyz_at: float | None = None
        self.tls_at: float | None = None
        self.status: dict[str, int] = {}
        self.thread = threading.Thread(target=self.loop, daemon=True)

    def loop(self) -> None:
        answered = False
        next_sample = 0.0
        while not self.stop.is_set():
            now = time.monotonic() - self.t0
            if self.tls_at is None:
                with contextlib.suppress(OSError):
                    self.op._tls_accepts()
                    self.tls_at = time.monotonic() - self.t0
            if now >= next_sample:
                self.status = proc_status(self.pid) or self.status
                next_sample = now + 0.5
            try:
                found = self.op.metrics()
            except Exception:  # a parse error is a failed scrape
                found = None
            if found is None:
                self.failures += answered
                time.sleep(0.05)
                continue
            answered = True
            self.scrapes += 1
            self.metrics = found
            if self.first_pass_at is None and any(
                k[0] == "dgp_drift_first_pass_seconds" for k in found
            ):
                self.first_pass_at = time.monotonic() - self.t0
            if self.readyz_at is None and self._readyz():
                self.readyz_at = time.monotonic() - self.t0
            time.sleep(SCRAPE_SECONDS)

    def _readyz(self) -> bool:
        import http.client

        try:
            conn = http.client.HTTPConnection("127.0.0.1", self.op.metrics_port, timeout=5)
            conn.request("GET", "/readyz")
            response = conn.getresponse()
            ok = response.status == 200 and response.read() == b"ok\n"  # not /metrics' text
            conn.close()
        except OSError:
            return False
        return ok


def ucx_answer(op: ParityOperator, gpu_nodes: int) -> str:
    doc = example("gpu-cluster-ucx.yaml", namespace=BENCH_NS, name="ucx-probe")
    try:
        op.create(doc, dry_run=True)
    except ApiException as exc:
        body = str(exc.body)
        if "failed calling webhook" in body:
            return "unreachable"
        if f"none of the {gpu_nodes} GPU nodes" in body:
            return "full"
        if "DGP013" in body:
            return "partial"
        return "other"
    return "admitted"  # without DGP013: a partial view (no inventory at all)


def tcp_cluster(dra: float) -> dict[str, Any]:
    """The example TCP cluster; on a fleet with DRA nodes, without its GPU-product selector.

    DRA nodes carry no GFD labels, so workers that select ``nvidia.com/gpu.product`` fit none
    of them, and on a pure-DRA fleet admission rightly refuses the cluster (DGP013).
    """
    doc = example("gpu-cluster-tcp.yaml")
    if dra:
        selector = doc["spec"]["worker"]["spec"].get("nodeSelector", {})
        selector.pop("nvidia.com/gpu.product", None)
    return doc


def admission_p50(op: ParityOperator, creates: int, dra: float = 0.0) -> dict[str, float]:
    custom = client.CustomObjectsApi(op.api)
    template = tcp_cluster(dra)
    latencies: dict[str, list[float]] = {BENCH_NS: [], SKIP_NS: []}
    for i in range(creates):
        for ns in (BENCH_NS, SKIP_NS):
            doc = json.loads(json.dumps(template))
            doc["metadata"] = {"name": f"p-{i}", "namespace": ns}
            started = time.perf_counter()
            custom.create_namespaced_custom_object(*DASK, ns, "daskclusters", doc)
            latencies[ns].append(time.perf_counter() - started)
    for ns in latencies:
        custom.delete_collection_namespaced_custom_object(*DASK, ns, "daskclusters")
    return {
        "webhooks": statistics.median(latencies[BENCH_NS]) * 1000,
        "no webhooks": statistics.median(latencies[SKIP_NS]) * 1000,
    }


def churn(api: client.ApiClient) -> None:
    pool = dataclasses.replace(POOLS["h100"], name="churn", size=50)
    create_nodes(api, [node_manifest(pool, i) for i in range(pool.size)])
    client.CoreV1Api(api).delete_collection_node(label_selector=f"{POOL_LABEL}=churn")


@contextlib.contextmanager
def pyspy(pid: int, out: Path) -> Iterator[None]:
    proc = subprocess.Popen(
        [str(Path(sys.executable).with_name("py-spy")), "record", "--pid", str(pid),
         "--rate", "100", "--format", "raw", "--output", str(out), "--nonblocking"],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        yield
    finally:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()


def summarize_profile(path: Path, top: int = 12) -> str:
    """Where the samples went: self time per function, and inclusive time of the top ones."""
    own: Counter[str] = Counter()
    inclusive: Counter[str] = Counter()
    total = 0
    if not path.exists():
        return "(no profile)"
    for line in path.read_text().splitlines():
        stack, _, count_text = line.rpartition(" ")
        if not stack or not count_text.isdigit():
            continue
        count = int(count_text)
        frames = [f.split(" (")[0] + " (" + f.split(" (")[-1].split(":")[0].split("/")[-1] + ")"
                  for f in stack.split(";")]  # fmt: skip
        total += count
        own[frames[-1]] += count
        for frame in set(frames):
            inclusive[frame] += count
    if not total:
        return "(no samples)"
    lines = [f"{total} samples; self time:"]
    lines += [f"  {100 * n / total:5.1f} %  {f}" for f, n in own.most_common(top)]
    lines.append("inclusive time:")
    lines += [f"  {100 * n / total:5.1f} %  {f}" for f, n in inclusive.most_common(top * 2)]
    return "\n".join(lines)


def wait_full(op: ParityOperator, run: Run, t0: float, deadline: float) -> None:
    """Until admission answers from the full inventory; every earlier answer is counted."""
    assert op.process is not None
    while time.monotonic() < deadline and run.full is None:
        op.check_alive()
        answer = ucx_answer(op, run.gpu_nodes)
        run.early_answers[answer] += 1
        if answer in ("partial", "admitted", "other"):
            run.partial_answers += 1
        if answer == "full":
            run.full = time.monotonic() - t0
            run.cpu_at_full = cpu_seconds(op.process.pid)
        time.sleep(0.2)
    if run.full is None:
        run.notes.append(f"full inventory not reached in {deadline - t0:.0f}s")


def wait_first_pass(
    op: ParityOperator, run: Run, watcher: Watcher, t0: float, deadline: float
) -> None:
    """Until the drift watch has checked every cluster (its metric, or one log line each)."""
    assert op.process is not None
    while time.monotonic() < deadline:
        op.check_alive()
        text = op.log_path.read_text(errors="replace")
        lines = len(DRIFT_LINE.findall(text))
        if lines > run.drift_lines:
            run.drift_lines = lines
            run.last_drift_line = time.monotonic() - t0
        if watcher.first_pass_at is not None or run.drift_lines >= run.size.clusters:
            break
        time.sleep(0.5)
    run.cpu_at_pass = cpu_seconds(op.process.pid)
    run.first_pass_metric = watcher.first_pass_at
    for key, value in (op.metrics() or {}).items():
        if key[0] == "dgp_drift_first_pass_seconds":
            run.first_pass_value = value
    if run.first_pass_metric is None and run.drift_lines < run.size.clusters:
        run.notes.append(
            f"drift pass not done in {deadline - t0:.0f}s "
            f"({run.drift_lines}/{run.size.clusters} reported)"
        )


def measure(
    cp: ControlPlane, api: client.ApiClient, size: Size, mode: str, args: argparse.Namespace
) -> Run:
    gpu_nodes = sum(p.size for p in gpu_pools(size))
    run = Run(size, mode, gpu_nodes)
    op = ParityOperator(
        cp,
        api,
        args.run_dir / "logs" / f"{mode}-{size.gpu}",
        drift=mode in ("drift", "before"),
        executable=(args.before_bin or args.operator_bin)
        if mode == "before"
        else args.operator_bin,
    )
    op.log_path.parent.mkdir(parents=True, exist_ok=True)
    op.owns_crd = False
    op.apply_webhooks()
    path = args.before if mode == "before" else args.operator_path
    env = {"PYTHONPATH": str(Path(path) / "operator")} if path else {}
    t0 = time.monotonic()
    process = op.launch(env)
    pid = process.pid
    watcher = Watcher(op, pid, t0)
    watcher.thread.start()
    profile = args.profile / f"{mode}-{size.gpu}-{size.clusters}.txt" if args.profile else None
    spy = pyspy(pid, profile) if profile else contextlib.nullcontext()
    deadline = t0 + (args.before_timeout if mode == "before" else args.timeout)
    try:
        try:
            with spy:
                wait_full(op, run, t0, deadline)
                threading.Thread(target=churn, args=(api,), daemon=True).start()
                if op.drift:
                    wait_first_pass(op, run, watcher, t0, deadline)
        except ComponentError as exc:
            run.notes.append(f"the operator exited: {str(exc).splitlines()[0]}")
        time.sleep(5)
        status = proc_status(pid)
        run.rss, run.hwm = status.get("VmRSS", 0), status.get("VmHWM", 0)
        run.readyz, run.tls = watcher.readyz_at, watcher.tls_at
        if run.full is not None:
            run.admission = admission_p50(op, args.creates, args.dra)
    finally:
        watcher.stop.set()
        watcher.thread.join()
        run.scrapes, run.scrape_failures = watcher.scrapes, watcher.failures
        op.stop()
    log = op.log_path.read_text(errors="replace")
    run.tracebacks = log.count("Traceback")
    if profile:
        summary = summarize_profile(profile)
        profile.with_suffix(".summary").write_text(summary + "\n")
        print(summary)
    return run


# -- report -------------------------------------------------------------------------------------


def fmt(value: float | None, unit: str = "s") -> str:
    return "not reached" if value is None else f"{value:.1f} {unit}".strip()


def table(runs: list[Run]) -> str:
    head = (
        "| size | mode | ready (TLS / `/readyz`) | full inventory | partial answers | "
        "drift first pass (metric / last log line) | operator CPU to full / to pass | "
        "VmRSS / VmHWM | admission p50, 1 client (webhooks / none) | /metrics scrapes (failed) |"
    )
    rows = [head, "| " + " | ".join(["---"] * 10) + " |"]
    for r in runs:
        drift = (
            f"{fmt(r.first_pass_metric)} ({fmt(r.first_pass_value)} inside) / "
            f"{fmt(r.last_drift_line)}"
            if r.mode != "no-drift"
            else "-"
        )
        cpu = f"{fmt(r.cpu_at_full)} / {fmt(r.cpu_at_pass) if r.mode != 'no-drift' else '-'}"
        admission = (
            f"{r.admission['webhooks']:.1f} / {r.admission['no webhooks']:.1f} ms"
            if r.admission
            else "-"
        )
        rows.append(
            f"| {r.size} | {r.mode} | {fmt(r.tls)} / {fmt(r.readyz)} | {fmt(r.full)} | "
            f"{r.partial_answers} | {drift} | {cpu} | {r.rss / 2**20:.0f} / "
            f"{r.hwm / 2**20:.0f} MiB | {admission} | {r.scrapes} ({r.scrape_failures}) |"
        )
    return "\n".join(rows)


def rows(runs: list[Run]) -> list[dict[str, Any]]:
    """The runs as ``benchmarks/results/scale.json`` rows (seconds from the spawn, MiB)."""

    def rounded(value: float | None) -> float | None:
        return None if value is None else round(value, 1)

    return [
        {
            "gpu_nodes": r.size.gpu,
            "cpu_nodes": r.size.cpu,
            "clusters": r.size.clusters,
            "mode": r.mode,
            "ready_s": rounded(r.tls),
            "readyz_s": rounded(r.readyz),
            "full_inventory_s": rounded(r.full),
            "drift_first_pass_s": rounded(r.first_pass_metric),
            "drift_first_pass_inside_s": rounded(r.first_pass_value),
            "operator_cpu_to_full_s": rounded(r.cpu_at_full),
            "operator_cpu_to_pass_s": rounded(r.cpu_at_pass),
            "vmrss_mib": round(r.rss / 2**20),
            "vmhwm_mib": round(r.hwm / 2**20),
            "admission_p50_ms": rounded(r.admission.get("webhooks")),
            "admission_p50_no_webhook_ms": rounded(r.admission.get("no webhooks")),
            "partial_answers": r.partial_answers,
            "metrics_scrapes": r.scrapes,
            "metrics_scrapes_failed": r.scrape_failures,
        }
        for r in runs
    ]


def slope(runs: list[Run], mode: str) -> str:
    points = [(r.size, r.rss) for r in runs if r.mode == mode and r.rss]
    if len(points) < 2:
        return ""
    (s0, m0), (s1, m1) = points[0], points[-1]
    per_node = (m1 - m0) / max(1, (s1.gpu + s1.cpu) - (s0.gpu + s0.cpu))
    per_cluster = (m1 - m0) / max(1, s1.clusters - s0.clusters)
    return (
        f"{mode}: {(m1 - m0) / 2**20:.0f} MiB more from the smallest to the largest size: "
        f"{per_node / 1024:.1f} KiB per node added, or {per_cluster / 1024:.1f} KiB per "
        "DaskCluster added (both grew together)"
    )


def write(path: Path, text: str) -> None:
    doc = path.read_text() if path.exists() else ""
    if MARK_START in doc:
        before, rest = doc.split(MARK_START, 1)
        after = rest.split(MARK_END, 1)[1]
        doc = f"{before}{MARK_START}\n{text}\n{MARK_END}{after}"
    else:
        doc = f"{doc.rstrip()}\n\n{MARK_START}\n{text}\n{MARK_END}\n"
    path.write_text(doc)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=parse_sizes, default=parse_sizes("500/100/1000"))
    parser.add_argument(
        "--modes",
        default="no-drift,drift",
        help="no-drift, drift, and before (drift, from the checkout given by --before)",
    )
    parser.add_argument(
        "--dra",
        type=float,
        default=0.0,
        help="share of the GPU nodes on NVIDIA's DRA driver (ResourceSlices), 0 to 1",
    )
    parser.add_argument("--before", help="a checkout of an earlier commit, for mode 'before'")
    parser.add_argument("--before-timeout", type=float, default=300)
    parser.add_argument("--creates", type=int, default=100)
    parser.add_argument("--timeout", type=float, default=600, help="per operator run")
    parser.add_argument("--ready-timeout", type=float, default=1200, help="nodes schedulable")
    parser.add_argument("--profile", type=Path, help="write py-spy profiles here")
    parser.add_argument("--operator-path", help="run the operator from this checkout")
    parser.add_argument(
        "--operator-bin",
        type=Path,
        help="the dask-gpu-parity executable (default: this venv's); e.g. from a venv with only "
        "the 'in-cluster' extra, as the image has",
    )
    parser.add_argument(
        "--before-bin",
        type=Path,
        help="the executable for mode 'before' (default: --operator-bin's), when the earlier "
        "commit installs other packages (e.g. a venv of its own extras)",
    )
    parser.add_argument("--run-dir", type=Path)
    parser.add_argument("--write", type=Path, help="put the table into this Markdown file")
    parser.add_argument(
        "--record",
        metavar="LABEL",
        help="append the runs to benchmarks/results/scale.json under this label (make figures)",
    )
    parser.add_argument("--machine", default="the shared 2-core machine", help="for --record")
    args = parser.parse_args(argv)
    args.run_dir = args.run_dir or Path(tempfile.mkdtemp(prefix="dgp-scale-"))
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)
    cp = start_ground(args.run_dir)
    api = api_client(cp.kubeconfig, pool_size=32)
    runs: list[Run] = []
    setup: list[str] = []
    try:
        for size in args.sizes:
            print(f"\n== {size}", flush=True)
            nodes_s = grow_nodes(api, size, args.dra)
            clusters_s = grow_clusters(cp, size)
            ready, total, waited = wait_schedulable(api, args.ready_timeout)
            setup.append(
                f"{size}: nodes created in {nodes_s:.0f} s, clusters in {clusters_s:.0f} s, "
                f"{ready:,}/{total:,} nodes schedulable {waited:.0f} s later"
            )
            print(f"  {setup[-1]}", flush=True)
            if slices := grow_slices(cp, api, size, args.dra):
                setup.append(f"{size}: {slices}")
                print(f"  {setup[-1]}", flush=True)
            for mode in [m for m in args.modes.split(",") if m != "none"]:
                run = measure(cp, api, size, mode, args)
                runs.append(run)
                print(table([run]).splitlines()[-1], run.early_answers, run.notes, flush=True)
    finally:
        api.close()
        cp.stop()
    when = dt.datetime.now(dt.UTC).strftime("%Y-%m-%d")
    text = "\n".join(
        [
            f"Measured {when} on the 2-core machine (shared; load average {os.getloadavg()[0]:.1f} "
            "at the end): `python benchmarks/scale.py --sizes "
            f"{','.join(f'{s.gpu}/{s.cpu}/{s.clusters}' for s in args.sizes)}"
            + (f" --dra {args.dra:g}" if args.dra else "")
            + "`"
            + (f" (operator from `{args.operator_path}`)" if args.operator_path else "")
            + ".",
            "",
            table(runs),
            "",
            *[f"- {line}" for line in setup],
            *[f"- {line}" for line in (slope(runs, m) for m in ("no-drift", "drift")) if line],
            *[
                f"- {r.size}, {r.mode}: {'; '.join(r.notes)}"
                for r in runs
                if r.notes or r.tracebacks
            ],
        ]
    )
    print("\n" + text)
    if args.write:
        write(args.write, text)
    if args.record:
        results.record(
            results.RESULTS / "scale.json",
            {
                "commit": results.commit(Path(args.operator_path) if args.operator_path else ROOT),
                "label": args.record,
                "machine": f"{args.machine} (load average {os.getloadavg()[0]:.1f} at the end)",
                "command": "python -m benchmarks.scale " + " ".join(argv or sys.argv[1:]),
                "dra": args.dra,
                "before": results.commit(Path(args.before)) if args.before else None,
                "rows": rows(runs),
            },
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
