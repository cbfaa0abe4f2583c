"""Fixtures for the dask-gateway e2e tests: our webhooks, the gateway's CRDs, a real gateway.

``parity`` is package-scoped, like the admission tests' (its webhooks cover every namespace, so
they are removed before tests outside this folder run). Each test module gets its own gateway
(API server and controller, host processes) in a namespace of its own.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from provingground.gateway import (
    ADMIN_OPTIONS,
    GATEWAY_IMAGE,
    GatewayServer,
    install_gateway_crds,
)
from provingground.parity import Kubectl, ParityOperator, run_kubectl
from provingground.pytest_plugin import E2ECluster
from tests.e2e.admission.conftest import PROVING_GROUND_ONLY


@pytest.fixture(scope="package")
def parity(cluster: E2ECluster, node_pools, dask_operator) -> Iterator[ParityOperator]:
    """``dask-gpu-parity run`` with its webhooks applied and indices warm; gone afterwards."""
    if cluster.control_plane is None:
        pytest.skip(PROVING_GROUND_ONLY)
    operator = ParityOperator(cluster.control_plane, cluster.api, cluster.log_dir)
    operator.start()
    try:
        yield operator
    finally:
        operator.uninstall()


@pytest.fixture(scope="module")
def gateway(cluster: E2ECluster, parity: ParityOperator) -> Iterator[GatewayServer]:
    """dask-gateway's API server and controller with the RAPIDS administrator's options."""
    yield from _gateway(cluster, ADMIN_OPTIONS)


def _gateway(cluster: E2ECluster, options: str) -> Iterator[GatewayServer]:
    """A gateway with ``options``, creating clusters in a namespace of its own."""
    install_gateway_crds(cluster.kubectl)
    namespace = f"e2e-gateway-{uuid.uuid4().hex[:5]}"
    cluster.kubectl("create", "namespace", namespace)
    try:
        with GatewayServer(
            cluster.kubeconfig, cluster.log_dir, namespace, options=options, env=cluster.env
        ) as gw:
            yield gw
    finally:
        cluster.release_namespace(namespace)


@pytest.fixture(scope="module")
def pinned_gateway(cluster: E2ECluster, parity: ParityOperator) -> Iterator[GatewayServer]:
    """The administrator's options, whose GPU choice also pins the scheduler to another image."""
    pinned = ADMIN_OPTIONS.replace(
        '"worker_cmd": "dask-cuda-worker",',
        '"worker_cmd": "dask-cuda-worker",\n'
        f'        "scheduler_extra_container_config": {{"image": {GATEWAY_IMAGE!r}}},',
    )
    assert pinned != ADMIN_OPTIONS
    yield from _gateway(cluster, pinned)


@pytest.fixture(scope="module")
def gateway_crds(cluster: E2ECluster) -> None:
    """The gateway's CRD (and the traefik.io kinds its controller uses), installed."""
    install_gateway_crds(cluster.kubectl)


@pytest.fixture
def kubectl(cluster: E2ECluster) -> Kubectl:
    """kubectl against the cluster that returns a Result (rc, stdout, stderr, warnings)."""
    return run_kubectl(cluster.kubectl_bin, cluster.kubeconfig)
