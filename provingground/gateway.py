"""dask-gateway on the proving ground: its API server and its Kubernetes controller, for real.

Both come from the pinned ``dask-gateway-server[kubernetes]`` wheel of the package index (the
``test`` extra of ``pyproject.toml``; the client, ``dask-gateway``, likewise). In a real
deployment they run as Pods of dask-gateway's Helm chart (its ``api`` and ``controller``
Deployments, in-cluster config); here they run as host processes against the ground's API
server with its kubeconfig, as the dask operator does (``dask_operator.py``): the code and the
objects they create are the same, only their own Pods are missing. The gateway's
``KubeBackend`` creates one ``DaskCluster`` (``gateway.dask.org/v1alpha1``) per
``Gateway.new_cluster()``; the controller builds the scheduler Pod from its ``spec.config``.

The CRDs come from the gateway's Helm chart, which is published on helm.dask.org only; neither
the wheels nor the sdists on the package index carry them. So they are written here, as small as
upstream's: dask/dask-gateway ``resources/helm/dask-gateway/crds/daskclusters.yaml`` (a schema
that validates nothing, "to comply with the schema of a CustomResourceDefinition that requires
it") and the two traefik.io kinds the controller creates once the scheduler's endpoints are ready
(``resources/helm/dask-gateway/crds/traefik.yaml``, whose schemas the controller never relies on).
"""

from __future__ import annotations

import asyncio
import json
import socket
import subprocess
import sys
import textwrap
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from .cluster import free_port
from .kubeconfig import get
from .process import Process

__all__ = [
    "ADMIN_OPTIONS",
    "GATEWAY_CRDS",
    "GATEWAY_IMAGE",
    "RAPIDS_IMAGE",
    "GatewayServer",
    "install_gateway_crds",
]

GATEWAY_IMAGE = "ghcr.io/dask/dask-gateway:2026.3.0"  # KubeClusterConfig.image, as the chart sets
RAPIDS_IMAGE = "nvcr.io/nvidia/rapidsai/base:25.10-cuda12.9-py3.12"  # docs.rapids.ai image tags

# The cluster options a RAPIDS administrator gives users (the pattern of dask-gateway's
# "Exposing cluster options" and of daskhub deployments' GPU profiles): "gpu" picks a GPU type;
# its handler gives the *workers* the RAPIDS image, one GPU each, dask-cuda-worker, the GPU taint's
# toleration and a node selector on GPU Feature Discovery's product label. Nothing is said about
# the scheduler: that is what admission adds.
ADMIN_OPTIONS = """
from dask_gateway_server.options import Options, Select

GPU_PRODUCTS = {"a100": "NVIDIA-A100-SXM4-80GB", "h100": "NVIDIA-H100-80GB-HBM3"}


def options_handler(options):
    if options.gpu == "none":
        return {}
    return {
        "worker_cmd": "dask-cuda-worker",
        "worker_extra_container_config": {
            "image": RAPIDS_IMAGE,
            "resources": {"limits": {"nvidia.com/gpu": 1}},
        },
        "worker_extra_pod_config": {
            "tolerations": [
                {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
            ],
            "nodeSelector": {"nvidia.com/gpu.product": GPU_PRODUCTS[options.gpu]},
        },
    }


c.Backend.cluster_options = Options(
    Select("gpu", ["none", "a100", "h100"], default="none", label="GPU per worker"),
    handler=options_handler,
)
"""


def _crd(group: str, kind: str, version: str, *, status: bool) -> dict[str, Any]:
    plural = kind.lower() + "s"
    served: dict[str, Any] = {
        "name": version,
        "served": True,
        "storage": True,
        "schema": {
            "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
        },
    }
    if status:
        served["subresources"] = {"status": {}}
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "names": {"kind": kind, "listKind": f"{kind}List", "plural": plural},
            "scope": "Namespaced",
            "versions": [served],
        },
    }


