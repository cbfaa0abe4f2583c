"""Each example, applied through the real API server with our webhooks and the dask operator."""

from __future__ import annotations

import json

import pytest
import yaml

from provingground import POOLS
from provingground.parity import (
    EXAMPLES,
    assert_scheduler_parity,
    dask_object,
    eventually,
    example,
)

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]
A100 = POOLS["a100"]
# The mutating webhook denies what it cannot fix: validation is not called on its result.
DENIED = 'admission webhook "mutate-daskcluster.gpuparity.dask.org" denied the request'


def _ours(warnings: list[str]) -> list[str]:
    return [w for w in warnings if w.startswith("dask-gpu-parity")]


def test_tcp_example_scheduler_gets_gpu_image_verifier_and_workers_driver(
    parity, cluster, kubectl, namespace
):
    result = kubectl("apply", "-n", namespace, "-f", str(EXAMPLES / "gpu-cluster-tcp.yaml"))
    assert result.rc == 0, result.stderr
    codes = {w.split()[1] for w in _ours(result.warnings)}
    assert {"DGP001", "DGP004", "DGP005", "DGP009"} <= codes, result.warnings

    rows = assert_scheduler_parity(cluster.api, namespace, "rapids-tcp", workers=2)
    (sched,) = [r for r in rows if r.component == "scheduler"]
    assert sched.gpu_product == A100.product
    assert (sched.driver, sched.cuda) == (A100.driver, A100.cuda)


def test_policy_sends_scheduler_to_t4_pool_on_workers_driver(
    parity, cluster, kubectl, namespace, apply_policy
):
    assert kubectl("label", "namespace", namespace, "dask-gpu-parity.io/enforce=true").rc == 0
    apply_policy(yaml.safe_load((EXAMPLES / "policy.yaml").read_text()))
    tcp = example("gpu-cluster-tcp.yaml", namespace=namespace)

    def t4_selected() -> bool:
        fixed, _ = parity.create(tcp, dry_run=True)
        selector = fixed["spec"]["scheduler"]["spec"].get("nodeSelector", {})
        return selector.get("nvidia.com/gpu.product") == "Tesla-T4"

    eventually(t4_selected, what="the policy and the namespace label reach the indices")

    result = kubectl("apply", "-f", "-", input=json.dumps(tcp))
    assert result.rc == 0, result.stderr
    rows = assert_scheduler_parity(cluster.api, namespace, "rapids-tcp", workers=2, pool="t4")
    (sched,) = [r for r in rows if r.component == "scheduler"]
    assert sched.gpu_product == "Tesla-T4"
    assert {r.gpu_product for r in rows if r.component == "worker"} == {A100.product}


