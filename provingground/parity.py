"""Our operator (``dask-gpu-parity run``) on the host, wired into a proving ground's API server.

Plain Python, no pytest: the e2e fixtures and ``benchmarks/admission_latency.py`` share it.
The API server calls the webhooks at ``https://127.0.0.1:<port>``, so this needs an API server on
the same host (the proving ground), with a CA whose key we hold to sign the serving certificate.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import http.client
import json
import os
import re
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException
from prometheus_client.parser import text_string_to_metric_families

from .cluster import ControlPlane, free_port
from .objects import as_dict, name_of, present
from .placement import PodPlacement, format_table, wait_for_placements
from .process import Process

__all__ = [
    "EXAMPLES",
    "REPO",
    "Kubectl",
    "ParityOperator",
    "Result",
    "assert_scheduler_parity",
    "cluster_objects",
    "dask_object",
    "eventually",
    "example",
    "parse_warnings",
    "policy_for",
    "run_kubectl",
    "webhook_config",
]

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples"
WEBHOOK_CONFIGS = (
    "mutatingwebhookconfiguration/dask-gpu-parity",
    "validatingwebhookconfiguration/dask-gpu-parity",
)
DASK = ("kubernetes.dask.org", "v1")
POLICY_CRD = "daskgpupolicies.gpuparity.dask.org"
_WARNING = re.compile(r"^Warning: (.*)$", re.MULTILINE)
T = TypeVar("T")


def example(file: str, /, **metadata: Any) -> dict[str, Any]:
    """An ``examples/`` manifest as a dict, with ``metadata`` keys set (namespace, name, ...)."""
    doc: dict[str, Any] = yaml.safe_load((EXAMPLES / file).read_text())
    doc["metadata"].update(metadata)
    return doc


def eventually(
    probe: Callable[[], T],
    *,
    timeout: float = 60,
    what: str = "",
    interval: float = 0.25,
    retry_on: tuple[type[Exception], ...] = (AssertionError,),
) -> T:
    """Call ``probe`` until it returns something truthy without raising ``retry_on``.

    On timeout the last such error is raised (or an AssertionError naming ``what``), so a
    failure reads like the assertion that never became true.
    """
    deadline = time.monotonic() + timeout
    while True:
        try:
            value = probe()
        except retry_on:
            if time.monotonic() > deadline:
                raise
        else:
            if value:
                return value
            if time.monotonic() > deadline:
                raise AssertionError(f"Not true within {timeout:.0f}s: {what or probe}")
        time.sleep(interval)


class Result:
    """A finished kubectl call: rc, stdout, stderr and the API server's warnings."""

    def __init__(self, proc: subprocess.CompletedProcess[str]) -> None:
        self.rc = proc.returncode
        self.stdout = proc.stdout
        self.stderr = proc.stderr
        self.warnings = _WARNING.findall(proc.stderr)

    @property
    def json(self) -> Any:
        """Stdout parsed as JSON (``-o json``)."""
        return json.loads(self.stdout)

    def __repr__(self) -> str:
        return f"Result(rc={self.rc}, stderr={self.stderr.strip()!r})"


Kubectl = Callable[..., Result]