GATEWAY_CRDS = (
    _crd("gateway.dask.org", "DaskCluster", "v1alpha1", status=True),
    _crd("traefik.io", "IngressRoute", "v1alpha1", status=False),
    _crd("traefik.io", "IngressRouteTCP", "v1alpha1", status=False),
)


def install_gateway_crds(
    kubectl: Callable[..., subprocess.CompletedProcess[str]], timeout: float = 60
) -> None:
    """Apply :data:`GATEWAY_CRDS` and wait until the API server serves each."""
    kubectl(
        "apply",
        "-f",
        "-",
        input=json.dumps({"apiVersion": "v1", "kind": "List", "items": GATEWAY_CRDS}),
    )
    for crd in GATEWAY_CRDS:
        name = crd["metadata"]["name"]
        kubectl("wait", "--for=condition=Established", f"crd/{name}", f"--timeout={timeout:.0f}s")


def gateway_config(
    *, namespace: str, instance: str, api_port: int, controller_port: int, options: str
) -> str:
    """The gateway's config file (as the chart's ``gateway_config.py`` sets the same traits)."""
    api_url = f"http://127.0.0.1:{api_port}/api"
    head = f"""
        c.DaskGateway.address = "127.0.0.1:{api_port}"
        c.DaskGateway.backend_class = "dask_gateway_server.backends.kubernetes.KubeBackend"
        c.DaskGateway.authenticator_class = "dask_gateway_server.auth.SimpleAuthenticator"
        c.KubeBackend.gateway_instance = {instance!r}
        c.KubeBackend.api_url = {api_url!r}
        c.KubeController.gateway_instance = {instance!r}
        c.KubeController.api_url = {api_url!r}
        c.KubeController.address = "127.0.0.1:{controller_port}"
        c.KubeController.backoff_max_delay = 5
        c.KubeClusterConfig.namespace = {namespace!r}
        c.KubeClusterConfig.image = {GATEWAY_IMAGE!r}
        c.KubeClusterConfig.image_pull_policy = "IfNotPresent"
        RAPIDS_IMAGE = {RAPIDS_IMAGE!r}
    """
    return textwrap.dedent(head) + options


