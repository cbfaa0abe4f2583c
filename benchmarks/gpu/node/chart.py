"""Both operators as Pods from their images, installed from their charts (``node.py --chart``).

Standard library only. ``chart_prep.py`` made the input on the build machine: both charts
rendered by ``helm template`` and the images ``make images`` built from the Dockerfiles. No
iptables here, so no kube-proxy; two stand-ins, neither in the charts' manifests:

- Pods reach the API server through ``KUBERNETES_SERVICE_HOST`` (the ``kubernetes`` ClusterIP,
  in the API server's certificate) and port 443: that address goes on ``lo`` as a /32 and a
  userspace forwarder (kube-proxy's former userspace mode, one Service) passes it to
  ``127.0.0.1:6443``.
- The API server calls the webhooks at their Service's endpoints (``--enable-aggregator-routing``
  routes admission webhooks too), checking the Service's DNS name against the chart's certificate.

Then the passing and the failing RAPIDS DaskCluster (``operators.py``) and the RAPIDS CuPy
example on a cluster whose scheduler the webhook mutated (workers reach it at its Pod's address).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import socket
import struct
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import operators  # type: ignore[import-not-found]  # beside this file (sys.path[0])

API_IP, API_PORT, API_TARGET = "10.0.0.1", 443, ("127.0.0.1", 6443)
ALIAS = b"lo:kapi"
SIOCSIFADDR, SIOCSIFNETMASK = 0x8916, 0x891C
PARITY_NS, DASK_NS = "dgp-system", "dask-operator"
RESTRICTED = [f"pod-security.kubernetes.io/{m}=restricted" for m in ("enforce", "audit", "warn")]
PROBE = "ghcr.io/dask-gpu-parity/dask-gpu-parity-probe:0.1.0"


def _ifaddr(address: str, mask: str | None) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        for request, value in ((SIOCSIFADDR, address), (SIOCSIFNETMASK, mask)):
            if value is None:
                continue
            sin = struct.pack("HH4s8s", socket.AF_INET, 0, socket.inet_aton(value), b"")
            fcntl.ioctl(s.fileno(), request, struct.pack("16s16s", ALIAS, sin))


class Forwarder:
    """``API_IP:API_PORT`` on ``lo`` (/32), each connection piped to the API server."""

    def __init__(self) -> None:
        self.server: socket.socket | None = None
        self.connections = 0

    def start(self) -> None:
        """Add the address, listen, accept in a thread."""
        _ifaddr(API_IP, "255.255.255.255")
        self.server = socket.create_server((API_IP, API_PORT), reuse_port=False)
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        assert self.server is not None  # started
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            self.connections += 1
            try:
                upstream = socket.create_connection(API_TARGET, timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(src: socket.socket, dst: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while data := src.recv(65536):
                dst.sendall(data)
        for s in (src, dst):
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)

    def stop(self) -> None:
        """Stop listening; take the address off ``lo``."""
        if self.server is not None:
            self.server.close()
        with contextlib.suppress(OSError):
            _ifaddr("0.0.0.0", None)  # deletes the alias


def pod_rows(node: Any, namespace: str) -> list[dict[str, Any]]:
    """Each Pod's node, phase, readiness, and its containers' image and imageID."""
    out = json.loads(node.kubectl("get", "pods", "-n", namespace, "-o", "json", check=True))
    keys = ("name", "image", "imageID", "restartCount")
    return [
        {
            "name": pod["metadata"]["name"],
            "node": pod["spec"].get("nodeName"),
            "phase": (st := pod.get("status") or {}).get("phase"),
            "ready": {"type": "Ready", "status": "True"}
            in [{k: c.get(k) for k in ("type", "status")} for c in st.get("conditions") or []],
            "containers": [{k: c.get(k) for k in keys} for c in st.get("containerStatuses") or []],
        }
        for pod in out["items"]
    ]


def install(node: Any, rendered: Path, wait: Callable[..., Any], result: dict[str, Any]) -> None:
    """Apply the rendered charts as ``helm install`` would: CRDs first, then the releases."""
    k, t = node.kubectl, time.monotonic()
    k("create", "namespace", DASK_NS, check=True)
    k("create", "namespace", PARITY_NS, check=True)
    k("label", "namespace", PARITY_NS, *RESTRICTED, check=True)
    for name in ("dask-operator-crds", "dask-gpu-parity-crds"):
        k("apply", "--server-side", "-f", str(rendered / f"{name}.yaml"), check=True)
    k("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s", check=True)
    result["applied"] = {
        "dask-operator": k("apply", "-n", DASK_NS, "-f", str(rendered / "dask-operator.yaml")),
        "dask-gpu-parity": k("apply", "-f", str(rendered / "dask-gpu-parity.yaml"), check=True),
    }
    node.log("applied:", result["applied"])
    for ns in (DASK_NS, PARITY_NS):
        out = k("wait", "--for=condition=Available", "deployment", "--all", "-n", ns,
                "--timeout=180s", timeout=200)  # fmt: skip
        node.log(out)
        result[f"{ns}_available_s"] = round(time.monotonic() - t, 2)
    cluster = str(node.payload / "manifests" / "daskcluster-pass.yaml")

    def in_force() -> bool:  # the API server calls the webhook, which answers with the policy
        return PROBE in k("create", "--dry-run=server", "-o", "json", "-f", cluster)

    wait("the webhooks in force (server dry-run)", in_force, 120, node.log, 0.5)
    result["webhooks_in_force_s"] = round(time.monotonic() - t, 2)
    result["pods"] = {ns: pod_rows(node, ns) for ns in (DASK_NS, PARITY_NS)}
    node.log("operator pods:", result["pods"])


def with_host_cupy(doc: dict[str, Any], site: str, cuda: str, pyname: str) -> None:
    """Mount this machine's CuPy (and CUDA headers) into a DaskCluster; plain ``dask-worker``."""
    for part in ("scheduler", "worker"):  # CuPy and CUDA headers: this machine's, mounted
        spec = doc["spec"][part]["spec"]
        vols = spec.setdefault("volumes", [])
        vols.append({"name": "host-site", "hostPath": {"path": site, "type": "Directory"}})
        if cuda:
            vols.append({"name": "host-cuda", "hostPath": {"path": cuda, "type": "Directory"}})
        for c in spec["containers"]:
            env = c.setdefault("env", [])
            env.append(
                {"name": "PYTHONPATH", "value": f"/usr/local/lib/{pyname}/dist-packages:{site}"}
            )
            mounts = c.setdefault("volumeMounts", [])
            mounts.append({"name": "host-site", "mountPath": site, "readOnly": True})
            if cuda:
                env.append({"name": "CUDA_PATH", "value": cuda})
                mounts.append({"name": "host-cuda", "mountPath": cuda, "readOnly": True})
            if part == "worker":
                c["args"] = ["dask-worker" if a == "dask-cuda-worker" else a for a in c["args"]]
                c["args"] += ["--nthreads", "1"]