def webhook_config(url: str, ca: Path, failure_policy: str = "Fail") -> str:
    """``dask-gpu-parity webhook-config`` for webhooks at ``url`` (10 s timeout), as YAML."""
    proc = subprocess.run(
        [
            str(Path(sys.executable).with_name("dask-gpu-parity")),
            "webhook-config",
            "--url",
            url,
            "--ca-file",
            str(ca),
            "--failure-policy",
            failure_policy,
            "--timeout",
            "10",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return proc.stdout


def run_kubectl(kubectl_bin: str, kubeconfig: Path) -> Kubectl:
    """A kubectl that never raises: ``kubectl(*args, input=None) -> Result``."""

    def kubectl(*args: str, input: str | None = None) -> Result:
        proc = subprocess.run(
            [kubectl_bin, "--kubeconfig", str(kubeconfig), *args],
            input=input,
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
            env={**os.environ, "KUBECONFIG": str(kubeconfig)},
        )
        return Result(proc)

    return kubectl


class ParityOperator:
    """``dask-gpu-parity run`` as a subprocess plus its webhook configurations.

    ``start()`` installs our CRD, starts the operator on free loopback ports (log in
    ``log_dir/dask-gpu-parity.log``), waits for TLS on the webhook port, applies the webhook
    configurations and waits until admission answers with a warm node inventory. ``stop()``
    deletes the webhook configurations first (a dead operator must never block creates), then
    stops the process group.
    """

    def __init__(
        self,
        control_plane: ControlPlane,
        api: client.ApiClient,
        log_dir: Path,
        *,
        drift: bool = True,
        extra_args: tuple[str, ...] = (),
        executable: Path | None = None,
    ) -> None:
        self.control_plane = control_plane
        self.api = api
        self.log_path = log_dir / "dask-gpu-parity.log"
        self.kubectl = run_kubectl(str(control_plane.binaries.kubectl), control_plane.kubeconfig)
        self.cert, self.key = control_plane.issue_serving_cert(
            ["127.0.0.1", "localhost"], name="dask-gpu-parity-serving"
        )
        self.ca = control_plane.ca_cert_path
        self.port, self.metrics_port, self.health_port = _distinct_ports(3)
        self.drift = drift
        self.extra_args = extra_args
        # This venv's by default; a benchmark may run the operator from a lean one (as the image).
        self.executable = executable or Path(sys.executable).with_name("dask-gpu-parity")
        self.process: Process | None = None
        self.webhooks_applied = False
        self.owns_crd: bool | None = None  # whether start() installed our CRD
        self.ready_seconds: float | None = None
        self.started_at: dt.datetime | None = None  # when the process was last started

    # -- lifecycle ------------------------------------------------------------------------------

    @property
    def url(self) -> str:
        """Where the webhook server listens."""
        return f"https://127.0.0.1:{self.port}"

    def start(self, *, webhooks: bool = True, timeout: float = 120) -> ParityOperator:
        """Start the operator (and, by default, wire its webhooks in); return when warm."""
        t0 = time.monotonic()
        if self.owns_crd is None:  # a chart test may have installed it: then it stays
            self.owns_crd = self.kubectl("get", "crd", POLICY_CRD).rc != 0
        self._kubectl_ok("apply", "-f", str(REPO / "crds"))
        self._kubectl_ok(
            "wait",
            "--for=condition=Established",
            "--timeout=60s",
            f"crd/{POLICY_CRD}",
        )
        self.launch()
        assert self.process is not None
        try:
            self.process.wait_until(self._tls_accepts, timeout, "serving TLS", interval=0.2)
            self.process.wait_until(
                lambda: self.metrics() is not None, timeout, "serving /metrics", interval=0.2
            )
            if webhooks:
                self.apply_webhooks()
                self.process.wait_until(self._warm, timeout, "warm (indices)", interval=0.5)
        except BaseException:
            self.stop()
            raise
        self.ready_seconds = time.monotonic() - t0
        return self

    def argv(self) -> list[str]:
        """The command line of ``dask-gpu-parity run`` on this operator's ports and files."""
        return [
            str(self.executable),
            "run",
            "--tls-cert",
            str(self.cert),
            "--tls-key",
            str(self.key),
            "--address",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--metrics-port",
            str(self.metrics_port),
            "--health-port",
            str(self.health_port),
            *(() if self.drift else ("--no-drift",)),
            *self.extra_args,
        ]

    def launch(self, env: Mapping[str, str] | None = None) -> Process:
        """Start the process and return at once (benchmarks time what follows themselves)."""
        env = {**self.control_plane.env, "PYTHONWARNINGS": "ignore", **(env or {})}
        self.started_at = dt.datetime.now(dt.UTC)
        self.process = Process("dask-gpu-parity", self.argv(), self.log_path, env=env)
        return self.process

    def restart(self, *, timeout: float = 120) -> float:
        """Stop the process and start a new one, webhook configurations left in place.

        As a rolling restart with ``failurePolicy: Fail`` looks to the API server: creates fail
        while no process serves. Returns the seconds until the new one accepted TLS.
        """
        if self.process is not None:
            self.process.stop(timeout=20)
            self.process = None
        t0 = time.monotonic()
        self.start(webhooks=False, timeout=timeout)
        return time.monotonic() - t0

    def stop(self) -> None:
        """Delete the webhook configurations, then stop the process group."""
        self.delete_webhooks()
        if self.process is not None:
            self.process.stop(timeout=20)
            self.process = None

    def uninstall(self) -> None:
        """``stop()`` and remove our CRD (with every DaskGPUPolicy) if ``start()`` installed it."""
        self.stop()
        if self.owns_crd:
            self.kubectl("delete", "crd", POLICY_CRD, "--ignore-not-found", "--wait=false")

    @contextlib.contextmanager
    def stopped(self) -> Iterator[None]:
        """No webhooks and no operator inside the block; started and warm again after it."""
        self.stop()
        try:
            yield
        finally:
            self.start()

    def apply_webhooks(self, failure_policy: str = "Fail") -> None:
        """``dask-gpu-parity webhook-config`` for this operator, applied."""
        self._kubectl_ok(
            "apply", "-f", "-", input=webhook_config(self.url, self.ca, failure_policy)
        )
        self.webhooks_applied = True

    def delete_webhooks(self) -> None:
        """Remove both webhook configurations (idempotent)."""
        self.kubectl("delete", *WEBHOOK_CONFIGS, "--ignore-not-found")
        self.webhooks_applied = False

    def check_alive(self) -> None:
        """Raise with the log tail if the operator exited."""
        if self.process is None:
            raise RuntimeError("dask-gpu-parity is not running")
        self.process.check_alive()

    # -- probes -------------------------------------------------------------------------------

    def ssl_context(self) -> ssl.SSLContext:
        """A client context that trusts the proving ground's CA."""
        return ssl.create_default_context(cafile=str(self.ca))

    def _tls_accepts(self) -> bool:
        with (
            socket.create_connection(("127.0.0.1", self.port), timeout=2) as sock,
            self.ssl_context().wrap_socket(sock, server_hostname="127.0.0.1"),
        ):
            return True

    def _warm(self) -> bool:
        """Admission answers through the API server, with nodes, namespaces and policies indexed.

        The UCX example is denied with DGP013 only once the GPU node inventory is filled in.
        """
        self.check_alive()
        ucx = example("gpu-cluster-ucx.yaml", namespace="default", name="dgp-warmup")
        try:
            self.create(ucx, dry_run=True)
        except ApiException as exc:
            return "DGP013" in str(exc.body)
        return False

    def create(
        self, doc: Mapping[str, Any], *, dry_run: bool = False
    ) -> tuple[dict[str, Any], list[str]]:
        """Create a Dask resource through the API; return the stored object and the warnings."""
        group, version = doc["apiVersion"].split("/")
        plural = doc["kind"].lower() + "s"
        data, _, headers = client.CustomObjectsApi(
            self.api
        ).create_namespaced_custom_object_with_http_info(
            group,
            version,
            doc["metadata"]["namespace"],
            plural,
            dict(doc),
            dry_run="All" if dry_run else None,
            _request_timeout=60,
        )
        stored = as_dict(data, f"{doc['kind']} {doc['metadata']['name']}")
        return stored, parse_warnings(headers.get("Warning", "") if headers else "")

    def metrics(self) -> dict[tuple[str, frozenset[tuple[str, str]]], float] | None:
        """Samples of our /metrics as {(name, labels): value}, or None when not answering."""
        try:
            conn = http.client.HTTPConnection("127.0.0.1", self.metrics_port, timeout=10)
            conn.request("GET", "/metrics")
            text = conn.getresponse().read().decode()
            conn.close()
        except OSError:
            return None
        return {
            (sample.name, frozenset(sample.labels.items())): sample.value
            for family in text_string_to_metric_families(text)
            for sample in family.samples
        }

    def metric(self, name: str, **labels: str) -> float:
        """Sum of the samples of ``name`` whose labels include ``labels`` (0 when none)."""
        samples = self.metrics() or {}
        wanted = set(labels.items())
        return sum(v for (n, ls), v in samples.items() if n == name and wanted <= ls)

    def post(
        self, path: str, body: bytes, conn: http.client.HTTPSConnection | None = None
    ) -> tuple[int, bytes]:
        """POST ``body`` to the webhook server (loopback); reuse ``conn`` when given."""
        own = conn is None
        conn = conn or self.connection()
        try:
            conn.request("POST", path, body=body, headers={"Content-Type": "application/json"})
            response = conn.getresponse()
            return response.status, response.read()
        finally:
            if own:
                conn.close()

    def connection(self, timeout: float = 30) -> http.client.HTTPSConnection:
        """A keep-alive HTTPS connection to the webhook server."""
        return http.client.HTTPSConnection(
            "127.0.0.1", self.port, context=self.ssl_context(), timeout=timeout
        )

    def _kubectl_ok(self, *args: str, input: str | None = None) -> Result:
        result = self.kubectl(*args, input=input)
        if result.rc != 0:
            raise RuntimeError(f"kubectl {' '.join(args)} failed: {result.stderr.strip()}")
        return result


def parse_warnings(header: str) -> list[str]:
    """The texts of an HTTP ``Warning`` header (``299 - "text", 299 - "text"``)."""
    return [json.loads(f'"{m}"') for m in re.findall(r'\d{3} [^ ]+ "((?:[^"\\]|\\.)*)"', header)]


def _distinct_ports(count: int) -> list[int]:
    ports: list[int] = []
    while len(ports) < count:
        port = free_port()
        if port not in ports:
            ports.append(port)
    return ports


def cluster_objects(api: client.ApiClient, namespace: str, cluster: str) -> dict[str, list[str]]:
    """Names of the Deployments and Pods the dask operator made for ``cluster``."""
    selector = f"dask.org/cluster-name={cluster}"
    deployments = client.AppsV1Api(api).list_namespaced_deployment(
        namespace, label_selector=selector
    )
    pods = client.CoreV1Api(api).list_namespaced_pod(namespace, label_selector=selector)
    return {
        "deployments": sorted(name_of(d) for d in deployments.items),
        "pods": sorted(name_of(p) for p in pods.items),
    }


def dask_object(api: client.ApiClient, namespace: str, plural: str, name: str) -> dict[str, Any]:
    """A Dask custom object as stored."""
    stored = client.CustomObjectsApi(api).get_namespaced_custom_object(
        *DASK, namespace, plural, name
    )
    return as_dict(stored, f"{plural} {namespace}/{name}")


def policy_for(namespace: str, name: str | None = None, **spec: Any) -> dict[str, Any]:
    """A DaskGPUPolicy that selects exactly ``namespace`` (by its automatic name label)."""
    return {
        "apiVersion": "gpuparity.dask.org/v1alpha1",
        "kind": "DaskGPUPolicy",
        "metadata": {"name": name or f"p-{namespace}"[:63]},
        "spec": {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
            **spec,
        },
    }


def assert_scheduler_parity(
    api: client.ApiClient, namespace: str, cluster: str, workers: int, *, pool: str | None = None
) -> list[PodPlacement]:
    """Wait for the cluster's Pods; assert the scheduler has parity with its workers.

    The scheduler Pod requests the workers' GPU resource, runs their image, carries the
    ``gpu-parity-probe`` and ``gpu-parity-check`` init containers, and was bound by
    kube-scheduler (no ``nodeName`` in the Deployment) to a node whose driver and CUDA labels
    equal those of the workers' nodes (in ``pool`` when given). Returns the placement rows
    (printed as a table).
    """
    rows = wait_for_placements(api, namespace, cluster, workers, timeout=240)
    print(f"\nDaskCluster {namespace}/{cluster}:\n{format_table(rows)}")
    (sched,) = [r for r in rows if r.component == "scheduler"]
    worker_rows = [r for r in rows if r.component == "worker"]
    assert len(worker_rows) == workers
    for row in worker_rows:
        assert row.gpu_request.startswith("nvidia.com/"), row
        assert "-" not in (row.driver, row.cuda), row
        assert (sched.driver, sched.cuda) == (row.driver, row.cuda), (sched, row)
    assert sched.gpu_request == worker_rows[0].gpu_request, sched
    assert sched.image == worker_rows[0].image, sched
    if pool is not None:
        assert sched.pool == pool, sched
    core = client.CoreV1Api(api)
    pod = core.read_namespaced_pod(sched.pod, namespace)
    pod_spec, pod_status = present(pod.spec, "Pod spec"), present(pod.status, "Pod status")
    init = pod_spec.init_containers or []
    assert [c.name for c in init] == ["gpu-parity-probe", "gpu-parity-check"], init
    assert init[1].image == sched.image  # the check runs in the scheduler's image
    assert pod_spec.scheduler_name == "default-scheduler"
    scheduled = [c for c in pod_status.conditions or [] if c.type == "PodScheduled"]
    assert [c.status for c in scheduled] == ["True"], pod_status.conditions
    deployment = client.AppsV1Api(api).read_namespaced_deployment(f"{cluster}-scheduler", namespace)
    template = present(deployment.spec, "Deployment spec").template
    assert not present(template.spec, "Pod template spec").node_name, (
        "placed by hand, not by kube-scheduler"
    )
    node = core.read_node(sched.node)
    gpu = sched.gpu_request.split("=")[0]
    allocatable = present(node.status, "Node status").allocatable or {}
    assert int(allocatable.get(gpu, "0")) >= 1, allocatable
    return rows
