"""Fixtures for admission e2e tests: our operator beside the real dask operator.

``parity`` is package-scoped: the webhooks it installs cover every namespace, so they are
removed (and the operator stopped) before tests outside this folder run; the baseline tests in
``tests/e2e`` must see the cluster without us.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from provingground.parity import Kubectl, ParityOperator, run_kubectl

PROVING_GROUND_ONLY = (
    "Our operator runs on this host and the API server calls its webhooks at "
    "https://127.0.0.1:<port>: only the proving ground's API server (on this host) can reach "
    "it. Run without --kubeconfig/KUBECONFIG to use the proving ground"
)


@pytest.fixture(scope="package")
def parity(cluster, node_pools, dask_operator, policyreport_crd) -> Iterator[ParityOperator]:
    """``dask-gpu-parity run`` with its webhooks applied and indices warm; gone afterwards."""
    if cluster.control_plane is None:
        pytest.skip(PROVING_GROUND_ONLY)
    operator = ParityOperator(cluster.control_plane, cluster.api, cluster.log_dir)
    operator.start()
    print(f"\ndask-gpu-parity ready in {operator.ready_seconds:.1f}s at {operator.url}")
    try:
        yield operator
    finally:
        operator.uninstall()


@pytest.fixture
def kubectl(cluster) -> Kubectl:
    """kubectl against the cluster that returns a Result (rc, stdout, stderr, warnings)."""
    return run_kubectl(cluster.kubectl_bin, cluster.kubeconfig)


@pytest.fixture
def make_namespace(cluster, request) -> Iterator[Callable[..., str]]:
    """Create extra namespaces (with labels/annotations); all deleted after the test."""
    made: list[str] = []
    stem = "".join(c if c.isalnum() else "-" for c in request.node.name.lower())[:30].strip("-")

    def make(
        suffix: str, labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None
    ) -> str:
        name = f"e2e-{stem}-{suffix}-{uuid.uuid4().hex[:5]}"
        metadata: dict[str, Any] = {"name": name, "labels": labels or {}}
        metadata["annotations"] = annotations or {}
        manifest = {"apiVersion": "v1", "kind": "Namespace", "metadata": metadata}
        cluster.kubectl("create", "-f", "-", input=json.dumps(manifest))
        made.append(name)
        return name

    yield make
    for name in made:
        cluster.release_namespace(name)


@pytest.fixture
def apply_policy(kubectl) -> Iterator[Callable[[dict[str, Any]], str]]:
    """Apply DaskGPUPolicies (cluster-scoped); each is deleted after the test."""
    names: list[str] = []

    def apply(doc: dict[str, Any]) -> str:
        result = kubectl("apply", "-f", "-", input=json.dumps(doc))
        assert result.rc == 0, result.stderr
        names.append(doc["metadata"]["name"])
        return str(doc["metadata"]["name"])

    yield apply
    for name in names:
        kubectl("delete", "daskgpupolicy", name, "--ignore-not-found")