def cupy(  # noqa: PLR0915  # one linear story
    node: Any, wait: Callable[..., Any], result: dict[str, Any]
) -> None:
    """The RAPIDS CuPy example on a DaskCluster our webhook mutated."""
    site, cuda, client_env = node.cupy_env()
    res: dict[str, Any] = result.setdefault("cupy", {"site_packages": site, "cuda_path": cuda})
    man = node.payload / "manifests" / "daskcluster-cupy-with.yaml"
    k = node.kubectl
    doc = json.loads(k("create", "--dry-run=client", "-o", "json", "-f", str(man), check=True))
    name, ns = doc["metadata"]["name"], doc["metadata"]["namespace"]
    with_host_cupy(doc, site, cuda, Path(node.summary["image"]["python"]).name)
    path = node.root / "cupy-daskcluster.json"
    path.write_text(json.dumps(doc))
    t = time.monotonic()
    res["kubectl_apply"] = k("apply", "-f", str(path), check=True)
    stored = json.loads(k("get", "daskcluster", "-n", ns, name, "-o", "json", check=True))
    sched = stored["spec"]["scheduler"]["spec"]
    res["mutated"] = {
        "annotations": stored["metadata"].get("annotations", {}),
        "init_containers": [c.get("name") for c in sched.get("initContainers", [])],
        "scheduler_resources": [c.get("resources") for c in sched["containers"]],
        "node_selector": sched.get("nodeSelector"),
    }
    node.log("cupy DaskCluster as stored:", res["mutated"])

    def running() -> dict[str, Any] | None:
        pods = node.pods(name)
        ok = pods and any(
            c["name"] == "scheduler" and "running" in c.get("state", {})
            for c in pods[0]["status"].get("containerStatuses", [])
        )
        return pods[0] if ok and pods[0]["status"].get("podIP") else None

    pod = wait(f"{name} scheduler running", running, 150, node.log, 0.5)
    res["scheduler_running_s"] = round(time.monotonic() - t, 2)
    ip, pname = pod["status"]["podIP"], pod["metadata"]["name"]

    def listening() -> bool:
        return "Scheduler at:" in k("logs", "-n", ns, pname, "-c", "scheduler")

    wait(f"{name} scheduler listening", listening, 60, node.log, 0.5)
    selector = f"dask.org/cluster-name={name},dask.org/component=worker"

    def deployment() -> str:
        return str(k("get", "deployment", "-n", ns, "-l", selector, "-o", "name")).strip()

    deploy = wait(f"{name} worker Deployment", deployment, 60, node.log, 0.5)
    # The operator points the workers at the scheduler Service's DNS name; no cluster DNS here.
    # Recreate: the old worker holds the second GPU share, a surge Pod would wait for it forever.
    recreate = {"spec": {"strategy": {"type": "Recreate", "rollingUpdate": None}}}
    k("patch", "-n", ns, deploy, "--type=merge", "-p", json.dumps(recreate), check=True)
    res["set_env"] = k("set", "env", "-n", ns, deploy, f"DASK_SCHEDULER_ADDRESS=tcp://{ip}:8786")

    def worker_running() -> bool:
        return any(
            ip in json.dumps(p["spec"])
            and any(
                "running" in c.get("state", {}) for c in p["status"].get("containerStatuses", [])
            )
            for p in node.pods(name, component="worker")
        )

    t = time.monotonic()
    wait(f"{name} worker running at the scheduler's address", worker_running, 90, node.log, 0.5)
    res["worker_running_s"] = round(time.monotonic() - t, 2)
    for workload, limit in (("graph", 90), ("gather", 30)):
        t = time.monotonic()
        try:
            out = subprocess.run(
                [node.args.python, str(Path(__file__).parents[1] / "reproduce.py"), "--client",
                 workload, "--address", f"tcp://{ip}:8786"],
                capture_output=True, text=True, timeout=limit, env=client_env, check=False,
            ).stdout  # fmt: skip
            line = [x for x in out.splitlines() if x.startswith("{")]
            res[workload] = json.loads(line[-1]) if line else {"output": out[-500:]}
        except subprocess.TimeoutExpired:
            res[workload] = {"ok": False, "error": f"no answer in {limit} s (hung)"}
        res[workload]["client_s"] = round(time.monotonic() - t, 2)
        node.log(f"  cupy {workload}:", res[workload])
    res["probe_log"] = k("logs", "-n", ns, pname, "-c", "gpu-parity-check")
    res["worker_log"] = k("logs", "-n", ns, "-l", selector, "--tail=40", timeout=30)
    log = k("logs", "-n", ns, pname, "-c", "scheduler")
    res["gpu_entrypoint"] = [x for x in log.splitlines() if "gpu-entrypoint" in x]
    res["get_pods"] = k("get", "pods", "-n", ns, "-o", "wide")
    (node.logs / "chart-cupy-scheduler.log").write_text(log)
    node.log("cupy:", {x: res.get(x) for x in ("gpu_entrypoint", "probe_log", "get_pods")})
    k("delete", "-f", str(path), "--wait=true", timeout=120)


