"""What admission adds to a DaskCluster create: before and after the verifier by reference and
the webhooks' matchConditions, beside the CEL peer, through the real kube-apiserver.

Usage, from the repository root:
    python -m benchmarks.admission_latency [--rounds 3] [--concurrency 1,10]
        [--requests 200,400] [--before COMMIT] [--write docs/performance.md]

On the proving ground (no dask operator: pure admission; the GPU node pools feed the inventory),
with one ``dask-gpu-parity run --no-drift`` on the host. Every mode has a namespace of its own,
selected by a label, in the same API server, run interleaved (the order rotates every round),
closed loop (each of N clients sends its next create when the last one returned); every create
is a distinct DaskCluster (unique name, unique worker env value, so no cache answers for the
rules):

* ``none``: no admission at all (our webhooks' namespaceSelector leaves the namespace out);
* ``before``: this project as of main e209ac6, run as a second operator from that commit's source
  (``BEFORE``: e209ac6 plus the one-line login fix it needs to start at all), with its webhook
  configurations: both webhooks called for every Dask create (no matchConditions), the verifier
  inline (the 21 kB probe source embedded in every GPU DaskCluster);
* ``after``: this change: the verifier by reference, webhooks behind matchConditions;
* ``cel``: the CEL peer, ``benchmarks/cel/scheduler-gpu.yaml``: a MutatingAdmissionPolicy and a
  ValidatingAdmissionPolicy doing only the core mutation and DGP001, in the API server itself.

GPU creates use ``examples/gpu-cluster-tcp.yaml``; the ``cpu-*`` modes use
``examples/cpu-cluster.yaml`` in the none/before/after namespaces. Reported: each mode's p50 and
p99 (median over rounds) and what admission adds to ``none``; how many webhook calls a create
costs, from the API server's own ``apiserver_admission_webhook_request_total``; the stored
DaskCluster's size and the scheduler Pod's that the dask operator would create from it (its
``build_scheduler_deployment_spec``, created with ``dryRun``); CPU time per create of our
operator, kube-apiserver and etcd.
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import datetime as dt
import io
import json
import os
import platform
import shutil
import ssl
import statistics
import subprocess
import sys
import tarfile
import time
import uuid
from pathlib import Path
from typing import Any, cast

import aiohttp
import yaml
from dask_kubernetes.operator.controller.controller import build_scheduler_deployment_spec
from kubernetes import client

from dask_gpu_parity.admission.decide.configurations import (
    WebhookValues,
    configurations,
    match_conditions,
)
from dask_gpu_parity.core.verifier import EXPECT_DRIVER
from dask_gpu_parity.names import VERIFIER_COPY_CONTAINER as COPY
from provingground import ProvingGround, install_crds
from provingground.parity import ParityOperator

ROOT = Path(__file__).resolve().parents[1]

# mode -> (manifest, label of its namespace, whether our webhooks are configured there)
MODES = {
    "none": ("gpu", "none"),
    "before": ("gpu", "before"),
    "after": ("gpu", "after"),
    "cel": ("gpu", "cel"),
    "cpu-none": ("cpu", "none"),
    "cpu-before": ("cpu", "before"),
    "cpu-after": ("cpu", "after"),
}
MANIFESTS = {"gpu": "gpu-cluster-tcp.yaml", "cpu": "cpu-cluster.yaml"}
PROCESSES = ("dask-gpu-parity", "kube-apiserver", "etcd")  # whose CPU time is counted
DASK = ("kubernetes.dask.org", "v1")
LABEL = "dgp-bench"
CEL_POLICIES = ROOT / "benchmarks" / "cel" / "scheduler-gpu.yaml"
# main e209ac6 plus the commit that lets its operator log in (its kopf registry had no login
# handler), the only change: the operator the "before" mode runs.
BEFORE = "b8183a7"
Samples = dict[str, list[tuple[float, float]]]


def quantile(values: list[float], q: float) -> float:
    """Nearest-rank quantile."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered) + 0.5) - 1))]


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f}"


def manifest(kind: str) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load((ROOT / "examples" / MANIFESTS[kind]).read_text())
    return doc


