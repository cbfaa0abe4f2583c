"""What admission adds to a DaskCluster create beside the CEL peer, through the real API server.

Usage, from the repository root:
    python -m benchmarks.admission_latency [--rounds 5] [--concurrency 1,10]
        [--requests 300,600] [--before COMMIT [--before-current]] [--json FILE]
        [--write docs/performance.md]

On the proving ground (no dask operator: pure admission; the GPU node pools feed the inventory),
with one ``dask-gpu-parity run --no-drift`` on the host. Every mode has a namespace of its own,
selected by a label, in the same API server, run interleaved (the order rotates every round),
closed loop (each of N clients sends its next create when the last one returned); every create
is a distinct DaskCluster (unique name, unique worker env value, so no cache answers for the
rules):

* ``none``: no admission at all (our webhooks' namespaceSelector leaves the namespace out);
* ``after``: this tree's operator and webhook configurations (matchConditions, the verifier by
  reference);
* ``cel``: the CEL peer, ``benchmarks/cel/scheduler-gpu.yaml``: a MutatingAdmissionPolicy and a
  ValidatingAdmissionPolicy doing only the core mutation and DGP001, in the API server itself;
* ``floor``: the least any webhook can do: ``benchmarks/floor/``, a mutating webhook in Go with
  the standard library only (built here with ``go build``: Go must be on PATH), serving TLS on
  loopback (HTTP/1.1 and HTTP/2, net/http's defaults), answering every review allowed with no
  patch; one MutatingWebhookConfiguration for DaskCluster CREATE in its namespace only,
  failurePolicy Fail, our timeout, no matchConditions;
* ``floor-patch``: the same server answering with the JSON Patch and warnings our webhook returns
  for the GPU example in ``after``'s namespace (captured once at set-up from our operator's own
  answer to that review), verbatim: what a parity-sized mutation costs the API server through
  any webhook, the webhook's own work at about zero;
* ``cel-full``: the CEL peer doing all of that mutation: a MutatingAdmissionPolicy generated at
  set-up from the same captured patch, each of its operations a ``JSONPatch`` of the same path
  and value (the JSON value written as a CEL literal), unconditional (the ``cel`` peer's
  matchConditions decide which creates it sees), with the ``cel`` peer's ValidatingAdmissionPolicy
  (DGP001) bound to its namespace too; a MutatingAdmissionPolicy cannot return warnings, so our
  five are not in it: what parity's full mutation costs the API server with no webhook at all;
* ``fixed``: the GPU example as ``dask-gpu-parity fix --nodes`` writes it with the proving
  ground's Nodes (the GitOps case: a manifest that already has parity), in ``after``'s
  namespace: what our webhooks still cost for it (calls, latency, whether they patch);
* ``before``, only with ``--before COMMIT`` (off by default: it starts a second operator and
  adds two modes to every round, and the target it served, half of e209ac6's added latency, was
  met): that commit's operator, run from its source beside this one, with e209ac6's webhook
  configurations (both webhooks called for every Dask create, no matchConditions), or with this
  tree's (``--before-current``: two versions of today's operator like for like). Main e209ac6
  itself does not start (its kopf registry has no login handler): ``b8183a7`` is e209ac6 plus
  that one-line fix.

GPU creates use ``examples/gpu-cluster-tcp.yaml``; the ``cpu-*`` modes use
``examples/cpu-cluster.yaml`` in the none/after (/before) namespaces. Reported, per clients level:
each mode's p50 and p99 (median over rounds) and what admission adds to ``none``, as the median
of each round's own difference (mode minus ``none`` in the same round) with the rounds' min-max;
each round's added p50 and its ratio ``after``/``cel``; how many webhook calls a create costs,
from the API server's own ``apiserver_admission_webhook_request_total``; the stored DaskCluster's
size and the scheduler Pod's that the dask operator would create from it (its
``build_scheduler_deployment_spec``, created with ``dryRun``); CPU time per create of our
operator, kube-apiserver, etcd and the floor webhook, per round (from ``/proc/<pid>/stat``
around every run; each process counted in every mode), and what admission adds to ``none`` in
CPU, with its ratio ``after``/``cel`` per round; beside them the floor modes' own, and the
ratios ``floor``/``cel``, ``floor-patch``/``cel`` and ``after``/``floor-patch`` per round, and
``after``/``cel-full``, ``floor-patch``/``cel-full`` and ``cel-full``/``cel``.
``--json`` keeps every run's figures.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import copy
import datetime as dt
import io
import json
import math
import os
import platform
import shutil
import socket
import ssl
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import uuid
from collections.abc import Callable
from dataclasses import asdict, dataclass
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
from dask_gpu_parity.names import VERIFIER_COPY_CONTAINER as COPY
from provingground import ProvingGround, install_crds
from provingground.cluster import ControlPlane, free_port
from provingground.parity import ParityOperator
from provingground.process import Process

ROOT = Path(__file__).resolve().parents[1]

# mode -> (manifest, label of its namespace); "before" modes only with --before
MODES = {
    "none": ("gpu", "none"),
    "before": ("gpu", "before"),
    "after": ("gpu", "after"),
    "cel": ("gpu", "cel"),
    "cel-full": ("gpu", "cel-full"),
    "floor": ("gpu", "floor"),
    "floor-patch": ("gpu", "floor-patch"),
    "fixed": ("fixed", "after"),
    "cpu-none": ("cpu", "none"),
    "cpu-before": ("cpu", "before"),
    "cpu-after": ("cpu", "after"),
}
MANIFESTS = {"gpu": "gpu-cluster-tcp.yaml", "cpu": "cpu-cluster.yaml"}  # "fixed": fix(gpu)
# whose CPU time is counted (the floor webhook's only once it runs)
PROCESSES = ("dask-gpu-parity", "kube-apiserver", "etcd", "floor-webhook")
FLOORS = ("floor", "floor-patch")  # the floor webhook's modes, and its URL paths' order
FLOOR_SOURCE = ROOT / "benchmarks" / "floor"
DASK = ("kubernetes.dask.org", "v1")
LABEL = "dgp-bench"
CEL_POLICIES = ROOT / "benchmarks" / "cel" / "scheduler-gpu.yaml"
# main e209ac6 plus the commit that lets its operator log in (its kopf registry had no login
# handler), the only change: what ``--before`` ran when it was the target.
E209AC6_STARTS = "b8183a7"


@dataclass
class Run:
    """One closed-loop run of one mode: its percentiles (s) and what it cost."""

    p50: float
    p99: float
    creates: int
    failed: int
    calls: float  # webhook calls, all webhooks together
    cpu: dict[str, float]  # CPU seconds per process

    def cpu_per_create(self, process: str | None = None) -> float:
        """CPU seconds per create of ``process``, or of every process counted when ``None``."""
        total = sum(self.cpu.values()) if process is None else self.cpu[process]
        return total / max(self.creates, 1)


Samples = dict[str, list[Run]]  # mode -> one Run per round


def quantile(values: list[float], q: float) -> float:
    """Nearest-rank quantile."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered) + 0.5) - 1))]


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f}"


