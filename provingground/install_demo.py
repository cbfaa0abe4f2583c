"""The install path of ``make demo``: both charts by ``helm install``, a CPU cluster computing.

Runs as a demo hook on a ground with a real node: helm's output for both releases, then
``kubectl get pods -A -o wide``, then a CPU DaskCluster (``examples/cpu-cluster.yaml`` with the
built Dask image, pinned to the real node) whose scheduler a ``distributed.Client`` in this
process computes through. The GPU examples that follow go through the chart's webhooks.
"""

from __future__ import annotations

import json
import socket
import struct
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from .binaries import find_binaries
from .ground import ProvingGround
from .install import Installed, ensure_namespace, pods_wide
from .realnode import (
    BuiltImages,
    ImagesMissingError,
    NodeMissingError,
    built_images,
    install_built,
    real_node_ground,
    real_node_name,
)

__all__ = [
    "CPU_EXAMPLE",
    "compute_through",
    "cpu_dask_cluster",
    "install_hook",
    "install_hooks",
]

REPO = Path(__file__).resolve().parents[1]
CPU_EXAMPLE = REPO / "examples" / "cpu-cluster.yaml"
CPU_NAMESPACE = "dask-cpu"


def _say(msg: str) -> None:
    print(msg, flush=True)


def cpu_dask_cluster(name: str, image: str, node: str) -> dict[str, Any]:
    """examples/cpu-cluster.yaml with ``image`` (pulled if not present), pinned to ``node``.

    Requests are small (100m CPU, 256Mi each): the scheduler, two workers and both operators share
    one node.
    """
    doc: dict[str, Any] = yaml.safe_load(CPU_EXAMPLE.read_text())
    doc["metadata"]["name"] = name
    for role in ("scheduler", "worker"):
        spec = doc["spec"][role]["spec"]
        spec["nodeSelector"] = {"kubernetes.io/hostname": node}
        for container in spec["containers"]:
            container["image"] = image
            container["imagePullPolicy"] = "IfNotPresent"
            container["resources"] = {
                "requests": {"cpu": "100m", "memory": "256Mi"},
                "limits": {"memory": "1Gi"},
            }
    doc["spec"]["scheduler"]["spec"]["containers"][0]["args"] = ["dask", "scheduler"]
    worker = ["dask", "worker", "--name", "$(DASK_WORKER_NAME)", "--nthreads", "1"]
    doc["spec"]["worker"]["spec"]["containers"][0]["args"] = worker
    doc["spec"]["scheduler"]["service"]["selector"]["dask.org/cluster-name"] = name
    return doc


Kubectl = Callable[..., Any]


def _ready_pods(kubectl: Kubectl, namespace: str, name: str) -> list[dict[str, Any]]:
    out = kubectl(
        "get", "pods", "-n", namespace, "-l", f"dask.org/cluster-name={name}", "-o", "json"
    ).stdout
    ready = []
    for pod in json.loads(out)["items"]:
        status = pod.get("status") or {}
        conditions = {c["type"]: c["status"] for c in status.get("conditions") or []}
        if status.get("phase") == "Running" and conditions.get("Ready") == "True":
            ready.append(pod)
    return ready


def benign_mismatch(row: str) -> bool:
    """A row of distributed's version table that is no mismatch for the demo's computation."""
    cells = [c.strip() for c in row.strip().strip("|").split("|")]
    package, cluster = cells[0], cells[2:]
    return package == "python" or (bool(cluster) and all(c == "None" for c in cluster))


def _answers_as_dask(address: str, deadline: float) -> None:
    """Wait until ``address`` (``tcp://host:port``) answers as a Dask comm, not as anything else.

    Pods Ready is not a route: until kube-proxy has written the new Service's rules, a
    connection to its ClusterIP leaves the host by the default route, and whatever answers
    there (an egress proxy answers ``HTTP/1.1 ...``) is not the scheduler. A Dask server
    writes its handshake first, prefixed by its length as a little-endian uint64: a few
    hundred bytes, where an HTTP status line read the same way is 10^18.
    """
    host, port = address.removeprefix("tcp://").rsplit(":", 1)
    last = "no answer"
    while time.monotonic() < deadline:
        try:
            with socket.create_connection((host, int(port)), timeout=5) as conn:
                conn.settimeout(5)
                prefix = conn.recv(8, socket.MSG_WAITALL)
            if len(prefix) == 8 and struct.unpack("<Q", prefix)[0] < 1 << 20:
                return
            last = f"answered {prefix!r}"
        except OSError as exc:
            last = str(exc) or type(exc).__name__
        time.sleep(1)
    raise TimeoutError(f"{address} did not answer as a Dask scheduler: {last}")


