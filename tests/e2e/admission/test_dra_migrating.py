"""Admission and the drift watch on a pool migrating from the device plugin to DRA.

Fleet ``migrating`` (``provingground.pools.FLEETS``): t4 (device plugin) and a100-migrating, half
of whose nodes already publish their GPUs in ResourceSlices (no GFD labels there), all on driver
580.95.05 / 13.0, which the devices spell 580.95.5 / 13.0.0. Verdicts: one driver class across
both halves (the spellings are one version), so nothing is pinned; the implicit class name is
served by the migrated half only; the drift watch reports nothing until a migrated node's driver
really differs.
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
from kubernetes import client

from provingground.parity import ParityOperator, eventually
from provingground.pytest_plugin import E2ECluster
from tests.e2e.admission import dra_ground as g

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.timeout(900),
    pytest.mark.parametrize("fleet_cluster", ["migrating"], indirect=True),
]


@pytest.fixture(scope="module")
def parity(fleet_cluster: E2ECluster) -> Iterator[ParityOperator]:
    yield from g.parity_on(fleet_cluster)


def _migrated(cluster: E2ECluster) -> list[str]:
    """The a100-migrating nodes DRA serves (their Node lists no nvidia.com/gpu)."""
    names = g.nodes_of(cluster, "a100-migrating")
    core = client.CoreV1Api(cluster.api)
    return [
        n for n in names if "nvidia.com/gpu" not in (core.read_node(n).status.allocatable or {})
    ]


@pytest.mark.parametrize("which", ["a", "b"])
def test_one_driver_class_in_both_spellings_needs_no_pin(
    fleet_cluster: E2ECluster, parity: ParityOperator, which: str
) -> None:
    ns = g.namespace(fleet_cluster, f"dra-migrating-{which}")
    fixed, warnings = parity.create(g.shape(which, ns, "c"), dry_run=True)
    resource = "nvidia.com/gpu" if which == "a" else g.IMPLICIT + "gpu.nvidia.com"
    assert g.limits(fixed, "scheduler") == {resource: "1"}  # DGP001
    assert g.limits(fixed, "worker") == {resource: "1"}  # not moved
    assert "affinity" not in fixed["spec"]["worker"]["spec"]  # not pinned
    assert not any(" DGP014 " in w or " DGP028 " in w for w in warnings), warnings
    assert g.verifier(fixed)["resources"]["limits"][resource] == "1"


def test_the_implicit_class_name_is_served_by_the_migrated_half(
    fleet_cluster: E2ECluster, parity: ParityOperator
) -> None:
    ns = g.namespace(fleet_cluster, "dra-migrating-place")
    migrated = _migrated(fleet_cluster)
    assert len(migrated) == 2, migrated
    node = g.run_pod(fleet_cluster, ns, "p", {g.IMPLICIT + "gpu.nvidia.com": "1"}, {})
    assert node in migrated


def test_drift_watch_compares_versions_not_spellings(
    fleet_cluster: E2ECluster, parity: ParityOperator
) -> None:
    ns = g.namespace(fleet_cluster, "dra-migrating-drift")
    parity.create(g.shape("a", ns, "d"))
    migrated = _migrated(fleet_cluster)
    plugin = [n for n in g.nodes_of(fleet_cluster, "a100-migrating") if n not in migrated]
    g.place_pod(fleet_cluster, ns, "d-scheduler", plugin[0], g.dask_labels("d", "scheduler"))
    g.place_pod(fleet_cluster, ns, "d-worker", migrated[0], g.dask_labels("d", "worker"))
    time.sleep(10)  # the watch has seen both pods: 580.95.05 (labels) is 580.95.5 (devices)
    assert g.events(fleet_cluster, ns, "ParityDriverMismatch", "d") == []

    g.upgrade_slice(fleet_cluster, migrated[0], "590.44.1", "13.1.0")
    [message] = eventually(
        lambda: g.events(fleet_cluster, ns, "ParityDriverMismatch", "d"),
        timeout=90,
        what="ParityDriverMismatch",
    )
    assert f"runs on node {plugin[0]} with driver 580.95.05 / CUDA 13.0" in message, message
    assert f"driver 590.44.1 / CUDA 13.1 (1 pod: d-worker on {migrated[0]})" in message, message
