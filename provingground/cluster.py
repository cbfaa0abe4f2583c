"""The proving ground: etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok.

Start order is etcd -> kube-apiserver -> (kube-controller-manager, kube-scheduler, kwok); the
last three start together once the API server is ready. Teardown is the reverse, by pid.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from .apiserver import FEATURE_GATES, SERVICE_CIDR, apiserver_args
from .binaries import Binaries, find_binaries
from .kubeconfig import get, write_kubeconfig
from .pki import CertificateAuthority, write_key
from .process import ComponentError, Process, Tool

__all__ = ["ComponentError", "ControlPlane", "Ports", "free_port"]

POD_CIDR = "10.128.0.0/9"
KWOK_NODE_SELECTOR = "kwok.x-k8s.io/node=fake"


def _answers_ok(url: str) -> bool:
    """Whether ``url`` answers 200 (a component's health endpoint)."""
    return get(url)[0] == 200


def free_port() -> int:
    """A loopback TCP port that was free a moment ago (bind to 0, read, close)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# The names the API server's certificate is for: loopback, the Service IP, in-cluster DNS names.
APISERVER_NAMES = (
    "127.0.0.1",
    "localhost",
    "10.0.0.1",
    "kubernetes",
    "kubernetes.default",
    "kubernetes.default.svc",
    "kubernetes.default.svc.cluster.local",
)


@dataclass(frozen=True)
class Ports:
    """Loopback ports of the components; defaults are fresh free ports."""

    etcd: int = 0
    etcd_peer: int = 0
    apiserver: int = 0
    controller_manager: int = 0
    scheduler: int = 0
    kwok: int = 0

    def resolved(self) -> Ports:
        """A copy with every 0 replaced by a distinct free port."""
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        taken = set(values.values()) - {0}
        for name, wanted in values.items():
            if wanted:
                continue
            port = free_port()
            while port in taken:
                port = free_port()
            taken.add(port)
            values[name] = port
        return Ports(**values)


class ControlPlane:
    """A real Kubernetes control plane on 127.0.0.1 with kwok-managed nodes.

    Use as a context manager, or call ``start()``/``stop()``. A failed ``start()`` stops what
    it started and raises ``ComponentError`` with the failing component's log tail.
    """

    def __init__(
        self,
        run_dir: Path,
        *,
        binaries: Binaries | None = None,
        ports: Ports | None = None,
        extra_args: Mapping[str, Sequence[str]] | None = None,
        start_timeout: float = 60.0,
        advertise_address: str | None = None,
    ) -> None:
        self.run_dir = run_dir.resolve()
        # An address pods can reach (see apiserver_args); None: loopback only.
        self.advertise_address = advertise_address
        self.binaries = binaries or find_binaries()
        self.ports = (ports or Ports()).resolved()
        self.extra_args = {k: list(v) for k, v in (extra_args or {}).items()}
        self.start_timeout = start_timeout
        self.processes: dict[str, Process] = {}
        self.timings: dict[str, float] = {}
        self.pki = self.run_dir / "pki"
        self.logs = self.run_dir / "logs"
        self.kubeconfig = self.run_dir / "admin.kubeconfig"
        self.server = f"https://127.0.0.1:{self.ports.apiserver}"
        self.ca: CertificateAuthority | None = None

    # -- public helpers ---------------------------------------------------------------------

    @property
    def ca_cert_path(self) -> Path:
        """The cluster CA certificate (trusted by the API server for clients and webhooks)."""
        return self.pki / "ca.crt"

    @property
    def ca_key_path(self) -> Path:
        """The cluster CA private key."""
        return self.pki / "ca.key"

    @property
    def env(self) -> dict[str, str]:
        """``os.environ`` with KUBECONFIG pointing at the admin kubeconfig."""
        return {**os.environ, "KUBECONFIG": str(self.kubeconfig), **_NO_PROXY}

    def issue_serving_cert(self, hostnames: Sequence[str], name: str = "") -> tuple[Path, Path]:
        """Sign a TLS serving certificate for ``hostnames`` (DNS names or IPs) with the CA.

        For webhooks the API server calls at ``https://127.0.0.1:<port>``: put the CA
        (``ca_cert_path``) in the webhook's ``caBundle``.
        """
        if self.ca is None:
            raise RuntimeError("Control plane not started: no CA yet")
        name = name or "serving-" + "-".join(h.replace("*", "x") for h in hostnames)[:60]
        return self.ca.issue(name, common_name=hostnames[0], hostnames=list(hostnames))

    def kubectl(
        self, *args: str, check: bool = True, input: str | None = None, timeout: float = 120
    ) -> subprocess.CompletedProcess[str]:
        """Run the kubectl built with this control plane; raise with stderr on failure."""
        kubectl = Tool(
            [self.binaries.kubectl, "--kubeconfig", self.kubeconfig], self.env, error=RuntimeError
        )
        return kubectl.run(*args, check=check, input=input, timeout=timeout)

    def api_get(self, path: str) -> tuple[int, Any]:
        """GET an API path as the admin user; return (status, parsed JSON or text)."""
        status, body = get(
            self.server + path,
            ca=self.ca_cert_path,
            cert=(self.pki / "admin.crt", self.pki / "admin.key"),
        )
        try:
            return status, json.loads(body)
        except ValueError:
            return status, body.decode(errors="replace")

    def rss_bytes(self) -> dict[str, int]:
        """Resident memory of each running component (from /proc/<pid>/status)."""
        out: dict[str, int] = {}
        for name, proc in self.processes.items():
            with contextlib.suppress(OSError):
                for line in Path(f"/proc/{proc.pid}/status").read_text().splitlines():
                    if line.startswith("VmRSS:"):
                        out[name] = int(line.split()[1]) * 1024
        return out

    # -- lifecycle --------------------------------------------------------------------------

    def __enter__(self) -> ControlPlane:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> ControlPlane:
        """Start every component and wait until the cluster can run Pods."""
        t0 = time.monotonic()
        try:
            self._prepare()
            self._start_etcd()
            self.timings["etcd"] = time.monotonic() - t0
            self._start_apiserver()
            self.timings["kube-apiserver"] = time.monotonic() - t0
            self._start_rest()
            self._wait_default_service_account()
        except BaseException:
            self.stop()
            raise
        self.timings["ready"] = time.monotonic() - t0
        return self

    def restart_apiserver(self, *, down_seconds: float = 0.0) -> float:
        """Kill kube-apiserver (SIGKILL, as a crash) and start it again: same port, same flags.

        etcd keeps every object. Clients see their connections reset and their watches end,
        then connections refused for ``down_seconds`` and the new process's start. Returns the
        seconds from the kill until the new one's ``/readyz`` answered 200.
        """
        old = self.processes["kube-apiserver"]
        t0 = time.monotonic()
        old.kill()
        pids = self.run_dir / "pids"
        with contextlib.suppress(FileNotFoundError):  # `make demo-down` must not see it again
            lines = pids.read_text().splitlines(keepends=True)
            pids.write_text("".join(line for line in lines if line.split()[0] != str(old.pid)))
        time.sleep(down_seconds)
        self._start_apiserver()
        return time.monotonic() - t0

    def stop(self) -> None:
        """Stop components in reverse start order; safe to call twice."""
        for proc in reversed(list(self.processes.values())):
            proc.stop()
        with contextlib.suppress(FileNotFoundError):
            (self.run_dir / "pids").unlink()

    # -- steps ------------------------------------------------------------------------------

    def _prepare(self) -> None:
        for sub in (self.pki, self.logs):
            sub.mkdir(parents=True, exist_ok=True)
        # First line: the Python process that owns the components (for `make demo-down`).
        (self.run_dir / "pids").write_text(
            f"{os.getpid()} owner {os.path.realpath(sys.executable)}\n"
        )
        self.ca = CertificateAuthority.create(self.pki)
        self.ca.issue(
            "apiserver",
            common_name="kube-apiserver",
            hostnames=[*APISERVER_NAMES, *filter(None, [self.advertise_address])],
        )
        admin = self.ca.issue(
            "admin", common_name="admin", organizations=["system:masters"], client=True
        )
        self.ca.issue("front-proxy-client", common_name="front-proxy-client", client=True)
        write_key(self.pki / "sa.key")
        write_kubeconfig(self.kubeconfig, self.server, self.ca_cert_path, *admin)

    def _spawn(self, name: str, args: list[str]) -> Process:
        argv = [str(self.binaries[name]), *args, *self.extra_args.get(name, [])]
        proc = Process(name, argv, self.logs / f"{name}.log", env={**os.environ, **_NO_PROXY})
        self.processes[name] = proc
        with (self.run_dir / "pids").open("a") as f:
            f.write(f"{proc.pid} {name} {argv[0]}\n")
        return proc

    def _start_etcd(self) -> None:
        data = self.run_dir / "etcd"
        data.mkdir(mode=0o700, exist_ok=True)
        client = f"http://127.0.0.1:{self.ports.etcd}"
        peer = f"http://127.0.0.1:{self.ports.etcd_peer}"
        proc = self._spawn(
            "etcd",
            [
                "--name=node0",
                f"--data-dir={data}",
                "--unsafe-no-fsync=true",
                f"--listen-client-urls={client}",
                f"--advertise-client-urls={client}",
                f"--listen-peer-urls={peer}",
                f"--initial-advertise-peer-urls={peer}",
                f"--initial-cluster=node0={peer}",
                "--quota-backend-bytes=8589934592",
                "--log-level=warn",
            ],
        )
        proc.wait_until(
            lambda: b'"health":"true"' in get(client + "/health")[1], self.start_timeout, "healthy"
        )

    def _start_apiserver(self) -> None:
        args = apiserver_args(
            self.ports.etcd, self.ports.apiserver, self.pki, self.advertise_address
        )
        proc = self._spawn("kube-apiserver", args)
        proc.wait_until(
            lambda: self.api_get("/readyz")[0] == 200, self.start_timeout, "ready (/readyz)"
        )

    def _start_rest(self) -> None:
        kc = str(self.kubeconfig)
        auth = [
            f"--kubeconfig={kc}",
            f"--authentication-kubeconfig={kc}",
            f"--authorization-kubeconfig={kc}",
            "--bind-address=127.0.0.1",
            "--leader-elect=false",
            f"--feature-gates={FEATURE_GATES}",
        ]
        kcm = self._spawn(
            "kube-controller-manager",
            [
                *auth,
                f"--secure-port={self.ports.controller_manager}",
                f"--cert-dir={self.pki / 'kube-controller-manager'}",
                "--controllers=*",
                f"--service-account-private-key-file={self.pki / 'sa.key'}",
                f"--root-ca-file={self.ca_cert_path}",
                f"--cluster-signing-cert-file={self.ca_cert_path}",
                f"--cluster-signing-key-file={self.ca_key_path}",
                "--use-service-account-credentials=true",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                "--kube-api-qps=1000",
                "--kube-api-burst=2000",
                "--concurrent-deployment-syncs=20",
                "--concurrent-replicaset-syncs=20",
                "--node-monitor-period=5s",
            ],
        )
        sched = self._spawn(
            "kube-scheduler",
            [
                *auth,
                f"--secure-port={self.ports.scheduler}",
                f"--cert-dir={self.pki / 'kube-scheduler'}",
                "--kube-api-qps=1000",  # deprecated flags, still honoured without --config
                "--kube-api-burst=2000",
            ],
        )
        kwok = self._spawn(
            "kwok",
            [
                f"--kubeconfig={kc}",
                "--manage-all-nodes=false",
                f"--manage-nodes-with-annotation-selector={KWOK_NODE_SELECTOR}",
                f"--cidr={POD_CIDR}",
                "--node-ip=10.0.0.2",
                "--node-lease-duration-seconds=40",
                f"--server-address=127.0.0.1:{self.ports.kwok}",
                f"--config={self.binaries.kwok_stages}",
                f"--config={self._kwok_config()}",
            ],
        )
        checks = [
            (kcm, f"https://127.0.0.1:{self.ports.controller_manager}/healthz"),
            (sched, f"https://127.0.0.1:{self.ports.scheduler}/healthz"),
            (kwok, f"http://127.0.0.1:{self.ports.kwok}/healthz"),
        ]
        t0 = time.monotonic()
        for proc, url in checks:
            left = max(self.start_timeout - (time.monotonic() - t0), 1.0)
            proc.wait_until(functools.partial(_answers_ok, url), left, f"healthy ({url})")
            self.timings[proc.name] = time.monotonic() - t0

    def _kwok_config(self) -> Path:
        # Defaults are 4 workers each: too few to bring thousands of nodes up quickly.
        path = self.run_dir / "kwok.yaml"
        path.write_text(
            "apiVersion: config.kwok.x-k8s.io/v1alpha1\n"
            "kind: KwokConfiguration\n"
            "options:\n"
            "  nodePlayStageParallelism: 16\n"
            "  nodeLeaseParallelism: 16\n"
            "  podPlayStageParallelism: 16\n"
        )
        return path

    def _wait_default_service_account(self) -> None:
        kcm = self.processes["kube-controller-manager"]
        kcm.wait_until(
            lambda: self.api_get("/api/v1/namespaces/default/serviceaccounts/default")[0] == 200,
            self.start_timeout,
            "ready: namespace default has no ServiceAccount default",
        )

    def check_alive(self) -> None:
        """Raise ComponentError (with log tail) if any component has exited."""
        for proc in self.processes.values():
            proc.check_alive()


_NO_PROXY = {"NO_PROXY": "127.0.0.1,localhost", "no_proxy": "127.0.0.1,localhost"}