def compute_through(
    kubectl: Kubectl, namespace: str, name: str, workers: int, timeout: float = 300
) -> tuple[str, int, int]:
    """Wait for the scheduler and ``workers`` Ready, then compute ``sum([1, 2, 3])`` through it.

    Returns:
        (the scheduler address used, the result, the workers the scheduler reports).
    """
    from distributed import Client  # noqa: PLC0415  # heavy; only the demo and tests need it
    from distributed.versions import VersionMismatchWarning  # noqa: PLC0415  # as Client

    deadline = time.monotonic() + timeout
    while len(_ready_pods(kubectl, namespace, name)) < workers + 1:
        if time.monotonic() > deadline:
            raise TimeoutError(f"DaskCluster {namespace}/{name}: Pods not Ready in {timeout:.0f}s")
        time.sleep(1)
    service = json.loads(
        kubectl("get", "service", f"{name}-scheduler", "-n", namespace, "-o", "json").stdout
    )
    address = f"tcp://{service['spec']['clusterIP']}:8786"
    _answers_as_dask(address, deadline)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", VersionMismatchWarning)
        with Client(address, timeout="60s") as client:
            client.wait_for_workers(workers, timeout=max(deadline - time.monotonic(), 30))
            result = int(client.submit(sum, [1, 2, 3]).result(timeout=60))
            count = len(client.scheduler_info()["workers"])
    for warning in caught:
        # The image's Python is Debian's 3.11.2, this process's may be another 3.11 patch
        # release: distributed warns about that. An optional package only this process has
        # (numpy, which the test environment's matplotlib brings; the image has none) is listed
        # once workers have registered before the check, with None for scheduler and workers:
        # nothing here computes with it. Any other package that differs is an error.
        rows = [r for r in str(warning.message).splitlines() if r.startswith("| ")][1:]
        if [r for r in rows if not benign_mismatch(r)]:
            raise RuntimeError(f"Dask versions differ from the image's: {warning.message}")
    return address, result, count


def install_hook(
    images: BuiltImages, helm_home: Path, done: list[Installed]
) -> Callable[..., None]:
    """A demo hook: install both charts, show the Pods, run a CPU cluster and compute through it.

    The ``Installed`` record (outputs, timings) is appended to ``done``.
    """

    def hook(ground: ProvingGround) -> None:
        cp = ground.control_plane
        node = real_node_name(ground)
        t0 = time.monotonic()
        _, installed = install_built(ground, images, helm_home)
        done.append(installed)
        for release, out in installed.outputs.items():
            _say(f"\n$ helm install {release} ...\n{out.rstrip()}")
        _say(f"\nBoth charts installed and Ready in {time.monotonic() - t0:.1f}s")
        _say(f"\n$ kubectl get pods -A -o wide\n{pods_wide(cp.kubectl)}")
        ensure_namespace(cp.kubectl, CPU_NAMESPACE)
        doc = cpu_dask_cluster("cpu-only", images.dask, node)
        cp.kubectl("apply", "-n", CPU_NAMESPACE, "-f", "-", input=json.dumps(doc))
        _say(f"\nCPU DaskCluster {CPU_NAMESPACE}/cpu-only ({images.dask}) applied with kubectl")
        t1 = time.monotonic()
        address, result, workers = compute_through(cp.kubectl, CPU_NAMESPACE, "cpu-only", 2)
        _say(
            f"  distributed.Client({address!r}): sum([1, 2, 3]) = {result} on {workers} workers "
            f"({time.monotonic() - t1:.1f}s from apply)"
        )
        _say(f"\n$ kubectl get pods -A -o wide\n{pods_wide(cp.kubectl)}")

    return hook


def install_hooks(run_dir: Path) -> list[Callable[[ProvingGround], None]]:
    """``[install_hook]`` when the images are built and the real node can start; else ``[]``.

    Says on stdout why the demo falls back to the kwok-only ground with host-process operators.
    """
    try:
        images = built_images()
        real_node_ground(run_dir, find_binaries(), images)  # raises when the node is not built
    except (ImagesMissingError, NodeMissingError) as exc:
        _say(f"demo: kwok-only ground, operators on the host: {exc}")
        return []
    return [install_hook(images, run_dir.with_suffix(".helm"), [])]