def test_daskjob_example_cluster_gets_parity(parity, cluster, kubectl, namespace):
    result = kubectl("apply", "-n", namespace, "-f", str(EXAMPLES / "gpu-daskjob.yaml"))
    assert result.rc == 0, result.stderr
    assert _ours(result.warnings), result.stderr
    job = dask_object(cluster.api, namespace, "daskjobs", "gpu-etl")
    scheduler = job["spec"]["cluster"]["spec"]["scheduler"]["spec"]
    assert scheduler["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] == "1"
    # The dask operator creates the DaskCluster from the job (a second CREATE we admit again).
    assert_scheduler_parity(cluster.api, namespace, "gpu-etl", workers=2)


def test_cpu_only_example_untouched(parity, cluster, kubectl, namespace, make_namespace):
    # Reference: the same manifest where our webhooks are not called at all.
    unwatched = make_namespace("ref", labels={"gpuparity.dask.org/skip": "true"})
    reference = kubectl(
        "apply",
        "-n",
        unwatched,
        "--dry-run=server",
        "-o",
        "json",
        "-f",
        str(EXAMPLES / "cpu-cluster.yaml"),
    )
    assert reference.rc == 0, reference.stderr
    before = parity.metric("dgp_admission_requests_total", webhook="mutate-daskcluster")

    result = kubectl("apply", "-n", namespace, "-f", str(EXAMPLES / "cpu-cluster.yaml"))
    assert result.rc == 0, result.stderr
    assert not result.warnings, result.warnings
    stored = dask_object(cluster.api, namespace, "daskclusters", "cpu-only")
    assert json.dumps(stored["spec"], sort_keys=True) == json.dumps(
        reference.json["spec"], sort_keys=True
    )
    # Untouched, and without a webhook call: the matchConditions know a CPU-only cluster needs
    # nothing (tests/e2e/admission/test_match_conditions.py counts the calls per create).
    assert parity.metric("dgp_admission_requests_total", webhook="mutate-daskcluster") == before


def test_ucx_example_with_impossible_placement_denied(parity, cluster, kubectl, namespace):
    result = kubectl("apply", "-n", namespace, "-f", str(EXAMPLES / "gpu-cluster-ucx.yaml"))
    assert result.rc != 0
    message = result.stderr
    assert DENIED in message
    assert "DGP013 at /spec/scheduler/spec" in message  # the code and the JSON path
    assert "No node can take the scheduler" in message
    assert "Add such nodes or change the scheduler pool" in message  # the fix
    listed = kubectl("get", "daskclusters", "-n", namespace, "-o", "name")
    assert listed.rc == 0
    assert listed.stdout.strip() == ""


def test_gpu_worker_group_on_cpu_scheduler_cluster_denied(parity, cluster, kubectl, namespace):
    result = kubectl("apply", "-n", namespace, "-f", str(EXAMPLES / "cpu-cluster.yaml"))
    assert result.rc == 0, result.stderr
    # No waiting: the webhook reads the DaskCluster when the group is admitted.
    result = kubectl("apply", "-n", namespace, "-f", str(EXAMPLES / "gpu-workergroup.yaml"))
    assert result.rc != 0
    assert 'admission webhook "validate-daskworkergroup.gpuparity.dask.org" denied' in result.stderr
    assert "DGP015 at /spec/cluster" in result.stderr
    assert "then recreate the DaskCluster" in result.stderr  # what resolves it, not `fix`
    groups = kubectl("get", "daskworkergroups", "-n", namespace, "-o", "name").stdout.split()
    assert "daskworkergroup.kubernetes.dask.org/cpu-cluster-gpu-workers" not in groups


def _group_for(cluster_name: str, namespace: str) -> dict:
    group = example("gpu-workergroup.yaml", namespace=namespace, name=f"{cluster_name}-gpu")
    group["spec"]["cluster"] = cluster_name
    return group


def test_worker_group_created_right_after_its_cluster_is_checked_against_it(
    parity, kubectl, namespace
):
    """One ``kubectl apply`` of a cluster and its group: milliseconds apart, no index to lag."""
    cpu = example("cpu-cluster.yaml", namespace=namespace)
    gpu = example("gpu-cluster-tcp.yaml", namespace=namespace)
    for doc in (cpu, gpu):
        pair = yaml.safe_dump_all([doc, _group_for(doc["metadata"]["name"], namespace)])
        result = kubectl("apply", "-f", "-", input=pair)
        if doc is cpu:  # the cluster is created, its GPU group denied (DGP015)
            assert result.rc != 0
            assert "daskcluster.kubernetes.dask.org/cpu-only created" in result.stdout
            assert "DGP015 at /spec/cluster" in result.stderr
        else:  # mutation gave the scheduler a GPU: the group joins it
            assert result.rc == 0, result.stderr
            assert "daskworkergroup.kubernetes.dask.org/rapids-tcp-gpu created" in result.stdout
    groups = kubectl("get", "daskworkergroups", "-n", namespace, "-o", "name").stdout.split()
    assert "daskworkergroup.kubernetes.dask.org/cpu-only-gpu" not in groups


def test_gpu_worker_group_before_its_cluster_is_allowed_with_a_warning(kubectl, namespace, parity):
    result = kubectl(
        "apply", "--dry-run=server", "-f", "-", input=json.dumps(_group_for("later", namespace))
    )
    assert result.rc == 0, result.stderr
    (warning,) = _ours(result.warnings)
    assert "DaskCluster 'later' does not exist (yet)" in warning
