"""Server-side dry run (what Argo CD, Flux and `kubectl diff` use) and the opt-out switches."""

from __future__ import annotations

import json
import time

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from provingground.parity import EXAMPLES, dask_object, eventually, example

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]
SKIP = "gpuparity.dask.org/skip"
TCP = str(EXAMPLES / "gpu-cluster-tcp.yaml")


def _spec(doc: dict) -> str:
    return json.dumps(doc["spec"], sort_keys=True)


def test_server_dry_run_returns_mutated_object_with_warnings_and_creates_nothing(
    parity, cluster, kubectl, namespace
):
    dry = kubectl("apply", "--dry-run=server", "-o", "json", "-n", namespace, "-f", TCP)
    assert dry.rc == 0, dry.stderr
    fixed = dry.json
    scheduler = fixed["spec"]["scheduler"]["spec"]
    workers = fixed["spec"]["worker"]["spec"]
    assert scheduler["containers"][0]["resources"]["limits"] == {"nvidia.com/gpu": "1"}
    assert [c["name"] for c in scheduler["initContainers"]] == [
        "gpu-parity-probe",
        "gpu-parity-check",
    ]
    assert scheduler["nodeSelector"] == workers["nodeSelector"]
    assert scheduler["tolerations"] == workers["tolerations"]
    # One short warning per change: what was changed (the JSON path) and why (the rule).
    ours = [w for w in dry.warnings if w.startswith("dask-gpu-parity ")]
    assert ours, dry.stderr
    assert len(ours) == len(dry.warnings), dry.warnings
    assert all(": fixed /spec/scheduler/spec" in w for w in ours), ours
    assert len(set(ours)) == len(ours)

    # Nothing was created, by the API server or by anything reacting to it.
    assert kubectl("get", "daskclusters", "-n", namespace, "-o", "name").stdout.strip() == ""
    again = kubectl("apply", "--dry-run=server", "-o", "json", "-n", namespace, "-f", TCP)
    assert _spec(again.json) == _spec(fixed)  # deterministic (Argo CD server-side diff)
    assert kubectl("get", "deployments", "-n", namespace, "-o", "name").stdout.strip() == ""

    # And the real create stores exactly what the dry run showed.
    real = kubectl("apply", "-o", "json", "-n", namespace, "-f", TCP)
    assert real.rc == 0, real.stderr
    assert _spec(real.json) == _spec(fixed)
    assert real.warnings == dry.warnings


def test_server_dry_run_denial_is_the_real_denial(parity, kubectl, namespace):
    ucx = str(EXAMPLES / "gpu-cluster-ucx.yaml")
    dry = kubectl("apply", "--dry-run=server", "-n", namespace, "-f", ucx)
    real = kubectl("apply", "-n", namespace, "-f", ucx)
    assert dry.rc != 0
    assert real.rc != 0
    assert "DGP013 at /spec/scheduler/spec" in dry.stderr
    assert dry.stderr.replace(" (server dry run)", "") == real.stderr


@pytest.mark.parametrize(
    "where", ["resource-annotation", "namespace-annotation", "namespace-label"]
)
def test_opt_out_leaves_gpu_cluster_untouched(parity, cluster, kubectl, make_namespace, where):
    unwatched = make_namespace("ref", labels={SKIP: "true"})
    reference = kubectl("apply", "--dry-run=server", "-o", "json", "-n", unwatched, "-f", TCP)
    assert reference.rc == 0, reference.stderr
    assert not reference.warnings, reference.warnings

    ns = make_namespace(
        "optout",
        labels={SKIP: "true"} if where == "namespace-label" else None,
        annotations={SKIP: "true"} if where == "namespace-annotation" else None,
    )
    tcp = example("gpu-cluster-tcp.yaml", namespace=ns)
    if where == "resource-annotation":
        tcp["metadata"]["annotations"] = {SKIP: "true"}
    if where == "namespace-annotation":  # our namespace index must see the annotation first
        eventually(lambda: not parity.create(tcp, dry_run=True)[1], what="namespace indexed")
    skipped = parity.metric("dgp_admission_requests_total", result="skipped")

    result = kubectl("apply", "-f", "-", input=json.dumps(tcp))
    assert result.rc == 0, result.stderr
    assert not result.warnings, result.warnings
    stored = dask_object(cluster.api, ns, "daskclusters", "rapids-tcp")
    assert _spec(stored) == _spec(reference.json)
    assert "nvidia.com" not in json.dumps(stored["spec"]["scheduler"]["spec"])
    now = parity.metric("dgp_admission_requests_total", result="skipped")
    if where == "namespace-label":
        assert now == skipped  # the webhook's namespaceSelector: the API server never asks us
    elif where == "resource-annotation":
        assert now == skipped  # the webhooks' matchConditions: the API server never asks us
    else:
        assert now >= skipped + 2  # asked (mutate and validate), answered "skipped"

    # The drift watch honours the opt-out as well: no ParityDrift for this cluster's scheduler.
    apps = client.AppsV1Api(cluster.api)
    eventually(
        lambda: apps.read_namespaced_deployment("rapids-tcp-scheduler", ns),
        timeout=120,
        retry_on=(ApiException,),
    )
    deadline = time.monotonic() + 5  # a bounded look for a report that must never come
    while time.monotonic() < deadline:
        events = client.CoreV1Api(cluster.api).list_namespaced_event(ns).items
        assert not [e for e in events if e.reason == "ParityDrift"], events
        time.sleep(0.5)
    assert parity.metric("dgp_drifted_clusters", namespace=ns) == 0