class GatewayServer:
    """dask-gateway's API server and its Kubernetes controller as host processes.

    ``start()`` returns once the API server's ``/api/health`` answers 200 and the controller
    listens (it opens its port after its informers have listed). Clusters land in ``namespace``.
    """

    def __init__(
        self,
        kubeconfig: Path,
        log_dir: Path,
        namespace: str,
        *,
        options: str = ADMIN_OPTIONS,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.kubeconfig = kubeconfig
        self.log_dir = log_dir
        self.namespace = namespace
        self.instance = f"gw-{namespace}"[:63]
        self.options = options
        self.env = dict(env or {})
        self.api_port = free_port()
        self.controller_port = free_port()
        self.processes: list[Process] = []

    @property
    def api_log(self) -> Path:
        """The API server's log (a create the API server refused is logged there)."""
        return self.log_dir / f"dask-gateway-api-{self.namespace}.log"

    @property
    def address(self) -> str:
        """The gateway's address, as ``dask_gateway.Gateway(address=...)`` takes it."""
        return f"http://127.0.0.1:{self.api_port}"

    def start(self, timeout: float = 60) -> GatewayServer:
        """Write the config, start both processes and wait until they serve."""
        config = self.log_dir / f"dask-gateway-{self.namespace}.py"
        config.write_text(
            gateway_config(
                namespace=self.namespace,
                instance=self.instance,
                api_port=self.api_port,
                controller_port=self.controller_port,
                options=self.options,
            )
        )
        env = {**self.env, "KUBECONFIG": str(self.kubeconfig), "PYTHONWARNINGS": "ignore"}
        run = [sys.executable, "-m", "dask_gateway_server"]
        try:
            api = self._launch("dask-gateway-api", [*run, "-f", config], env)
            api.wait_until(lambda: get(f"{self.address}/api/health")[0] == 200, timeout, "healthy")
            controller = self._launch(
                "dask-gateway-controller", [*run, "kube-controller", "-f", config], env
            )
            controller.wait_until(
                lambda: _listens(self.controller_port), timeout, "listening", interval=0.2
            )
        except BaseException:
            self.stop()
            raise
        return self

    def _launch(self, name: str, argv: list[Any], env: Mapping[str, str]) -> Process:
        log = self.log_dir / f"{name}-{self.namespace}.log"
        process = Process(name, argv, log, env=env, cwd=self.log_dir)
        self.processes.append(process)
        return process

    def check_alive(self) -> None:
        """Raise with a log tail if either process has exited."""
        for process in self.processes:
            process.check_alive()

    def new_cluster(self, user: str, *, timeout: float = 180, **options: Any) -> str:
        """``Gateway.new_cluster(**options)`` as ``user``; the cluster's name.

        The real client call: it creates the DaskCluster through the gateway and returns once
        the gateway reports the cluster running (the scheduler Pod running, its Service's
        endpoints ready). Nothing answers on the scheduler's port on a simulated node, so the
        client's connection to it (which ``new_cluster`` tolerates failing) is given 2 s, and
        workers cannot be asked of the scheduler: :meth:`scale` sets them as the gateway does.
        """
        return asyncio.run(self._new_cluster(user, timeout, options))

    async def _new_cluster(self, user: str, timeout: float, options: Mapping[str, Any]) -> str:
        import dask  # noqa: PLC0415 - the client's imports are the tests' business only
        from dask_gateway import BasicAuth, Gateway  # noqa: PLC0415 - ditto

        proxy = f"tls://127.0.0.1:{free_port()}"  # no proxy: the connection is refused
        with dask.config.set({"distributed.comm.timeouts.connect": "2s"}):
            async with Gateway(
                self.address, proxy_address=proxy, auth=BasicAuth(user), asynchronous=True
            ) as gateway:
                cluster = await asyncio.wait_for(
                    gateway.new_cluster(shutdown_on_close=False, **options), timeout
                )
                name = str(cluster.name)
                await cluster.close()
                return name

    def scale(self, kubectl: Callable[..., Any], name: str, workers: int) -> None:
        """Set the cluster's ``spec.replicas``, as the gateway does on its scheduler's heartbeat.

        (``GatewayCluster.scale`` goes through the scheduler, which a simulated node does not
        run; the gateway's ``on_cluster_heartbeat`` then patches ``spec.replicas``, which the
        controller reconciles into worker Pods.)
        """
        short = name.rsplit(".", 1)[-1]
        patch = json.dumps({"spec": {"replicas": workers}})
        kubectl(
            "patch",
            "daskclusters.gateway.dask.org",
            short,
            "-n",
            self.namespace,
            "--type=merge",
            "-p",
            patch,
        )

    def stop_cluster(self, user: str, name: str) -> None:
        """``Gateway.stop_cluster(name)`` as ``user``.

        An asynchronous client: the synchronous one closes its loop on exit and again when it
        is collected, which distributed 2026.8 refuses ("Accessing the loop property while the
        loop is not running").
        """
        asyncio.run(self._stop_cluster(user, name))

    async def _stop_cluster(self, user: str, name: str) -> None:
        from dask_gateway import BasicAuth, Gateway  # noqa: PLC0415 - the tests' business only

        async with Gateway(self.address, auth=BasicAuth(user), asynchronous=True) as gateway:
            await gateway.stop_cluster(name)

    def stop(self) -> None:
        """Stop the controller, then the API server."""
        for process in reversed(self.processes):
            process.stop()
        self.processes.clear()

    def __enter__(self) -> GatewayServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _listens(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1)
        return sock.connect_ex(("127.0.0.1", port)) == 0