class Load:
    """Closed-loop DaskCluster creates against the API server (aiohttp, one connection each)."""

    def __init__(self, ground: ProvingGround) -> None:
        cp = ground.control_plane
        self.server = cp.server
        self.context = ssl.create_default_context(cafile=str(cp.ca_cert_path))
        self.context.load_cert_chain(cp.pki / "admin.crt", cp.pki / "admin.key")
        self.templates = {kind: manifest(kind) for kind in MANIFESTS}
        self.seq = 0

    def body(self, namespace: str, kind: str, name: str | None = None) -> bytes:
        self.seq += 1
        doc = copy.deepcopy(self.templates[kind])
        doc["metadata"] = {"name": name or f"bench-{self.seq}", "namespace": namespace}
        worker = doc["spec"]["worker"]["spec"]["containers"][0]
        worker.setdefault("env", []).append(
            {"name": "BENCH_ID", "value": f"{self.seq}-{uuid.uuid4().hex}"}
        )
        return json.dumps(doc).encode()

    async def run(
        self, namespace: str, kind: str, clients: int, requests: int
    ) -> tuple[list[float], list[str]]:
        """``requests`` creates by ``clients`` concurrent clients: latencies (s) and failures."""
        url = f"{self.server}/apis/{DASK[0]}/{DASK[1]}/namespaces/{namespace}/daskclusters"
        bodies = [self.body(namespace, kind) for _ in range(requests)]
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
                        failures.append(f"{response.status}: {text[:300]!r}")
                    else:
                        latencies.append(elapsed)

            await asyncio.gather(*(worker() for _ in range(clients)))
        return latencies, failures


def delete_all(api: client.ApiClient, namespace: str) -> None:
    custom = client.CustomObjectsApi(api)
    custom.delete_collection_namespaced_custom_object(*DASK, namespace, "daskclusters")
    deadline = time.monotonic() + 120
    while cast(
        dict[str, Any],
        custom.list_namespaced_custom_object(*DASK, namespace, "daskclusters", limit=1),
    )["items"]:
        if time.monotonic() > deadline:
            raise TimeoutError(f"DaskClusters in {namespace} not deleted within 120s")
        time.sleep(0.2)


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process (and its reaped children)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return sum(int(f) for f in fields[11:15]) / os.sysconf("SC_CLK_TCK")


def webhook_calls(text: str) -> dict[str, float]:
    """``apiserver_admission_webhook_request_total`` by webhook name (every code and type)."""
    name = "apiserver_admission_webhook_request_total"
    calls: dict[str, float] = {}
    for line in text.splitlines():
        if not line.startswith(name + "{"):
            continue
        labels_text, value = line[len(name) + 1 :].rsplit("} ", 1)
        labels = dict(p.split("=", 1) for p in labels_text.split('",') if "=" in p)
        webhook = labels["name"].strip('"')
        calls[webhook] = calls.get(webhook, 0.0) + float(value)
    return calls


def before_operator(ground: ProvingGround, run_dir: Path, commit: str) -> ParityOperator:
    """The operator of ``commit``, from its source, with this environment's packages."""
    source = run_dir / "before-source"
    source.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", "--format=tar", commit, "operator"],
        capture_output=True,
        check=True,
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(source, filter="data")
    cp = ground.control_plane
    assert ground.api is not None
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = str(source / "operator")  # ahead of the editable install
    (cp.logs / "before").mkdir(exist_ok=True)
    try:
        return ParityOperator(cp, ground.api, cp.logs / "before", drift=False).start(webhooks=False)
    finally:
        if old is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = old


def webhooks(parity: ParityOperator, which: str, *, matched: bool) -> list[dict[str, Any]]:
    """Our two webhook configurations for the namespaces labelled ``which``.

    ``before`` calls every Dask create (no matchConditions), as main e209ac6 did. Webhook names
    carry the mode, so the API server counts the two sets apart; the paths are the operator's.
    """
    values = WebhookValues(
        ca_bundle=Path(parity.ca).read_bytes(),
        url=parity.url,
        timeout_seconds=10,
        match_conditions=matched,
    )
    configs = configurations(values)
    for config in configs:
        config["metadata"]["name"] = f"dask-gpu-parity-{which}"
        for webhook in config["webhooks"]:
            handler, rest = webhook["name"].split(".", 1)
            webhook["name"] = f"{handler}.{which}.{rest}"
            webhook["namespaceSelector"]["matchExpressions"].append(
                {"key": LABEL, "operator": "In", "values": [which]}
            )
    return configs


