"""The real dask-kubernetes operator (``dask_kubernetes.operator.controller``) as a subprocess.

Its CRDs come from the installed ``dask_kubernetes`` wheel (the resolved copies its Helm chart
ships), so the schema, and the pruning it does, are exactly what users install.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Mapping
from importlib import resources
from pathlib import Path
from typing import Any

from .cluster import free_port
from .kubeconfig import get
from .process import Process

__all__ = ["DASK_CRDS", "DaskOperator", "crd_paths", "install_crds"]

DASK_CRDS = (
    "daskclusters.kubernetes.dask.org",
    "daskworkergroups.kubernetes.dask.org",
    "daskjobs.kubernetes.dask.org",
    "daskautoscalers.kubernetes.dask.org",
)


def crd_paths() -> list[Path]:
    """The resolved CRD YAML files shipped in the dask_kubernetes package."""
    root = resources.files("dask_kubernetes.operator").joinpath(
        "deployment/helm/dask-kubernetes-operator/crds"
    )
    paths = sorted(Path(str(p)) for p in root.iterdir() if p.name.endswith(".yaml"))
    if not paths:
        raise FileNotFoundError(f"No CRD YAML found in {root}; is dask-kubernetes installed?")
    return paths


def _established(crd: Mapping[str, Any]) -> bool:
    conditions = (crd.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Established" and c["status"] == "True" for c in conditions)


def install_crds(
    kubectl: Callable[..., subprocess.CompletedProcess[str]], timeout: float = 60
) -> None:
    """Apply the Dask CRDs (server-side: they exceed the client-side annotation limit).

    Waits until each is Established (``kubectl wait`` fails on a CRD without status yet).
    """
    for path in crd_paths():
        kubectl("apply", "--server-side", "--force-conflicts", "-f", str(path))
    deadline = time.monotonic() + timeout
    for crd in DASK_CRDS:
        while not _established(json.loads(kubectl("get", "crd", crd, "-o", "json").stdout)):
            if time.monotonic() > deadline:
                raise TimeoutError(f"CRD {crd} not Established within {timeout:.0f}s")
            time.sleep(0.2)


class DaskOperator:
    """``kopf run -m dask_kubernetes.operator.controller`` against one kubeconfig.

    It runs ``--standalone`` (no kopf peering objects) and ``--all-namespaces`` unless
    ``namespace`` is given; ``start()`` returns once kopf's liveness endpoint answers.
    """

    def __init__(
        self,
        kubeconfig: Path,
        log_dir: Path,
        *,
        namespace: str | None = None,
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.kubeconfig = kubeconfig
        self.log_path = log_dir / "dask-operator.log"
        self.namespace = namespace
        self.env = dict(os.environ if env is None else env)
        self.process: Process | None = None

    def start(self, timeout: float = 60) -> DaskOperator:
        """Start the controller and wait for its liveness endpoint."""
        port = free_port()
        scope = ["--namespace", self.namespace] if self.namespace else ["--all-namespaces"]
        argv = [
            sys.executable,
            "-m",
            "kopf",
            "run",
            "-m",
            "dask_kubernetes.operator.controller",
            "--standalone",
            *scope,
            f"--liveness=http://127.0.0.1:{port}/healthz",
            "--verbose",
        ]
        env = {**self.env, "KUBECONFIG": str(self.kubeconfig), "PYTHONWARNINGS": "ignore"}
        self.process = Process("dask-operator", argv, self.log_path, env=env)
        url = f"http://127.0.0.1:{port}/healthz"
        try:
            self.process.wait_until(lambda: get(url)[0] == 200, timeout, "live", interval=0.2)
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop the controller."""
        if self.process is not None:
            self.process.stop()

    def __enter__(self) -> DaskOperator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
