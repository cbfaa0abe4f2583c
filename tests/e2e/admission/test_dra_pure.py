"""Admission, placement and the drift watch on a pure-DRA fleet (no device plugin, no GFD).

Fleet ``pure-dra`` (``provingground.pools.FLEETS``): t4-dra, a100-dra, a100-mig-dra on driver
580.95.05 (its devices say 580.95.5 / 13.0.0), h100-dra on 575.57.08 / 12.9; no node lists
``nvidia.com/gpu`` in its allocatable. Verdicts: tests/fixtures/dra/EXPECTED.md §4 (pure-dra),
written before the code: a CUDA 13 cluster can run only on 580, which no node label pins; with
the admin's class ``gpu-580-95-5.nvidia.com`` scheduler and workers are moved onto it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from provingground.parity import ParityOperator, eventually, policy_for
from provingground.pytest_plugin import E2ECluster
from tests.e2e.admission import dra_ground as g

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(900),
    pytest.mark.parametrize("fleet_cluster", ["pure-dra"], indirect=True),
]


@pytest.fixture(scope="module")
def parity(fleet_cluster: E2ECluster) -> Iterator[ParityOperator]:
    yield from g.parity_on(fleet_cluster)


def test_operator_gets_ready_with_the_gpu_nodes_of_the_slices(parity: ParityOperator) -> None:
    # Ready means the UCX example was denied for DGP013: GPU nodes were found, from slices only.
    assert parity.metric("dgp_gpu_nodes") > 0
    assert parity.metric("dgp_informer_synced", resource="resourceslices") == 1
    assert parity.metric("dgp_informer_synced", resource="deviceclasses") == 1


def test_shape_a_without_a_per_driver_class_says_which_to_create(
    fleet_cluster: E2ECluster, parity: ParityOperator
) -> None:
    ns = g.namespace(fleet_cluster, "dra-pure-a")
    fixed, warnings = parity.create(g.shape("a", ns, "a"), dry_run=True)
    assert g.limits(fixed, "scheduler") == {"nvidia.com/gpu": "1"}  # DGP001, the workers' GPU
    assert g.limits(fixed, "worker") == {"nvidia.com/gpu": "1"}  # not moved: no class to move to
    [dgp014] = [w for w in warnings if " DGP014 " in w]  # cut to the API server's warning size
    assert "driver 580.95.5 / CUDA 13.0 is on DRA nodes" in dgp014, dgp014


@pytest.mark.parametrize("which", ["a", "b"])
def test_scheduler_and_workers_move_onto_the_admins_per_driver_class(
    fleet_cluster: E2ECluster, parity: ParityOperator, which: str
) -> None:
    g.create_pinned_class(fleet_cluster)
    ns = g.namespace(fleet_cluster, f"dra-pure-pin-{which}")

    def moved() -> dict:
        fixed, _ = parity.create(g.shape(which, ns, "c"), dry_run=True)
        assert g.limits(fixed, "worker") == {g.PINNED_580: "1"}, g.limits(fixed, "worker")
        return fixed

    fixed = eventually(moved, timeout=60, what="the DeviceClass in the operator's index")
    assert g.limits(fixed, "scheduler") == {g.PINNED_580: "1"}
    check = g.verifier(fixed)
    assert check["resources"]["limits"][g.PINNED_580] == "1"  # the scheduler's own device
    env = {e["name"]: e.get("value") for e in check.get("env", [])}
    assert env["GPU_PARITY_EXPECT_DRIVER"] == "580.95.5"  # as the class (and devices) spell it


def test_the_per_driver_class_places_pods_on_its_driver_only(
    fleet_cluster: E2ECluster, parity: ParityOperator
) -> None:
    g.create_pinned_class(fleet_cluster)
    ns = g.namespace(fleet_cluster, "dra-pure-place")
    pools = {
        g.pool_of(fleet_cluster, g.run_pod(fleet_cluster, ns, f"p{i}", {g.PINNED_580: "1"}, {}))
        for i in range(3)
    }
    assert pools <= {"t4-dra", "a100-dra", "a100-mig-dra"}, pools  # never h100-dra (575)


def test_a_policy_names_a_dra_class_for_the_scheduler(
    fleet_cluster: E2ECluster, parity: ParityOperator
) -> None:
    ns = g.namespace(fleet_cluster, "dra-pure-policy")
    mig = g.IMPLICIT + "mig.nvidia.com"
    policy = policy_for(ns, scheduler={"gpuResource": mig})
    fleet_cluster.kubectl("apply", "-f", "-", input=json.dumps(policy))

    def scheduler_on_mig() -> bool:
        fixed, _ = parity.create(g.shape("b", ns, "p"), dry_run=True)
        assert mig in g.limits(fixed, "scheduler"), g.limits(fixed, "scheduler")
        return True

    eventually(scheduler_on_mig, timeout=60, what="the policy in the operator's index")


def test_drift_watch_sees_a_scheduler_on_another_driver(
    fleet_cluster: E2ECluster, parity: ParityOperator
) -> None:
    ns = g.namespace(fleet_cluster, "dra-pure-drift")
    message, h100, a100 = g.driver_mismatch(fleet_cluster, parity, ns, "h100-dra", "a100-dra")
    assert f"runs on node {h100} with driver 575.57.8 / CUDA 12.9" in message, message
    assert f"driver 580.95.5 / CUDA 13.0 (1 pod: d-worker on {a100})" in message, message
