"""Drift: GPU clusters created while our operator was stopped are reported after it starts.

One stop window serves both tests: while neither operator nor webhooks exist, two GPU clusters
are created (the dask operator builds their schedulers without a GPU), one in a namespace whose
policy allows repair. Then our operator starts.
"""

from __future__ import annotations

import datetime as dt
import json
import uuid
from dataclasses import dataclass

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from provingground import placements
from provingground.parity import eventually, example, policy_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]
CLUSTER = "rapids-tcp"


@dataclass
class Drifted:
    report_only: str  # namespace: policy without repair (built-in defaults)
    repair: str  # namespace: policy with spec.drift.repair true
    started: dt.datetime  # when our operator process was started again


def _scheduler_template(api, namespace: str) -> dict:
    deployment = client.AppsV1Api(api).read_namespaced_deployment(f"{CLUSTER}-scheduler", namespace)
    return api.sanitize_for_serialization(deployment.spec.template.spec)


def _gpu(template: dict) -> bool:
    return "nvidia.com/gpu" in json.dumps(template.get("containers", []))


def _events(api, namespace: str, reason: str) -> list:
    events = client.CoreV1Api(api).list_namespaced_event(namespace).items
    return [
        e
        for e in events
        if e.reason == reason
        and e.involved_object.kind == "DaskCluster"
        and e.involved_object.name == CLUSTER
    ]


@pytest.fixture(scope="module")
def drifted(parity, cluster, dask_operator):
    names = {k: f"e2e-drift-{k}-{uuid.uuid4().hex[:5]}" for k in ("report", "repair")}
    policy = policy_for(names["repair"], drift={"repair": True})
    try:
        with parity.stopped():
            for ns in names.values():
                cluster.kubectl("create", "namespace", ns)
                doc = example("gpu-cluster-tcp.yaml", namespace=ns)
                doc["spec"]["worker"]["replicas"] = 1
                cluster.kubectl("apply", "-f", "-", input=json.dumps(doc))
            cluster.kubectl("apply", "-f", "-", input=json.dumps(policy))
            for ns in names.values():  # the dask operator built a scheduler without a GPU
                template = eventually(
                    lambda ns=ns: _scheduler_template(cluster.api, ns),
                    timeout=120,
                    retry_on=(ApiException,),
                )
                assert not _gpu(template)
        # parity.stopped() returns once our operator is warm again.
        assert parity.started_at is not None
        yield Drifted(names["report"], names["repair"], parity.started_at)
    finally:
        cluster.kubectl("delete", "daskgpupolicy", policy["metadata"]["name"], check=False)
        for ns in names.values():
            cluster.release_namespace(ns)


def test_drift_reported_with_event_and_metric(parity, cluster, drifted):
    ns = drifted.report_only
    (event, *_) = eventually(lambda: _events(cluster.api, ns, "ParityDrift"), timeout=120)
    posted = event.first_timestamp or event.event_time
    print(f"\nParityDrift posted {(posted - drifted.started).total_seconds():.1f}s after start")
    assert event.type == "Warning"
    assert f"Scheduler Deployment {CLUSTER}-scheduler lacks GPU parity" in event.message
    assert "DGP001" in event.message
    assert "Recreate the DaskCluster to fix it" in event.message  # what to do
    assert eventually(lambda: parity.metric("dgp_drifted_clusters", namespace=ns) == 1)

    # Reported, not repaired: the policy in force (built-in defaults) does not allow repair.
    assert eventually(lambda: _events(cluster.api, drifted.repair, "ParityRepaired"), timeout=120)
    assert not _gpu(_scheduler_template(cluster.api, ns))
    assert not _events(cluster.api, ns, "ParityRepaired")

    # Restarted on the same drift, the operator reports it again to the API server, which
    # answers 409 for the Event of that name: still one ParityDrift Event, not two.
    parity.restart()  # a new process: its counters start at 0
    eventually(
        lambda: parity.metric("dgp_events_total", outcome="exists") >= 1,
        timeout=120,
        what="the restarted operator met its ParityDrift Event",
    )
    assert eventually(lambda: parity.metric("dgp_drifted_clusters", namespace=ns) == 1)
    assert len(_events(cluster.api, ns, "ParityDrift")) == 1


def test_drift_repaired_when_policy_allows(parity, cluster, drifted):
    ns = drifted.repair
    (event, *_) = eventually(lambda: _events(cluster.api, ns, "ParityDrift"), timeout=120)
    assert "Repairing: patching the Deployment restarts the scheduler" in event.message
    assert eventually(lambda: _events(cluster.api, ns, "ParityRepaired"), timeout=120)
    template = _scheduler_template(cluster.api, ns)
    assert _gpu(template)
    assert [c["name"] for c in template.get("initContainers", [])] == [
        "gpu-parity-probe",
        "gpu-parity-check",
    ]
    assert {"name": "gpu-parity-probe", "emptyDir": {"sizeLimit": "1Mi"}} in template["volumes"]

    def repaired_pod_on_workers_driver() -> bool:
        rows = placements(cluster.api, ns, CLUSTER)
        schedulers = [r for r in rows if r.component == "scheduler"]
        workers = [r for r in rows if r.component == "worker" and r.phase == "Running"]
        assert len(schedulers) == 1, rows
        assert workers, rows
        (sched,) = schedulers
        assert (sched.phase, sched.gpu_request) == ("Running", "nvidia.com/gpu=1"), sched
        assert (sched.driver, sched.cuda) == (workers[0].driver, workers[0].cuda), rows
        return True

    eventually(repaired_pod_on_workers_driver, timeout=180)
    # Repaired clusters no longer count as drifted.
    assert eventually(lambda: parity.metric("dgp_drifted_clusters", namespace=ns) == 0)
