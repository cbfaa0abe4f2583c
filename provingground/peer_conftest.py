"""The fixtures dask-kubernetes' own operator tests need, on the proving ground instead of kind.

Their ``dask_kubernetes/conftest.py`` builds ``dask-kubernetes:dev`` with ``docker build``,
creates a kind cluster (``pytest_kind``), loads the image into it and applies the CRDs. Here the
cluster is the proving ground (its kubeconfig in ``DGP_PEER_KUBECONFIG``, its kubectl in
``DGP_PEER_KUBECTL``), the image is the built Dask image tagged ``dask-kubernetes:dev`` on the real
node, and the CRDs are the ones the dask operator's chart installed. Everything else is theirs:
``kopf_runner`` runs their controller in the test process, as in their CI. ``peersuite.py``
writes a ``conftest.py`` that imports this module next to their test folders.
"""

from __future__ import annotations

import contextlib
import os
import re
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

__all__ = [
    "GroundCluster",
    "anyio_backend",
    "customresources",
    "docker_image",
    "k8s_cluster",
    "kopf_runner",
    "namespace",
]

DEV_IMAGE = "dask-kubernetes:dev"
_FORWARDING = re.compile(r"Forwarding from 127\.0\.0\.1:(\d+)")


class GroundCluster:
    """What their tests call on ``pytest_kind``'s ``KindCluster``: ``kubectl``, ``port_forward``."""

    def __init__(self, kubeconfig: Path, kubectl_bin: str) -> None:
        self.kubeconfig_path = kubeconfig
        self.kubectl_bin = kubectl_bin

    def kubectl(self, *args: str) -> str:
        """Run kubectl; return stdout (raise on failure, as ``KindCluster.kubectl`` does)."""
        return subprocess.run(
            [self.kubectl_bin, "--kubeconfig", str(self.kubeconfig_path), *args],
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        ).stdout

    @contextlib.contextmanager
    def port_forward(
        self, target: str, remote_port: int, *args: str, local_port: int | None = None
    ) -> Iterator[int]:
        """``kubectl port-forward``; yields the local port once kubectl says it forwards."""
        argv = [
            self.kubectl_bin,
            "--kubeconfig",
            str(self.kubeconfig_path),
            "port-forward",
            target,
            f"{local_port or ''}:{remote_port}",
            *args,
        ]
        proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            found = _FORWARDING.search(line)
            if found is None:
                raise RuntimeError(f"kubectl port-forward {target}: {line.strip()}")
            yield int(found.group(1))
        finally:
            proc.terminate()
            proc.wait(10)


@pytest.fixture(scope="session")
def k8s_cluster() -> GroundCluster:
    """The proving ground, as their tests use a kind cluster (KUBECONFIG set for kr8s)."""
    kubeconfig = Path(os.environ["DGP_PEER_KUBECONFIG"])
    os.environ["KUBECONFIG"] = str(kubeconfig)
    return GroundCluster(kubeconfig, os.environ["DGP_PEER_KUBECTL"])


@pytest.fixture(scope="session")
def docker_image() -> str:
    """Their image name; the runner tagged the built Dask image so on the real node."""
    return DEV_IMAGE


@pytest.fixture(scope="session", autouse=True)
def customresources(k8s_cluster: GroundCluster) -> None:
    """The Dask CRDs are installed already (the dask operator's chart): check, as they apply."""
    crds = k8s_cluster.kubectl("get", "crd")
    assert "daskclusters.kubernetes.dask.org" in crds


@pytest.fixture(autouse=True)
def namespace(k8s_cluster: GroundCluster) -> Iterator[str]:
    """A fresh namespace per test, as theirs (``dask-k8s-pytest-<hex>``)."""
    ns = "dask-k8s-pytest-" + uuid.uuid4().hex[:10]
    k8s_cluster.kubectl("create", "ns", ns)
    yield ns
    k8s_cluster.kubectl("delete", "ns", ns, "--wait=false", "--ignore-not-found=true")


@pytest.fixture
def kopf_runner(k8s_cluster: GroundCluster, namespace: str) -> object:
    """Their controller in this process, scoped to the test's namespace (as theirs)."""
    del k8s_cluster
    from kopf.testing import KopfRunner  # noqa: PLC0415  # only where their suite runs

    return KopfRunner(
        ["run", "-m", "dask_kubernetes.operator", "--verbose", "--namespace", namespace]
    )


@pytest.fixture
def anyio_backend() -> str:
    """Their async tests run on asyncio."""
    return "asyncio"