def cel_policies() -> list[dict[str, Any]]:
    """The CEL peer, with our webhooks' gpu-workers condition for DaskClusters."""
    (gpu, _) = match_conditions("daskclusters")
    docs = list(yaml.safe_load_all(CEL_POLICIES.read_text()))
    for doc in docs:
        for condition in doc["spec"].get("matchConditions", []):
            condition["expression"] = gpu["expression"]
    return docs


class Bench:
    """The proving ground, our operator, the admission set-ups, and what was measured."""

    def __init__(
        self,
        ground: ProvingGround,
        parity: ParityOperator,
        before: ParityOperator,
        *,
        before_current: bool = False,
    ) -> None:
        assert ground.api is not None  # the caller started the proving ground
        self.api = ground.api
        self.before_current = before_current  # the before commit has today's webhooks and form
        self.cp = ground.control_plane
        self.parity = parity
        self.before = before
        self.load = Load(ground)
        self.namespaces = {label: f"bench-{label}" for _, label in MODES.values()}
        for label, namespace in self.namespaces.items():
            self.cp.kubectl("create", "namespace", namespace)
            self.cp.kubectl("label", "namespace", namespace, f"{LABEL}={label}")
        self.apply(
            [
                *webhooks(before, "before", matched=before_current),
                *webhooks(parity, "after", matched=True),
                *cel_policies(),
            ]
        )
        self.failed = dict.fromkeys(MODES, 0)
        self.count = dict.fromkeys(MODES, 0)
        self.calls = dict.fromkeys(MODES, 0.0)
        self.cpu = {mode: dict.fromkeys(PROCESSES, 0.0) for mode in MODES}  # seconds

    def apply(self, docs: list[dict[str, Any]]) -> None:
        self.cp.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(docs))

    def snapshot(self) -> tuple[dict[str, float], float]:
        """CPU seconds per process (both operators together), and every webhook call so far."""
        text = self.cp.kubectl("get", "--raw", "/metrics").stdout
        operators = [self.parity.process, self.before.process]
        cpu = {
            "dask-gpu-parity": sum(cpu_seconds(p.pid) for p in operators if p is not None),
            "kube-apiserver": cpu_seconds(self.cp.processes["kube-apiserver"].pid),
            "etcd": cpu_seconds(self.cp.processes["etcd"].pid),
        }
        return cpu, sum(webhook_calls(text).values())

    def stored(self, mode: str) -> dict[str, Any]:
        """One create in ``mode``'s namespace, read back as the API server stores it."""
        kind, label = MODES[mode]
        name = f"size-{mode}"
        namespace = self.namespaces[label]
        url = f"/apis/{DASK[0]}/{DASK[1]}/namespaces/{namespace}/daskclusters"
        body = self.load.body(namespace, kind, name=name)
        self.cp.kubectl("create", "--raw", url, "-f", "-", input=body.decode())
        raw = self.cp.kubectl("get", "--raw", f"{url}/{name}").stdout
        obj: dict[str, Any] = json.loads(raw)
        obj["_bytes"] = len(raw.encode())
        return obj

    def ready(self, timeout: float = 120) -> None:
        """Every set-up answers as designed (policies and indices warm, CEL compiled)."""
        deadline = time.monotonic() + timeout
        why = ""
        while True:
            try:
                specs = {
                    mode: self.stored(mode)["spec"]["scheduler"]["spec"]
                    for mode in ("before", "after")
                }
                inits = {mode: spec.get("initContainers", []) for mode, spec in specs.items()}
                scheduler = self.stored("cel")["spec"]["scheduler"]["spec"]["containers"][0]
                expected_driver = [  # the node inventory is indexed: placement and expectations
                    e for e in inits["after"][-1].get("env", []) if e["name"] == EXPECT_DRIVER
                ]
                before_ready = (
                    [c["name"] for c in inits["before"]] == [COPY, "gpu-parity-check"]
                    if self.before_current
                    else [c["name"] for c in inits["before"]] == ["gpu-parity-check"]
                    # e209ac6's own form: the GPU in requests too, the probe's source inline
                    and "nvidia.com/gpu" in inits["before"][0]["resources"]["requests"]
                    and inits["before"][0]["command"][:3] == ["python", "-I", "-c"]
                )
                checks = {
                    "before's init containers": before_ready,
                    "after's init containers": [c["name"] for c in inits["after"]]
                    == [COPY, "gpu-parity-check"],
                    # e209ac6 pinned every GPU scheduler and told the probe the driver; today
                    # that needs a pin, so two operators of today must answer alike instead.
                    "after's expected driver (the inventory)": bool(expected_driver)
                    or (self.before_current and specs["before"] == specs["after"]),
                    "the CEL peer's scheduler GPU": scheduler.get("resources", {})
                    .get("limits", {})
                    .get("nvidia.com/gpu")
                    == "1",
                }
                if all(checks.values()):
                    return
                why = "not yet: " + ", ".join(k for k, ok in checks.items() if not ok)
            except (RuntimeError, KeyError, IndexError) as exc:
                why = f"{type(exc).__name__}: {exc}"
            finally:
                for label in ("before", "after", "cel"):
                    delete_all(self.api, self.namespaces[label])
            if time.monotonic() > deadline:
                raise TimeoutError(f"the admission set-ups did not answer as designed ({why})")
            time.sleep(1)

    def sizes(self) -> dict[str, dict[str, int]]:
        """Stored DaskCluster and dry-run scheduler Pod sizes (bytes of JSON) per GPU mode."""
        out: dict[str, dict[str, int]] = {}
        for mode in ("none", "before", "after", "cel"):
            obj = self.stored(mode)
            namespace = obj["metadata"]["namespace"]
            deployment = build_scheduler_deployment_spec(
                obj["metadata"]["name"],
                obj["spec"]["scheduler"]["spec"],
                {},
                {},
            )
            template = deployment["spec"]["template"]
            pod = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {**template["metadata"], "namespace": namespace},
                "spec": template["spec"],
            }
            raw = self.cp.kubectl(
                "create",
                "--raw",
                f"/api/v1/namespaces/{namespace}/pods?dryRun=All",
                "-f",
                "-",
                input=json.dumps(pod),
            ).stdout.encode()
            fields = {k: v for k, v in obj.items() if k != "_bytes"}
            fields["metadata"] = {
                k: v for k, v in fields["metadata"].items() if k != "managedFields"
            }
            out[mode] = {
                "stored": obj["_bytes"],
                "no managedFields": len(json.dumps(fields, separators=(",", ":"))),
                "pod": len(raw),
            }
            delete_all(self.api, namespace)
        written = json.loads(self.load.body("x", "gpu", name="size"))
        out["input"] = {"stored": len(json.dumps(written, separators=(",", ":")))}
        return out

    def warm_up(self) -> None:
        """Connections, caches and lazy imports, on every path."""
        for mode, (kind, label) in MODES.items():
            asyncio.run(self.load.run(self.namespaces[label], kind, 10, 60))
            delete_all(self.api, self.namespaces[label])
            print(f"warmed up {mode}", flush=True)

    def run(self, mode: str, clients: int, requests: int) -> tuple[float, float]:
        """One closed-loop run; returns (p50, p99) and accumulates the counters."""
        kind, label = MODES[mode]
        namespace = self.namespaces[label]
        cpu_before, calls_before = self.snapshot()
        lat, failed = asyncio.run(self.load.run(namespace, kind, clients, requests))
        cpu_after, calls_after = self.snapshot()
        for name in PROCESSES:
            self.cpu[mode][name] += cpu_after[name] - cpu_before[name]
        self.calls[mode] += calls_after - calls_before
        self.failed[mode] += len(failed)
        self.count[mode] += requests
        for failure in failed[:3]:
            print(f"  failed ({mode}): {failure}", flush=True)
        delete_all(self.api, namespace)
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
            shift = round_ % len(order)
            for mode in order[shift:] + order[:shift]:
                p50, p99 = bench.run(mode, clients, requests[clients])
                levels[clients][mode].append((p50, p99))
                print(
                    f"clients={clients:>3} round={round_} {mode:>10}: "
                    f"p50 {ms(p50)} ms  p99 {ms(p99)} ms",
                    flush=True,
                )
    return levels


