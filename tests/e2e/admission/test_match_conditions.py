"""The webhooks' matchConditions, as the real API server evaluates them.

A create costs webhook calls only when our operator can have something to say: the API server's
own counter (``apiserver_admission_webhook_request_total``) shows one call for a GPU DaskCluster
or DaskJob (mutate: it answers for validation too, as its result has a GPU on the scheduler and
the verifier), two where the mutation leaves no verifier (validate is called), one for a GPU
DaskWorkerGroup, and none for CPU-only or opted-out Dask resources. Dry-run creates: the webhooks
are called the same way.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from provingground.parity import eventually, example, policy_for
from tests.e2e.webhook_calls import calls_for


def _cpu(doc: dict[str, Any], worker: dict[str, Any]) -> dict[str, Any]:
    for container in worker["spec"]["containers"]:
        container["resources"] = {"requests": {"cpu": "1"}, "limits": {"memory": "1Gi"}}
    return doc


def _resources(doc: dict[str, Any], worker: dict[str, Any], resources: Any) -> dict[str, Any]:
    if resources is None:
        del worker["spec"]["containers"][0]["resources"]
    else:
        worker["spec"]["containers"][0]["resources"] = resources
    return doc


def _cases(namespace: str) -> list[tuple[str, dict[str, Any], dict[str, float]]]:
    tcp = example("gpu-cluster-tcp.yaml", namespace=namespace, name="mc-tcp")
    job = example("gpu-daskjob.yaml", namespace=namespace, name="mc-job")
    group = example("gpu-workergroup.yaml", namespace=namespace, name="mc-group")
    cpu = example("cpu-cluster.yaml", namespace=namespace, name="mc-cpu")
    cluster_calls = {"mutate-daskcluster": 1}
    job_calls = {"mutate-daskjob": 1}

    def variant(doc: dict[str, Any], change) -> dict[str, Any]:
        doc = copy.deepcopy(doc)
        spec = doc["spec"]["cluster"]["spec"] if doc["kind"] == "DaskJob" else doc["spec"]
        return change(doc, spec["worker"])

    skipped = copy.deepcopy(tcp)
    skipped["metadata"]["annotations"] = {"gpuparity.dask.org/skip": "True"}
    return [
        ("gpu-cluster", tcp, cluster_calls),
        (
            "gpu-in-requests-only",
            variant(tcp, lambda d, w: _resources(d, w, {"requests": {"nvidia.com/gpu": "1"}})),
            cluster_calls,
        ),
        (
            "mig-slice",
            variant(
                tcp, lambda d, w: _resources(d, w, {"limits": {"nvidia.com/mig-1g.10gb": "1"}})
            ),
            cluster_calls,
        ),
        (  # denied by the mutating webhook (DGP013: no such nodes here)
            "shared-gpu",
            variant(tcp, lambda d, w: _resources(d, w, {"limits": {"nvidia.com/gpu.shared": "1"}})),
            cluster_calls,
        ),
        ("gpu-daskjob", job, job_calls),
        ("gpu-workergroup", group, {"validate-daskworkergroup": 1}),
        ("cpu-cluster", cpu, {}),
        ("cpu-cluster-with-gpu-variant", variant(tcp, _cpu), {}),
        ("cpu-daskjob", variant(job, _cpu), {}),
        ("cpu-workergroup", variant(group, _cpu), {}),
        ("worker-without-resources", variant(tcp, lambda d, w: _resources(d, w, None)), {}),
        ("opted-out-by-annotation", skipped, {}),
    ]


CASES = [name for name, _, _ in _cases("x")]


@pytest.mark.e2e
@pytest.mark.parametrize("case", CASES)
def test_only_gpu_dask_resources_reach_the_operator(parity, kubectl, namespace, case):
    (doc, expected) = next((d, e) for n, d, e in _cases(namespace) if n == case)
    assert calls_for(kubectl, doc) == expected


@pytest.mark.e2e
def test_validation_is_called_where_mutation_leaves_no_verifier(
    parity, kubectl, namespace, apply_policy
):
    """Mutation answers for validation only where its result has a GPU and the verifier."""
    apply_policy(policy_for(namespace, verifier={"enabled": False}))
    tcp = example("gpu-cluster-tcp.yaml", namespace=namespace, name="mc-unverified")

    def policy_indexed() -> bool:
        fixed, _ = parity.create(tcp, dry_run=True)
        return "initContainers" not in fixed["spec"]["scheduler"]["spec"]

    eventually(policy_indexed, what="the policy without verifier in force")
    assert calls_for(kubectl, tcp) == {"mutate-daskcluster": 1, "validate-daskcluster": 1}