def report(node: Any, result: dict[str, Any]) -> None:
    """Pods, images as containerd holds them, the operators' logs."""
    k = node.kubectl
    result["get_pods_wide"] = k("get", "pods", "-A", "-o", "wide")
    result["ctr_images"] = node.ctr("images", "ls")
    for ns in (DASK_NS, PARITY_NS):
        result.setdefault("pods_end", {})[ns] = pod_rows(node, ns)
        for pod in result["pods_end"][ns]:
            log = k("logs", "-n", ns, pod["name"], "--all-containers", timeout=30)
            (node.logs / f"pod-{ns}-{pod['name']}.log").write_text(log)
    node.log(f"-- kubectl get pods -A -o wide:\n{result['get_pods_wide']}")


def run(
    node: Any, chart_dir: Path, sh: Callable[..., str], wait: Callable[..., Any], cases: bool = True
) -> None:
    """What ``node.py --chart`` runs once the node is up (``cases``: the two DaskClusters)."""
    result: dict[str, Any] = node.summary.setdefault("chart", {})
    forwarder = Forwarder()
    forwarder.start()
    try:
        install(node, chart_dir / "rendered", wait, result)
        ops = operators.Operators(node, chart_dir, sh, wait)
        ops.result = result
        try:
            if cases:
                ops.flow()
        except Exception as exc:  # the rest still runs; record why this stopped
            result["flow_error"] = f"{type(exc).__name__}: {exc}"
            node.log("chart flow ERROR", result["flow_error"])
        if node.gpu:
            try:
                cupy(node, wait, result)
            except Exception as exc:  # as above
                result.setdefault("cupy", {})["error"] = f"{type(exc).__name__}: {exc}"
                node.log("chart cupy ERROR", result["cupy"]["error"])
        report(node, result)
    finally:
        result["forwarded_connections"] = forwarder.connections
        forwarder.stop()
