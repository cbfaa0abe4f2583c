"""Admission, placement and the drift watch on a mixed fleet: device-plugin and DRA pools.

Fleet ``mixed`` (``provingground.pools.FLEETS``): the device-plugin pools with GFD labels (t4,
a100, a100-mig on 580.95.05 / 13.0, h100 on 570.172.08 / 12.8) beside the DRA pools (t4-dra,
a100-dra, a100-mig-dra on 580.95.05, h100-dra on 575.57.08 / 12.9). Verdicts:
tests/fixtures/dra/EXPECTED.md §4 (mixed), written before the code: a CUDA 13 shape-A cluster is
pinned to 580.95.05 by GFD's labels (its DRA nodes left out, said in DGP014); a shape-B cluster
reaches DRA nodes only, and is moved onto the per-driver class where there is one.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from provingground.parity import ParityOperator, eventually
from provingground.pytest_plugin import E2ECluster
from tests.e2e.admission import dra_ground as g

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(900),
    pytest.mark.parametrize("fleet_cluster", ["mixed"], indirect=True),
]
DRIVER_LABEL = "nvidia.com/cuda.driver-version.full"


@pytest.fixture(scope="module")
def parity(fleet_cluster: E2ECluster) -> Iterator[ParityOperator]:
    yield from g.parity_on(fleet_cluster)


def _pinned_driver(spec: dict) -> list[str]:
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    exprs = terms["nodeSelectorTerms"][0]["matchExpressions"]
    return [v for e in exprs if e["key"] == DRIVER_LABEL for v in e["values"]]


def test_shape_a_is_pinned_by_gfd_labels_and_lands_on_labelled_580_nodes(
    fleet_cluster: E2ECluster, parity: ParityOperator
) -> None:
    ns = g.namespace(fleet_cluster, "dra-mixed-a")
    fixed, warnings = parity.create(g.shape("a", ns, "a"), dry_run=True)
    worker = fixed["spec"]["worker"]["spec"]
    assert _pinned_driver(worker) == ["580.95.05"]
    assert _pinned_driver(fixed["spec"]["scheduler"]["spec"]) == ["580.95.05"]
    assert g.limits(fixed, "worker") == {"nvidia.com/gpu": "1"}
    assert any(" DGP014 " in w for w in warnings), warnings
    pools = {
        g.pool_of(
            fleet_cluster,
            g.pod_spec_pod(fleet_cluster, ns, f"w{i}", worker, {"nvidia.com/gpu": "1"}),
        )
        for i in range(3)
    }
    assert pools <= {"t4", "a100", "a100-mig"}, pools  # labelled 580 nodes: no DRA node, no h100


def test_shape_b_reaches_dra_nodes_only_and_says_which_class_to_create(
    fleet_cluster: E2ECluster, parity: ParityOperator
) -> None:
    ns = g.namespace(fleet_cluster, "dra-mixed-b")
    fixed, warnings = parity.create(g.shape("b", ns, "b"), dry_run=True)
    assert g.limits(fixed, "worker") == {g.IMPLICIT + "gpu.nvidia.com": "1"}  # nothing to pin by
    assert g.limits(fixed, "scheduler") == {g.IMPLICIT + "gpu.nvidia.com": "1"}  # DGP001
    [dgp014] = [w for w in warnings if " DGP014 " in w]
    assert "driver 580.95.5 / CUDA 13.0 is on DRA nodes" in dgp014, dgp014


def test_shape_b_moves_onto_the_per_driver_class(
    fleet_cluster: E2ECluster, parity: ParityOperator
) -> None:
    g.create_pinned_class(fleet_cluster)
    ns = g.namespace(fleet_cluster, "dra-mixed-pin")

    def moved() -> dict:
        fixed, _ = parity.create(g.shape("b", ns, "c"), dry_run=True)
        assert g.limits(fixed, "worker") == {g.PINNED_580: "1"}, g.limits(fixed, "worker")
        return fixed

    fixed = eventually(moved, timeout=60, what="the DeviceClass in the operator's index")
    assert g.limits(fixed, "scheduler") == {g.PINNED_580: "1"}
    node = g.run_pod(fleet_cluster, ns, "on-class", {g.PINNED_580: "1"}, {})
    assert g.pool_of(fleet_cluster, node) in {"t4-dra", "a100-dra", "a100-mig-dra"}


def test_drift_watch_sees_a_scheduler_on_a_labelled_570_node_beside_dra_workers(
    fleet_cluster: E2ECluster, parity: ParityOperator
) -> None:
    ns = g.namespace(fleet_cluster, "dra-mixed-drift")
    message, h100, a100_dra = g.driver_mismatch(fleet_cluster, parity, ns, "h100", "a100-dra")
    assert f"runs on node {h100} with driver 570.172.08 / CUDA 12.8" in message, message
    assert f"driver 580.95.5 / CUDA 13.0 (1 pod: d-worker on {a100_dra})" in message, message