def manifest(kind: str) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load((ROOT / "examples" / MANIFESTS[kind]).read_text())
    return doc


def fixed(cp: ControlPlane) -> dict[str, Any]:
    """The GPU example as ``dask-gpu-parity fix --nodes`` writes it with the ground's Nodes."""
    with tempfile.TemporaryDirectory() as folder:
        nodes = Path(folder) / "nodes.yaml"
        nodes.write_text(cp.kubectl("get", "nodes", "-o", "yaml").stdout)
        out = subprocess.run(
            [
                str(Path(sys.executable).with_name("dask-gpu-parity")),
                *("fix", "--nodes", str(nodes), str(ROOT / "examples" / MANIFESTS["gpu"])),
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    doc: dict[str, Any] = yaml.safe_load(out)
    return doc


class Load:
    """Closed-loop DaskCluster creates against the API server (aiohttp, one connection each)."""

    def __init__(self, ground: ProvingGround) -> None:
        cp = ground.control_plane
        self.server = cp.server
        self.context = ssl.create_default_context(cafile=str(cp.ca_cert_path))
        self.context.load_cert_chain(cp.pki / "admin.crt", cp.pki / "admin.key")
        self.templates = {kind: manifest(kind) for kind in MANIFESTS}
        self.templates["fixed"] = fixed(cp)
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


def cel_literal(value: Any) -> str:
    """``value`` (JSON) as a CEL literal.

    Kubernetes' CEL wants aggregate literals homogeneous: an aggregate's elements are wrapped in
    ``dyn()`` unless they are scalars of one type.
    """
    if isinstance(value, dict):
        items = [(json.dumps(k), v) for k, v in value.items()]
        wrap = _mixed([v for _, v in items])
        return "{" + ", ".join(f"{k}: {_dyn(cel_literal(v), wrap)}" for k, v in items) + "}"
    if isinstance(value, list):
        wrap = _mixed(value)
        return "[" + ", ".join(_dyn(cel_literal(v), wrap) for v in value) + "]"
    if value is None:
        return "null"
    if isinstance(value, bool | str):
        return json.dumps(value)
    if isinstance(value, int | float):
        return repr(value)
    raise TypeError(f"not a JSON value: {value!r}")


def _mixed(values: list[Any]) -> bool:
    """Whether a literal of ``values`` needs ``dyn()``: anything but scalars of one type."""
    return any(isinstance(v, dict | list) for v in values) or len({type(v) for v in values}) > 1


def _dyn(literal: str, wrap: bool) -> str:
    return f"dyn({literal})" if wrap else literal


def cel_full_policies(patch: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The CEL peer doing all of ``patch`` (our answer): the same operations, in CEL.

    The ``cel`` peer's MutatingAdmissionPolicy with its mutation replaced by one JSONPatch
    expression listing ``patch``'s operations (each ``add``, same path, same value), bound to the
    namespaces labelled ``cel-full``, and the ``cel`` peer's ValidatingAdmissionPolicy (DGP001)
    bound there too. Unconditional: the benchmark creates the GPU example only, which is what
    ``patch`` answers.
    """
    docs = {(d["kind"], d["metadata"]["name"]): d for d in cel_policies()}
    peer = "dgp-cel-peer-scheduler-gpu"
    name = "dgp-cel-full-peer"
    ops = []
    for op in patch:
        if op["op"] != "add":
            raise ValueError(f"only add operations are written in CEL: {op}")
        ops.append(
            f"JSONPatch{{op: {json.dumps(op['op'])}, path: {json.dumps(op['path'])}, "
            f"value: {cel_literal(op['value'])}}}"
        )
    policy = copy.deepcopy(docs[("MutatingAdmissionPolicy", peer)])
    policy["metadata"]["name"] = name
    del policy["spec"]["variables"]
    policy["spec"]["mutations"] = [
        {"patchType": "JSONPatch", "jsonPatch": {"expression": "[" + ", ".join(ops) + "]"}}
    ]
    binding = copy.deepcopy(docs[("MutatingAdmissionPolicyBinding", peer)])
    binding["metadata"]["name"] = name
    binding["spec"]["policyName"] = name
    validating = copy.deepcopy(docs[("ValidatingAdmissionPolicyBinding", "dgp-cel-peer-dgp001")])
    validating["metadata"]["name"] = "dgp-cel-full-peer-dgp001"
    for doc in (binding, validating):
        doc["spec"]["matchResources"]["namespaceSelector"]["matchLabels"][LABEL] = "cel-full"
    return [policy, binding, validating]


def captured_patch(parity: ParityOperator, body: bytes, namespace: str) -> dict[str, Any]:
    """Our webhook's JSON Patch and warnings for the DaskCluster ``body`` (its review's answer)."""
    review = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": str(uuid.uuid4()),
            "kind": {"group": DASK[0], "version": DASK[1], "kind": "DaskCluster"},
            "resource": {"group": DASK[0], "version": DASK[1], "resource": "daskclusters"},
            "operation": "CREATE",
            "userInfo": {"username": "bench"},
            "namespace": namespace,
            "object": json.loads(body),
            "dryRun": False,
        },
    }
    status, raw = parity.post("/mutate-daskcluster", json.dumps(review).encode())
    if status != 200:
        raise RuntimeError(f"our webhook answered {status}: {raw[:300]!r}")
    response = json.loads(raw)["response"]
    if not response["allowed"] or "patch" not in response:
        raise RuntimeError(f"our webhook did not patch the GPU example: {response}")
    return {
        "patch": json.loads(base64.b64decode(response["patch"])),
        "warnings": response.get("warnings", []),
    }


class Floor:
    """The floor webhook (``benchmarks/floor/``), built with ``go build``, on a loopback port.

    ``/allow`` answers every review allowed with no patch; ``/patch`` with ``patch`` verbatim.
    """

    def __init__(self, cp: ControlPlane, folder: Path, patch: dict[str, Any]) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        binary = folder / "floor-webhook"
        subprocess.run(
            ["go", "build", "-trimpath", "-o", str(binary), "."],
            cwd=FLOOR_SOURCE,
            env={**os.environ, "CGO_ENABLED": "0"},
            check=True,
        )
        self.cert, self.key = cp.issue_serving_cert(["127.0.0.1"], name="floor-webhook-serving")
        self.ca = cp.ca_cert_path
        (folder / "patch.json").write_text(json.dumps(patch))
        self.port = free_port()
        self.process = Process(
            "floor-webhook",
            [
                *(binary, "-addr", f"127.0.0.1:{self.port}"),
                *("-cert", self.cert, "-key", self.key, "-patch", folder / "patch.json"),
            ],
            cp.logs / "floor-webhook.log",
        )
        self.process.wait_until(self._tls_accepts, 30, "serving TLS", interval=0.1)

    def _tls_accepts(self) -> bool:
        context = ssl.create_default_context(cafile=str(self.ca))
        with (
            socket.create_connection(("127.0.0.1", self.port), timeout=2) as raw,
            context.wrap_socket(raw, server_hostname="127.0.0.1"),
        ):
            return True

    def configuration(self) -> dict[str, Any]:
        """One MutatingWebhookConfiguration: DaskCluster CREATE, each path in its namespace."""
        ca_bundle = base64.b64encode(self.ca.read_bytes()).decode()
        return {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": "dask-gpu-parity-bench-floor"},
            "webhooks": [
                {
                    "name": f"{mode}.bench.dask-gpu-parity.io",
                    "admissionReviewVersions": ["v1"],
                    "clientConfig": {
                        "url": f"https://127.0.0.1:{self.port}/{path}",
                        "caBundle": ca_bundle,
                    },
                    "rules": [
                        {
                            "apiGroups": [DASK[0]],
                            "apiVersions": [DASK[1]],
                            "operations": ["CREATE"],
                            "resources": ["daskclusters"],
                            "scope": "Namespaced",
                        }
                    ],
                    "matchPolicy": "Equivalent",
                    "sideEffects": "None",
                    "failurePolicy": "Fail",
                    "timeoutSeconds": 10,  # as ours (webhooks())
                    "reinvocationPolicy": "Never",
                    "namespaceSelector": {
                        "matchExpressions": [{"key": LABEL, "operator": "In", "values": [mode]}]
                    },
                }
                for mode, path in zip(FLOORS, ("allow", "patch"), strict=True)
            ],
        }

    def stop(self) -> None:
        self.process.stop()


class Bench:
    """The proving ground, our operator, the admission set-ups, and what was measured."""

    def __init__(
        self,
        ground: ProvingGround,
        parity: ParityOperator,
        before: ParityOperator | None = None,
        *,
        before_current: bool = False,
    ) -> None:
        assert ground.api is not None  # the caller started the proving ground
        self.api = ground.api
        self.run_dir = ground.control_plane.run_dir
        self.floor: Floor | None = None  # started by ready(), once our webhook answers
        self.before_current = before_current  # the before commit has today's webhooks and form
        self.cp = ground.control_plane
        self.parity = parity
        self.before = before
        self.modes = [m for m in MODES if before is not None or "before" not in m]
        self.gpu_modes = [m for m in self.modes if MODES[m][0] != "cpu"]
        self.load = Load(ground)
        self.namespaces = {MODES[m][1]: f"bench-{MODES[m][1]}" for m in self.modes}
        for label, namespace in self.namespaces.items():
            self.cp.kubectl("create", "namespace", namespace)
            self.cp.kubectl("label", "namespace", namespace, f"{LABEL}={label}")
        configs = [*webhooks(parity, "after", matched=True), *cel_policies()]
        if before is not None:
            configs += webhooks(before, "before", matched=before_current)
        self.apply(configs)

    def apply(self, docs: list[dict[str, Any]]) -> None:
        self.cp.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(docs))

    def snapshot(self) -> tuple[dict[str, float], float]:
        """CPU seconds per process (both operators together), and every webhook call so far."""
        text = self.cp.kubectl("get", "--raw", "/metrics").stdout
        operators = [self.parity.process, self.before.process if self.before else None]
        cpu = {
            "dask-gpu-parity": sum(cpu_seconds(p.pid) for p in operators if p is not None),
            "kube-apiserver": cpu_seconds(self.cp.processes["kube-apiserver"].pid),
            "etcd": cpu_seconds(self.cp.processes["etcd"].pid),
            "floor-webhook": cpu_seconds(self.floor.process.pid) if self.floor else 0.0,
        }
        return cpu, sum(webhook_calls(text).values())

    def stored(self, mode: str) -> dict[str, Any]:
        """One create in ``mode``'s namespace, read back as the API server stores it.

        ``_bytes`` is its size; ``_as_sent`` whether its spec is the one sent (nothing patched).
        """
        kind, label = MODES[mode]
        name = f"size-{mode}"
        namespace = self.namespaces[label]
        url = f"/apis/{DASK[0]}/{DASK[1]}/namespaces/{namespace}/daskclusters"
        body = self.load.body(namespace, kind, name=name)
        self.cp.kubectl("create", "--raw", url, "-f", "-", input=body.decode())
        raw = self.cp.kubectl("get", "--raw", f"{url}/{name}").stdout
        obj: dict[str, Any] = json.loads(raw)
        obj["_bytes"] = len(raw.encode())
        obj["_as_sent"] = obj["spec"] == json.loads(body)["spec"]
        return obj

    def _before_ready(self, inits: list[dict[str, Any]]) -> bool:
        if self.before_current:
            return [c["name"] for c in inits] == [COPY, "gpu-parity-check"]
        # e209ac6's own form: the GPU in requests too, the probe's source inline
        return (
            [c["name"] for c in inits] == ["gpu-parity-check"]
            and "nvidia.com/gpu" in inits[0]["resources"]["requests"]
            and inits[0]["command"][:3] == ["python", "-I", "-c"]
        )

    def start_floor(self) -> None:
        """Capture our webhook's answer to the GPU example; start the peers made of it.

        The floor webhook, wired in, and the CEL peer doing the same mutation (``cel-full``).
        """
        body = self.load.body(self.namespaces["after"], "gpu")
        patch = captured_patch(self.parity, body, self.namespaces["after"])
        print(
            f"captured our patch: {len(patch['patch'])} operations, "
            f"{len(json.dumps(patch['patch'])):,} bytes, {len(patch['warnings'])} warnings",
            flush=True,
        )
        self.floor = Floor(self.cp, self.run_dir / "floor", patch)
        self.apply([self.floor.configuration()])
        try:  # the API server compiles the policy's CEL: refused is a bug here, not a wait
            self.apply(cel_full_policies(patch["patch"]))
        except RuntimeError as exc:
            raise ValueError(f"the CEL peer of our patch was refused: {exc}") from exc
        status = self.cp.kubectl(
            "get", "mutatingadmissionpolicy", "dgp-cel-full-peer", "-o", "jsonpath={.status}"
        ).stdout
        print(f"cel-full policy status: {status or '(none)'}", flush=True)

    def stop(self) -> None:
        if self.floor is not None:
            self.floor.stop()

    def ready(self, timeout: float = 120) -> None:
        """Every set-up answers as designed (policies and indices warm, CEL compiled).

        The floor webhook starts once ours answers as designed (its patch is our answer then).
        """
        deadline = time.monotonic() + timeout
        why = ""
        webhooked = [m for m in ("before", "after") if m in self.modes]
        while True:
            try:
                specs = {m: self.stored(m)["spec"]["scheduler"]["spec"] for m in webhooked}
                inits = {mode: spec.get("initContainers", []) for mode, spec in specs.items()}
                scheduler = self.stored("cel")["spec"]["scheduler"]["spec"]["containers"][0]
                checks = {
                    "after's init containers": [c["name"] for c in inits["after"]]
                    == [COPY, "gpu-parity-check"],
                    "the CEL peer's scheduler GPU": scheduler.get("resources", {})
                    .get("limits", {})
                    .get("nvidia.com/gpu")
                    == "1",
                }
                # The inventory needs no check of its own: the operator opens its port only once
                # Nodes are listed in full (docs/operator.md, "Ready means right").
                if "before" in inits:
                    checks["before's init containers"] = self._before_ready(inits["before"])
                    if self.before_current:  # two operators of today answer alike
                        checks["before answers as after"] = specs["before"] == specs["after"]
                if self.floor is not None:
                    # (no admission's spec is not quite as sent: the API server prunes it)
                    floor, none = (self.stored(m)["spec"]["scheduler"] for m in ("floor", "none"))
                    patched = self.stored("floor-patch")["spec"]["scheduler"]["spec"]
                    checks["floor stores as none"] = floor == none
                    checks["floor-patch's init containers"] = [
                        c["name"] for c in patched.get("initContainers", [])
                    ] == [COPY, "gpu-parity-check"]
                    # the same mutation in CEL stores the same scheduler as our webhook's answer
                    cel_full = self.stored("cel-full")["spec"]["scheduler"]["spec"]
                    checks["cel-full stores as after"] = cel_full == specs["after"]
                if all(checks.values()):
                    if self.floor is not None:
                        print(f"floor-patch stores as after: {patched == specs['after']}")
                        print("cel-full stores as after: True")
                        return
                    self.start_floor()
                    continue
                why = "not yet: " + ", ".join(k for k, ok in checks.items() if not ok)
            except (RuntimeError, KeyError, IndexError) as exc:
                why = f"{type(exc).__name__}: {exc}"
            finally:
                for mode in (*webhooked, "cel", "cel-full", *FLOORS, "none"):
                    delete_all(self.api, self.namespaces[MODES[mode][1]])
            if time.monotonic() > deadline:
                raise TimeoutError(f"the admission set-ups did not answer as designed ({why})")
            time.sleep(1)

    def sizes(self) -> dict[str, dict[str, int]]:
        """Stored DaskCluster and dry-run scheduler Pod sizes (bytes of JSON) per GPU mode."""
        out: dict[str, dict[str, int]] = {}
        for mode in self.gpu_modes:
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
            fields = {k: v for k, v in obj.items() if not k.startswith("_")}
            fields["metadata"] = {
                k: v for k, v in fields["metadata"].items() if k != "managedFields"
            }
            out[mode] = {
                "stored": obj["_bytes"],
                "no managedFields": len(json.dumps(fields, separators=(",", ":"))),
                "pod": len(raw),
                "as sent": int(obj["_as_sent"]),
            }
            delete_all(self.api, namespace)
        written = json.loads(self.load.body("x", "gpu", name="size"))
        out["input"] = {"stored": len(json.dumps(written, separators=(",", ":")))}
        return out

    def warm_up(self) -> None:
        """Connections, caches and lazy imports, on every path."""
        for mode in self.modes:
            kind, label = MODES[mode]
            asyncio.run(self.load.run(self.namespaces[label], kind, 10, 60))
            delete_all(self.api, self.namespaces[label])
            print(f"warmed up {mode}", flush=True)

    def run(self, mode: str, clients: int, requests: int) -> Run:
        """One closed-loop run of ``requests`` creates by ``clients`` clients."""
        kind, label = MODES[mode]
        namespace = self.namespaces[label]
        cpu_before, calls_before = self.snapshot()
        lat, failed = asyncio.run(self.load.run(namespace, kind, clients, requests))
        cpu_after, calls_after = self.snapshot()
        for failure in failed[:3]:
            print(f"  failed ({mode}): {failure}", flush=True)
        delete_all(self.api, namespace)
        if not lat:
            raise RuntimeError(f"Every create of run ({mode}) failed")
        return Run(
            p50=quantile(lat, 0.5),
            p99=quantile(lat, 0.99),
            creates=requests,
            failed=len(failed),
            calls=calls_after - calls_before,
            cpu={name: cpu_after[name] - cpu_before[name] for name in PROCESSES},
        )


def measure(
    bench: Bench, levels_list: list[int], requests: dict[int, int], rounds: int
) -> dict[int, Samples]:
    """Every level, ``rounds`` times each mode, the order rotating every round."""
    levels: dict[int, Samples] = {}
    order = list(bench.modes)
    for clients in levels_list:
        levels[clients] = {mode: [] for mode in order}
        for round_ in range(rounds):
            shift = round_ % len(order)
            for mode in order[shift:] + order[:shift]:
                run = bench.run(mode, clients, requests[clients])
                levels[clients][mode].append(run)
                print(
                    f"clients={clients:>3} round={round_} {mode:>10}: "
                    f"p50 {ms(run.p50)} ms  p99 {ms(run.p99)} ms  "
                    f"cpu/create {ms(run.cpu_per_create())} ms",
                    flush=True,
                )
    return levels


def base_of(mode: str) -> str:
    """The mode whose figures ``mode``'s are compared with: no admission, same manifest."""
    return "cpu-none" if mode.startswith("cpu-") else "none"


def added(samples: Samples, mode: str, figure: Callable[[Run], float]) -> list[float]:
    """Per round: ``figure`` of ``mode`` minus that of no admission in the same round."""
    return [
        figure(run) - figure(base)
        for run, base in zip(samples[mode], samples[base_of(mode)], strict=True)
    ]


def ratios(ours: list[float], peer: list[float]) -> list[float]:
    """Per round: ours / the peer's (infinite where the peer added nothing)."""
    return [o / p if p > 0 else math.inf for o, p in zip(ours, peer, strict=True)]


def spread(values: list[float], fmt: Callable[[float], str] = ms) -> str:
    """The rounds' min-max."""
    return f"{fmt(min(values))} to {fmt(max(values))}"


def times(value: float) -> str:
    """A ratio, one decimal."""
    return f"{value:.1f}" if math.isfinite(value) else "∞"


def _p50(run: Run) -> float:
    return run.p50


def _p99(run: Run) -> float:
    return run.p99


def pooled(levels: dict[int, Samples], mode: str) -> list[Run]:
    """Per round: every level's run of ``mode`` together (CPU and creates summed)."""
    per_level = [samples[mode] for samples in levels.values()]
    return [
        Run(
            p50=0.0,
            p99=0.0,
            creates=sum(r.creates for r in runs),
            failed=sum(r.failed for r in runs),
            calls=sum(r.calls for r in runs),
            cpu={name: sum(r.cpu[name] for r in runs) for name in PROCESSES},
        )
        for runs in zip(*per_level, strict=True)
    ]


def added_cpu(levels: dict[int, Samples], mode: str) -> list[float]:
    """Per round: CPU per create of ``mode`` minus no admission's, every level's runs pooled."""
    base = pooled(levels, base_of(mode))
    return [
        r.cpu_per_create() - b.cpu_per_create()
        for r, b in zip(pooled(levels, mode), base, strict=True)
    ]


def _latency_lines(levels: dict[int, Samples], modes: list[str]) -> list[str]:
    lines = [
        "| clients | mode | p50 | **added p50** | added p50, rounds | p99 | added p99 "
        "| webhook calls per create |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for clients, samples in levels.items():
        for mode in modes:
            runs = samples[mode]
            calls = sum(r.calls for r in runs) / max(sum(r.creates for r in runs), 1)
            p50 = ms(statistics.median(r.p50 for r in runs))
            p99 = ms(statistics.median(r.p99 for r in runs))
            if mode == base_of(mode):
                lines.append(f"| {clients} | {mode} | {p50} |  |  | {p99} |  | {calls:.2f} |")
                continue
            a50, a99 = added(samples, mode, _p50), added(samples, mode, _p99)
            lines.append(
                f"| {clients} | {mode} | {p50} | **{ms(statistics.median(a50))}** | "
                f"{spread(a50)} | {p99} | {ms(statistics.median(a99))} | {calls:.2f} |"
            )
    return lines


def compared(modes: list[str]) -> tuple[list[str], list[tuple[str, str]]]:
    """The modes whose added figures each round shows, and the (mode, peer) pairs of ratios.

    Ours and the floor webhook's against the CEL peer, ours against the floor with our patch,
    and ours, the floor with our patch and the CEL peer against the CEL peer doing our mutation.
    """
    ours = [m for m in modes if m in ("before", "after")]
    floors = [m for m in FLOORS if m in modes]
    full = [m for m in ("cel-full",) if m in modes]
    pairs = [(m, "cel") for m in (*ours, *floors)]
    if "after" in modes and "floor-patch" in modes:
        pairs.append(("after", "floor-patch"))
    if full:
        pairs += [(m, "cel-full") for m in ("after", "floor-patch") if m in modes]
        pairs.append(("cel-full", "cel"))
    return [*ours, "cel", *full, *floors], pairs


def _round_lines(levels: dict[int, Samples], modes: list[str]) -> list[str]:
    """Each round's own added p50 (ms) and CPU per create (ms, every process counted)."""
    shown, pairs = compared(modes)
    head = ["none p50", *(f"{m} added p50" for m in shown)]
    head += [f"{m}/{peer}" for m, peer in pairs]
    head += ["none CPU", *(f"{m} added CPU" for m in shown)]
    head += [f"{m}/{peer} CPU" for m, peer in pairs]
    lines = [
        "| clients | round | " + " | ".join(head) + " |",
        "| --- | --- |" + " --- |" * len(head),
    ]
    for clients, samples in levels.items():
        lat = {m: added(samples, m, _p50) for m in shown}
        cpu = {m: added(samples, m, Run.cpu_per_create) for m in shown}
        for n, base in enumerate(samples["none"]):
            cells = [ms(base.p50), *(ms(lat[m][n]) for m in shown)]
            cells += [times(ratios(lat[m], lat[peer])[n]) for m, peer in pairs]
            cells += [ms(base.cpu_per_create()), *(ms(cpu[m][n]) for m in shown)]
            cells += [times(ratios(cpu[m], cpu[peer])[n]) for m, peer in pairs]
            lines.append(f"| {clients} | {n} | " + " | ".join(cells) + " |")
    return lines


def _cpu_lines(levels: dict[int, Samples], modes: list[str]) -> list[str]:
    """CPU per create per process: the median of the rounds (all levels pooled), min-max."""
    rounds = {mode: pooled(levels, mode) for mode in modes}
    lines = [
        "| process | " + " | ".join(modes) + " |",
        "| --- |" + " --- |" * len(modes),
    ]
    for name in (*PROCESSES, None):
        cells = []
        for mode in modes:
            values = [r.cpu_per_create(name) for r in rounds[mode]]
            cells.append(f"{ms(statistics.median(values))} ({spread(values)})")
        lines.append(f"| {name or 'all'} | " + " | ".join(cells) + " |")
    cells = []
    for mode in modes:
        if mode == base_of(mode):
            cells.append("")
            continue
        values = added_cpu(levels, mode)
        cells.append(f"**{ms(statistics.median(values))}** ({spread(values)})")
    lines.append("| **added** (all) | " + " | ".join(cells) + " |")
    return lines


def _cpu_round_lines(levels: dict[int, Samples], modes: list[str]) -> list[str]:
    """CPU per create per process, every round and level, for the GPU modes."""
    lines = [
        "| clients | round | mode | " + " | ".join(PROCESSES) + " | all |",
        "| --- | --- | --- |" + " --- |" * (len(PROCESSES) + 1),
    ]
    for clients, samples in levels.items():
        for n in range(len(samples["none"])):
            for mode in modes:
                run = samples[mode][n]
                cells = [ms(run.cpu_per_create(p)) for p in (*PROCESSES, None)]
                lines.append(f"| {clients} | {n} | {mode} | " + " | ".join(cells) + " |")
    return lines


def _compared(ours: list[float], theirs: list[float]) -> tuple[float, str]:
    """The ratio of the two medians, and the rounds' own ratios (range, median) as words."""
    (ratio,) = ratios([statistics.median(ours)], [statistics.median(theirs)])
    each = ratios(ours, theirs)
    return (
        ratio,
        f"the rounds' own ratios {spread(each, times)}, median {times(statistics.median(each))}",
    )


def _against_peer(what: str, ours: list[float], peer: list[float], rounds: str = "") -> str:
    """One goal's line: our median and the CEL peer's, their ratio against 2x, the rounds'."""
    ratio, each = _compared(ours, peer)
    return (
        f"- {what}: {ms(statistics.median(ours))} ms ours, {ms(statistics.median(peer))} ms the "
        f"CEL peer's{rounds}: **{times(ratio)}x** (target at most 2x: "
        f"**{'met' if ratio <= 2 else 'missed'}**); {each}"
    )


def goals(levels: dict[int, Samples]) -> list[str]:
    """The issue's goals: added p50 and added CPU per create at most 2x the CEL peer's."""
    lines = []
    for clients, samples in levels.items():
        ours, peer = added(samples, "after", _p50), added(samples, "cel", _p50)
        what = f"added p50 at {clients} client{'s' if clients > 1 else ''}"
        lines.append(_against_peer(what, ours, peer, f" (medians of {len(ours)} rounds)") + ";")
    ours, peer = added_cpu(levels, "after"), added_cpu(levels, "cel")
    what = (
        "added CPU per create (kube-apiserver + etcd + our operator + the floor webhook, "
        "all levels)"
    )
    lines.append(_against_peer(what, ours, peer) + ".")
    return lines


def _side_by_side(what: str, mode: str, peer: str, ours: list[float], theirs: list[float]) -> str:
    """One comparison's line: both medians, their ratio, the rounds' own ratios."""
    ratio, each = _compared(ours, theirs)
    return (
        f"- {what}: `{mode}` {ms(statistics.median(ours))} ms ({spread(ours)}), `{peer}` "
        f"{ms(statistics.median(theirs))} ms ({spread(theirs)}): **{times(ratio)}x**; {each}"
    )


def peer_lines(levels: dict[int, Samples]) -> list[str]:
    """Every comparison but the goals' (ours against the CEL peer): the floor and full CEL peers."""
    modes = list(next(iter(levels.values())))
    _, pairs = compared(modes)
    lines = []
    for mode, peer in pairs:
        if (mode, peer) in (("before", "cel"), ("after", "cel")):
            continue
        for clients, samples in levels.items():
            what = f"added p50 at {clients} client{'s' if clients > 1 else ''}"
            ours, theirs = added(samples, mode, _p50), added(samples, peer, _p50)
            lines.append(_side_by_side(what, mode, peer, ours, theirs) + ";")
        ours, theirs = added_cpu(levels, mode), added_cpu(levels, peer)
        lines.append(_side_by_side("added CPU per create", mode, peer, ours, theirs) + ";")
    if lines:
        lines[-1] = lines[-1][:-1] + "."
    return lines


def report(
    setup: dict[str, Any],
    levels: dict[int, Samples],
    sizes: dict[str, dict[str, int]],
    bench: Bench,
) -> str:
    modes, gpu_modes = bench.modes, bench.gpu_modes
    one = min(levels)
    if setup["before"] is None:
        before = ""
    elif setup["before_current"]:
        before = (
            f"`before`: commit {setup['before']}, its own operator, with the same webhook "
            "configurations as `after`. "
        )
    else:
        before = (
            f"`before`: commit {setup['before']}, its own operator and webhook configurations "
            "as of main e209ac6 (both webhooks called for every Dask create). "
        )
    lines = [
        "## Admission latency",
        "",
        f"Measured {setup['date']} on {setup['machine']}, shared with other work (load average "
        f"{setup['load']} at the start); Kubernetes "
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
        + before
        + "`after`: this tree (webhooks behind matchConditions: none called for a CPU-only "
        "create, one for a GPU create). `cel`: the CEL peer (`benchmarks/cel/`: a "
        "MutatingAdmissionPolicy and a ValidatingAdmissionPolicy doing only the core mutation "
        "and DGP001, no webhook). "
        + (
            "`floor`: the least any webhook can do (`benchmarks/floor/`: a mutating webhook in "
            "Go, standard library only, TLS on loopback with HTTP/1.1 and HTTP/2 as net/http "
            "serves them, answering every review allowed with no patch; failurePolicy Fail, our "
            "timeout, no matchConditions). `floor-patch`: the same server answering with the "
            "JSON Patch and warnings our webhook returns for the GPU example (captured once at "
            "set-up from our operator's answer), verbatim: a parity-sized mutation through any "
            "webhook, the webhook's own work at about zero. "
            if "floor" in modes
            else ""
        )
        + (
            "`cel-full`: the CEL peer doing all of our mutation (a MutatingAdmissionPolicy "
            "generated at set-up from the same captured patch: each operation a CEL `JSONPatch` "
            "of the same path and value, unconditional; the `cel` peer's DGP001 "
            "ValidatingAdmissionPolicy and matchConditions; no warnings, which a "
            "MutatingAdmissionPolicy cannot return), storing the same scheduler spec as `after`. "
            if "cel-full" in modes
            else ""
        )
        + "`fixed`: the GPU example after `dask-gpu-parity fix --nodes` "
        "(this ground's Nodes), in the `after` namespace. Rounds interleave the modes (order "
        "rotating per round); p50 "
        f"and p99 are the median over {setup['rounds']} rounds of each run's percentile, in ms; "
        "*added* is the median of each round's own difference to `none` in that round "
        "(`cpu-none` for the CPU modes), with the rounds' min-max.",
        "",
        *_latency_lines(levels, modes),
        "",
        "Goals (issue 25), in this run:",
        "",
        *goals(levels),
        "",
        *(
            [
                "The peers, side by side in this run (medians of the rounds, their "
                "min-max in brackets):",
                "",
                *peer_lines(levels),
                "",
            ]
            if "floor" in modes or "cel-full" in modes
            else []
        ),
        "Each round (ms; added is the mode minus `none` in the same round; CPU per create is "
        "kube-apiserver + etcd + our operator + the floor webhook, each process's CPU counted "
        "in every mode):",
        "",
        *_round_lines(levels, modes),
        "",
        "CPU time per create (ms; each process's user + system time over a run, divided by its "
        "creates; the median of the rounds with both levels' runs of a round together, and the "
        "rounds' min-max; the machine's other work is not in it):",
        "",
        *_cpu_lines(levels, modes),
        "",
        "Per process, every round (ms per create):",
        "",
        *_cpu_round_lines(levels, gpu_modes),
        "",
    ]
    calls = {
        m: sum(r.calls for s in levels.values() for r in s[m])
        / max(sum(r.creates for s in levels.values() for r in s[m]), 1)
        for m in modes
    }
    growth = sizes["after"]["stored"] - sizes["none"]["stored"]
    lines += [
        f"A CPU-only DaskCluster: {calls['cpu-after']:.2f} webhook calls per create, added p50 "
        f"{ms(statistics.median(added(levels[one], 'cpu-after', _p50)))} ms at {one} client. "
        f"The stored DaskCluster is {growth:,} bytes larger than as written (none) after.",
    ]
    if "fixed" in modes:
        fixed_calls = calls["fixed"]
        bigger = sizes["fixed"]["stored"] - sizes["none"]["stored"]
        lines += [
            "",
            "A `fix`ed manifest (`fixed`: the GPU example as `dask-gpu-parity fix --nodes` writes "
            "it with this ground's Nodes, created in the `after` namespace): "
            f"{fixed_calls:.2f} webhook calls per create, added p50 "
            + ", ".join(
                f"{ms(statistics.median(added(s, 'fixed', _p50)))} ms at {c} client"
                + ("s" if c > 1 else "")
                for c, s in levels.items()
            )
            + f" (over `none`, whose DaskCluster is {bigger:,} bytes smaller as stored); its "
            "spec stored exactly as sent: "
            + (
                "yes."
                if sizes["fixed"]["as sent"]
                else "no (the API server's own defaulting "
                "and pruning count here as much as a patch)."
            ),
        ]
    lines += [
        "",
        "Sizes (bytes of JSON; the Pod is what the dask operator's "
        "`build_scheduler_deployment_spec` makes of the stored scheduler spec, created with "
        "`dryRun`):",
        "",
        "| | stored DaskCluster | without managedFields | scheduler Pod |",
        "| --- | --- | --- | --- |",
        f"| as sent (compact JSON) | {sizes['input']['stored']:,} | | |",
    ]
    for mode in gpu_modes:
        s = sizes[mode]
        lines.append(f"| {mode} | {s['stored']:,} | {s['no managedFields']:,} | {s['pod']:,} |")
    count = {m: sum(r.creates for s in levels.values() for r in s[m]) for m in modes}
    failed = {m: sum(r.failed for s in levels.values() for r in s[m]) for m in modes}
    lines += [
        "",
        f"Creates: {sum(count.values())} in all; **failed: {sum(failed.values())}** "
        f"({', '.join(f'{m}: {n}' for m, n in failed.items())}).",
        "",
    ]
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
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--concurrency", default="1,10")
    parser.add_argument("--requests", default="300,600", help="creates per run, per level")
    parser.add_argument("--run-dir", type=Path, default=ROOT / ".run" / "bench-admission")
    parser.add_argument("--write", type=Path, help="put the section into this Markdown file")
    parser.add_argument("--json", type=Path, help="write every run's figures to this file")
    parser.add_argument(
        "--before",
        metavar="COMMIT",
        help="also run this commit's operator as mode before (off by default; "
        f"{E209AC6_STARTS} is main e209ac6 that starts)",
    )
    parser.add_argument(
        "--before-current",
        action="store_true",
        help="the before commit has today's webhooks (matchConditions, the verifier by "
        "reference): compare two versions of the operator like for like",
    )
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    levels_list = [int(c) for c in args.concurrency.split(",")]
    requests = dict(zip(levels_list, (int(r) for r in args.requests.split(",")), strict=True))
    if args.run_dir.exists():
        shutil.rmtree(args.run_dir)
    words = sys.argv[1:] if argv is None else argv
    setup = {
        "date": dt.date.today().isoformat(),
        "machine": f"{os.cpu_count()} CPUs ({platform.machine()}), "
        f"Python {platform.python_version()}",
        "load": " / ".join(f"{v:.1f}" for v in os.getloadavg()),
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
        before = before_operator(ground, args.run_dir, args.before) if args.before else None
        bench = Bench(ground, parity, before, before_current=args.before_current)
        try:
            bench.ready()
            print(f"dask-gpu-parity ready in {parity.ready_seconds:.1f}s", flush=True)
            sizes = bench.sizes()
            print(json.dumps(sizes), flush=True)
            bench.warm_up()
            levels = measure(bench, levels_list, requests, args.rounds)
        finally:
            bench.stop()
        if before is not None:
            before.stop()
        parity.uninstall()
    section = report(setup, levels, sizes, bench)
    print("\n" + section)
    if args.json:
        runs = {c: {m: [asdict(r) for r in rs] for m, rs in s.items()} for c, s in levels.items()}
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps({"setup": setup, "sizes": sizes, "runs": runs}, indent=1))
    if args.write:
        write_section(args.write, section)
        print(f"Wrote the section into {args.write}")
    failed = sum(r.failed for s in levels.values() for rs in s.values() for r in rs)
    return 0 if not failed else 1


if __name__ == "__main__":
    sys.exit(main())
