"""Faults: the operator SIGKILLed while 10 clients create GPU DaskClusters, then started again.

Ten threads create copies of ``examples/gpu-cluster-tcp.yaml`` (unique names, no workers to
keep the dask operator's work small) through the API server without pause; the operator is
killed (SIGKILL: no shutdown, connections reset) with its webhooks left configured, stays dead
while creates go on, and is started again. Expected outcome:

- ``failurePolicy: Fail``: every create either returns a mutated cluster (scheduler with
  ``nvidia.com/gpu`` and the ``gpu-parity-check`` init container) or fails with the API
  server's message naming our webhook and saying it could not be called. The Go network error
  after that (connection refused, EOF, reset, broken pipe, ...) depends on where the kill met the
  request and is only reported, never asserted: the promise is the refusal, not its words.
  Afterwards the namespace holds exactly the
  clusters whose create succeeded, every one mutated: none admitted unmutated.
- ``failurePolicy: Ignore``: creates during the outage are admitted unmutated (a create may
  also be denied by our validating webhook if the operator is back by then, with its DGP
  message). After the restart the drift watch reports every unmutated cluster with one
  ``ParityDrift`` Event on it and counts it in ``dgp_drifted_clusters``; no mutated cluster is
  reported, none is missed.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from dataclasses import dataclass

import pytest
from kubernetes import client

from provingground.faults import Clients, Create, kill, mutated
from provingground.parity import DASK, eventually, example

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

CLIENTS = 10
MUTATE = "mutate-daskcluster.gpuparity.dask.org"
# The API server's words for a webhook it could not call: its Go error after the URL.
UNREACHABLE = re.compile(
    rf'failed calling webhook "{re.escape(MUTATE)}": failed to call webhook: Post '
    r'"https://127\.0\.0\.1:\d+/mutate-daskcluster\?timeout=\d+s": (?P<why>.+)$'
)


@dataclass
class Run:
    creates: list[Create]
    killed: float  # time.monotonic()
    restarted: float  # the new process served TLS
    down: float  # seconds from the kill until the new process served TLS


def _kill_under_load(parity, doc, prefix: str) -> Run:
    """Creates before, during and after an outage: SIGKILL, 20 answers, start again."""
    with Clients(parity, doc, count=CLIENTS, pause=0.3, prefix=prefix) as clients:
        eventually(lambda: len(clients.creates) >= CLIENTS, timeout=120)
        killed = time.monotonic()
        kill(parity)
        eventually(lambda: len(clients.answered_since(killed)) >= 2 * CLIENTS, timeout=120)
        parity.start(webhooks=False)
        restarted = time.monotonic()
        eventually(lambda: len(clients.answered_since(restarted)) >= 2 * CLIENTS, timeout=120)
    return Run(clients.creates, killed, restarted, restarted - killed)


def _stored(api, namespace: str) -> dict[str, dict]:
    listed = client.CustomObjectsApi(api).list_namespaced_custom_object(
        *DASK, namespace, "daskclusters"
    )
    return {obj["metadata"]["name"]: obj for obj in listed["items"]}


def _why(message: str) -> str | None:
    """The Go error after the API server's "failed to call webhook", or None for another refusal."""
    found = UNREACHABLE.search(message)
    if found is None:
        return None
    return found["why"].rsplit(": ", 1)[-1]  # "connection refused", "EOF", "broken pipe", ...


@pytest.fixture
def doc(namespace) -> dict:
    doc = example("gpu-cluster-tcp.yaml", namespace=namespace)
    doc["spec"]["worker"]["replicas"] = 0
    return doc


def test_fail_policy_every_create_mutated_or_refused_with_a_reason(parity, cluster, doc):
    run = _kill_under_load(parity, doc, "fail")
    created = [c for c in run.creates if c.error is None]
    failed = [c for c in run.creates if c.error is not None]
    reasons = Counter(_why(str(c.error)) for c in failed)
    print(
        f"\nfailurePolicy Fail: {len(run.creates)} creates from {CLIENTS} clients, operator down "
        f"{run.down:.1f} s: {len(created)} mutated, {len(failed)} failed {dict(reasons)}"
    )
    assert failed, "no create ran into the outage"
    assert [c.error for c in failed if _why(str(c.error)) is None] == []
    assert [c.name for c in created if c.obj is None or not mutated(c.obj)] == []
    assert [c.name for c in failed if c.sent > run.restarted] == []  # serving again: all pass
    stored = _stored(cluster.api, doc["metadata"]["namespace"])
    assert sorted(stored) == sorted(c.name for c in created)
    assert [name for name, obj in stored.items() if not mutated(obj)] == []


def _drift_events(api, namespace: str) -> dict[str, list]:
    """ParityDrift Events in the namespace, by the uid of their DaskCluster."""
    found: dict[str, list] = {}
    for event in client.CoreV1Api(api).list_namespaced_event(namespace).items:
        if event.reason == "ParityDrift" and event.involved_object.kind == "DaskCluster":
            found.setdefault(event.involved_object.uid, []).append(event)
    return found


def _lag_after_deployment(api, namespace: str, events: dict[str, list], names: dict) -> float:
    """Seconds (whole: the API's timestamps) from a scheduler Deployment to its report, at most."""
    deployments = client.AppsV1Api(api).list_namespaced_deployment(
        namespace, label_selector="dask.org/component=scheduler"
    )
    made = {
        d.metadata.labels["dask.org/cluster-name"]: d.metadata.creation_timestamp
        for d in deployments.items
    }
    return max(
        (e[0].first_timestamp - made[names[uid]]).total_seconds() for uid, e in events.items()
    )


def test_ignore_policy_every_unmutated_cluster_reported_by_the_drift_watch(parity, cluster, doc):
    namespace = doc["metadata"]["namespace"]
    parity.apply_webhooks(failure_policy="Ignore")
    try:
        run = _kill_under_load(parity, doc, "ignore")
    finally:
        parity.apply_webhooks()  # Fail again, for the tests after this one
    failed = [c for c in run.creates if c.error is not None]
    assert [c.error for c in failed if "dask-gpu-parity denied this resource" not in c.error] == []
    stored = _stored(cluster.api, namespace)
    assert sorted(stored) == sorted(c.name for c in run.creates if c.error is None)
    unmutated = {obj["metadata"]["uid"]: name for name, obj in stored.items() if not mutated(obj)}
    assert unmutated, "no create was admitted while the operator was down"

    def all_reported() -> dict[str, list]:
        events = _drift_events(cluster.api, namespace)
        missing = sorted(name for uid, name in unmutated.items() if uid not in events)
        assert missing == [], f"{len(missing)} unmutated clusters not reported yet"
        return events

    events = eventually(all_reported, timeout=360, interval=1)  # the dask operator paces it
    reported_after = time.monotonic() - run.restarted
    lag = _lag_after_deployment(cluster.api, namespace, events, unmutated)
    print(
        f"\nfailurePolicy Ignore: {len(run.creates)} creates from {CLIENTS} clients, operator "
        f"down {run.down:.1f} s: {len(stored) - len(unmutated)} mutated, {len(unmutated)} "
        f"admitted unmutated, {len(failed)} denied; all {len(unmutated)} reported "
        f"(ParityDrift) within {reported_after:.1f} s of the restart, at most {lag:.0f} s after "
        "the dask operator made their scheduler Deployment"
    )
    assert set(events) == set(unmutated)  # no mutated cluster reported
    assert [len(e) for e in events.values()] == [1] * len(events)  # once each
    assert eventually(
        lambda: parity.metric("dgp_drifted_clusters", namespace=namespace) == len(unmutated)
    )