def report(
    setup: dict[str, Any],
    levels: dict[int, Samples],
    sizes: dict[str, dict[str, int]],
    bench: Bench,
) -> str:
    def med(clients: int, mode: str, index: int) -> float:
        return statistics.median(run[index] for run in levels[clients][mode])

    def added(clients: int, mode: str, index: int) -> float:
        base = "cpu-none" if mode.startswith("cpu-") else "none"
        return med(clients, mode, index) - med(clients, base, index)

    one = min(levels)
    lines = [
        "## Admission latency",
        "",
        f"Measured {setup['date']} on {setup['machine']}, shared with other work; Kubernetes "
        "v1.36.3 proving ground (etcd, kube-apiserver, kwok GPU node pools; no dask operator: "
        "pure admission), one `dask-gpu-parity run --no-drift` on the same host.",
        "",
        "```bash",
        setup["command"],
        "```",
        "",
        "Closed loop: N clients each create distinct DaskClusters (`examples/gpu-cluster-tcp.yaml`"
        ", or `examples/cpu-cluster.yaml` for the `cpu-` modes; unique name and worker env) "
        "through the real kube-apiserver as fast as it answers, each mode in a namespace of its "
        "own in the same API server. `none`: no admission. "
        + (
            f"`before`: commit {setup['before']}, its own operator, with the same webhook "
            "configurations as `after`. "
            if setup["before_current"]
            else "`before`: main e209ac6, its own "
            f"operator (commit {setup['before']}: e209ac6 plus the login fix it needs to start) "
            "and webhook configurations (both webhooks called for every Dask create; the "
            "verifier inline). "
        )
        + "`after`: this change (the verifier by reference, "
        "webhooks behind matchConditions: none for CPU-only, one for a GPU create). `cel`: "
        "the CEL peer (`benchmarks/cel/`: a "
        "MutatingAdmissionPolicy and a ValidatingAdmissionPolicy doing only the core mutation "
        "and DGP001, no webhook). Runs interleave the modes (order rotating per round); every "
        f"cell is the median over {setup['rounds']} rounds of that run's percentile, in ms; "
        "*added* is the mode minus `none` (`cpu-none` for the CPU modes).",
        "",
        "| clients | mode | p50 | **added p50** | p99 | **added p99** | webhook calls per create |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    calls = {m: bench.calls[m] / max(bench.count[m], 1) for m in MODES}
    for clients in levels:
        for mode in MODES:
            is_base = mode in ("none", "cpu-none")
            a50 = "" if is_base else f"**{ms(added(clients, mode, 0))}**"
            a99 = "" if is_base else f"**{ms(added(clients, mode, 1))}**"
            lines.append(
                f"| {clients} | {mode} | {ms(med(clients, mode, 0))} | {a50} | "
                f"{ms(med(clients, mode, 1))} | {a99} | {calls[mode]:.2f} |"
            )
    before1, after1, cel1 = (added(one, m, 0) for m in ("before", "after", "cel"))
    growth = sizes["after"]["stored"] - sizes["none"]["stored"]
    lines += [
        "",
        "Targets, in this run:",
        "",
        f"- added p50 at {one} client, after vs before: {ms(after1)} vs {ms(before1)} ms, "
        f"**{after1 / before1:.2f}** of it (target: at most 0.5): "
        f"**{'met' if after1 <= before1 / 2 else 'missed'}**;",
        f"- a CPU-only DaskCluster: {calls['cpu-after']:.2f} webhook calls per create after "
        f"({calls['cpu-before']:.2f} before), added p50 {ms(added(one, 'cpu-after', 0))} ms "
        f"(before {ms(added(one, 'cpu-before', 0))} ms): "
        f"**{'met' if calls['cpu-after'] == 0 else 'missed'}**;",
        f"- the stored DaskCluster {growth:,} bytes larger than as written (none) after, "
        f"{sizes['before']['stored'] - sizes['none']['stored']:,} before (target: at most "
        f"1,536): **{'met' if growth <= 1536 else 'missed'}**;",
        f"- ratio to the CEL peer, added p50 at {one} client: after {after1 / cel1:.1f}, "
        f"before {before1 / cel1:.1f} (cel added {ms(cel1)} ms).",
        "",
        "Sizes (bytes of JSON; the Pod is what the dask operator's "
        "`build_scheduler_deployment_spec` makes of the stored scheduler spec, created with "
        "`dryRun`):",
        "",
        "| | stored DaskCluster | without managedFields | scheduler Pod |",
        "| --- | --- | --- | --- |",
        f"| as sent (compact JSON) | {sizes['input']['stored']:,} | | |",
    ]
    for mode in ("none", "before", "after", "cel"):
        s = sizes[mode]
        lines.append(f"| {mode} | {s['stored']:,} | {s['no managedFields']:,} | {s['pod']:,} |")
    failed = bench.failed
    lines += [
        "",
        f"Creates: {sum(bench.count.values())} in all; **failed: {sum(failed.values())}** "
        f"({', '.join(f'{m}: {n}' for m, n in failed.items())}).",
        "",
        "CPU time per create (ms; each process's user + system time over all runs of a mode, "
        "divided by its creates; the machine's other work is not in it):",
        "",
        "| process | " + " | ".join(MODES) + " |",
        "| --- |" + " --- |" * len(MODES),
    ]
    for name in (*PROCESSES, "all three"):
        row = [
            sum(bench.cpu[m].values()) / max(bench.count[m], 1)
            if name == "all three"
            else bench.cpu[m][name] / max(bench.count[m], 1)
            for m in MODES
        ]
        lines.append(f"| {name} | " + " | ".join(f"{v * 1000:.1f}" for v in row) + " |")
    lines.append("")
    return "\n".join(lines)


def write_section(path: Path, section: str) -> None:
    """Replace the "## Admission latency" section of ``path`` (or append it)."""
    text = path.read_text() if path.exists() else "# Performance\n"
    start = text.find("## Admission latency\n")
    if start == -1:
        text = text.rstrip("\n") + "\n\n" + section
    else:
        end = text.find("\n## ", start + 1)
        text = text[:start] + section + ("" if end == -1 else "\n" + text[end + 1 :])
    path.write_text(text.rstrip("\n") + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", default="1,10")
    parser.add_argument("--requests", default="200,400", help="creates per run, per level")
    parser.add_argument("--run-dir", type=Path, default=ROOT / ".run" / "bench-admission")
    parser.add_argument("--write", type=Path, help="put the section into this Markdown file")
    parser.add_argument(
        "--before", default=BEFORE, help=f"the commit the before mode runs (default {BEFORE})"
    )
    parser.add_argument(
        "--before-current",
        action="store_true",
        help="the before commit has today's webhooks (matchConditions, the verifier by "
        "reference): compare two versions of the operator like for like",
    )
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
        "rounds": args.rounds,
        "before": args.before,
        "before_current": args.before_current,
    }
    with ProvingGround(args.run_dir, dask_operator=False) as ground:
        assert ground.api is not None
        install_crds(ground.control_plane.kubectl)
        parity = ParityOperator(
            ground.control_plane, ground.api, ground.control_plane.logs, drift=False
        ).start(webhooks=False)
        before = before_operator(ground, args.run_dir, args.before)
        bench = Bench(ground, parity, before, before_current=args.before_current)
        bench.ready()
        print(f"dask-gpu-parity ready in {parity.ready_seconds:.1f}s", flush=True)
        sizes = bench.sizes()
        print(json.dumps(sizes), flush=True)
        bench.warm_up()
        levels = measure(bench, levels_list, requests, args.rounds)
        before.stop()
        parity.uninstall()
    section = report(setup, levels, sizes, bench)
    print("\n" + section)
    if args.write:
        write_section(args.write, section)
        print(f"Wrote the section into {args.write}")
    return 0 if not sum(bench.failed.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
