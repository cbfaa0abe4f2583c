"""Faults: kube-apiserver killed (SIGKILL) and started again under the running operator.

etcd keeps every object; the operator's watches end, its requests are refused while the API
server is down, and its informers retry with a growing backoff; a watch resumed from a version
the new API server no longer has is answered 410 Gone, and the resource is listed again.

Expected outcome, first with the operator running throughout (a drifted GPU DaskCluster reported
before; a GPU node added and a second drifted cluster made after the restart):

- the operator process stays up and logs no traceback;
- watches resume: the new node is in ``dgp_gpu_nodes`` and in the UCX example's DGP013 denial
  ("none of the N GPU nodes"), and the second cluster is reported (DaskCluster, scheduler
  Deployment and Namespace watches all working again);
- indices correct: every informer holds as many objects as the API server lists;
- no duplicate Events: every (object, reason) the operator had posted an Event for before the
  restart has the same number of Events after it (one ParityDrift for the first cluster), and
  the second cluster has exactly one.

Then with the operator frozen (SIGSTOP) across the restart, as cut off from the API server:
a GPU node of one driver class is deleted and one of another class added while its watches are
down. After it continues, the index has the one and not the other (``dgp_gpu_nodes`` by driver),
every informer matches the API server again, and no Event was posted twice.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections import Counter

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from provingground import POOL_LABEL, POOLS
from provingground.faults import frozen
from provingground.parity import DASK, eventually, example
from provingground.pools import node_manifest

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

SKIP = "gpuparity.dask.org/skip"
NEW_POOL = dataclasses.replace(POOLS["a100"], name="apirestart", size=1)
# Driver classes of their own, so that the index's count per class tells which node it holds.
GONE = dataclasses.replace(POOLS["a100"], name="apirestart-gone", driver="580.65.06")
ADDED = dataclasses.replace(POOLS["a100"], name="apirestart-added", driver="580.82.07")
# What the operator's informers keep, and the same LIST asked of the API server.
INFORMERS = {
    "nodes": ("/api/v1/nodes", ""),
    "namespaces": ("/api/v1/namespaces", ""),
    "daskgpupolicies": ("/apis/gpuparity.dask.org/v1alpha1/daskgpupolicies", ""),
    "daskclusters": ("/apis/kubernetes.dask.org/v1/daskclusters", ""),
    "deployments": ("/apis/apps/v1/deployments", "dask.org/component=scheduler"),
    "pods": ("/api/v1/pods", "dask.org/component+in+(scheduler,worker)"),
}


def _our_events(api) -> Counter[tuple[str, str, str]]:
    """Events the operator posted, counted by (object uid, object name, reason)."""
    events = client.CoreV1Api(api).list_event_for_all_namespaces().items
    return Counter(
        (e.involved_object.uid, e.involved_object.name, e.reason)
        for e in events
        if e.source and e.source.component == "dask-gpu-parity"
    )


def _posted_again(before: Counter, after: Counter) -> list[tuple[str, str, str]]:
    """(object, reason) pairs with more Events after than before. Not equality: Events of other
    tests' namespaces, deleted meanwhile, may be gone."""
    return [k for k in before if after[k] > before[k]]


def _gpu_nodes(api) -> int:
    nodes = client.CoreV1Api(api).list_node().items
    return sum(
        1
        for n in nodes
        if any(
            k.startswith(("nvidia.com/gpu", "nvidia.com/mig-")) and v != "0"
            for k, v in (n.status.allocatable or {}).items()
        )
    )


def _drifted_cluster(cluster, make_namespace, suffix: str) -> tuple[str, str]:
    """A GPU cluster created unmutated (its namespace skipped), then the skip removed.

    The webhooks' namespaceSelector leaves out the labelled namespace, so the dask operator
    builds a scheduler without a GPU; without the label the drift watch checks it. Returns
    (namespace, the DaskCluster's uid).
    """
    namespace = make_namespace(suffix, labels={SKIP: "true"})
    doc = example("gpu-cluster-tcp.yaml", namespace=namespace)
    doc["spec"]["worker"]["replicas"] = 0
    cluster.kubectl("create", "-f", "-", input=json.dumps(doc))
    apps = client.AppsV1Api(cluster.api)
    eventually(
        lambda: apps.read_namespaced_deployment("rapids-tcp-scheduler", namespace),
        timeout=120,
        retry_on=(ApiException,),
    )
    cluster.kubectl("label", "namespace", namespace, f"{SKIP}-")
    obj = client.CustomObjectsApi(cluster.api).get_namespaced_custom_object(
        *DASK, namespace, "daskclusters", "rapids-tcp"
    )
    return namespace, obj["metadata"]["uid"]


def _reported(api, uid: str) -> int:
    return sum(
        n for (u, _, reason), n in _our_events(api).items() if (u, reason) == (uid, "ParityDrift")
    )


def _indices_match_the_api_server(parity, cp) -> dict[str, tuple[float, int]]:
    counts = {}
    for resource, (path, selector) in INFORMERS.items():
        query = f"?labelSelector={selector}" if selector else ""
        status, body = cp.api_get(path + query)
        assert status == 200, body
        ours = parity.metric("dgp_informer_objects", resource=resource)
        counts[resource] = (ours, len(body["items"]))
    assert all(ours == theirs for ours, theirs in counts.values()), counts
    return counts


def _denial_counts(parity, nodes: int) -> bool:
    ucx = example("gpu-cluster-ucx.yaml", namespace="default", name="apirestart-probe")
    try:
        parity.create(ucx, dry_run=True)
    except ApiException as exc:
        return f"none of the {nodes} GPU nodes" in str(exc.body)
    return False


def test_apiserver_restart_watches_resume_indices_right_no_duplicate_events(
    parity, cluster, make_namespace
):
    cp = cluster.control_plane
    core = client.CoreV1Api(cluster.api)
    first_ns, first = _drifted_cluster(cluster, make_namespace, "before")
    eventually(lambda: _reported(cluster.api, first) == 1, timeout=120)
    nodes = _gpu_nodes(cluster.api)
    assert parity.metric("dgp_gpu_nodes") == nodes
    eventually(lambda: _indices_match_the_api_server(parity, cp), timeout=120)
    eventually(lambda: parity.metric("dgp_events_pending") == 0, timeout=60)
    before = _our_events(cluster.api)
    logged_before = len(parity.log_path.read_text())

    down = cp.restart_apiserver(down_seconds=2)
    restarted = time.monotonic()
    core.create_node(node_manifest(NEW_POOL, 0))
    try:
        eventually(lambda: parity.metric("dgp_gpu_nodes") == nodes + 1, timeout=120)
        seen = time.monotonic() - restarted
        assert eventually(lambda: _denial_counts(parity, nodes + 1), timeout=60)
        second_ns, second = _drifted_cluster(cluster, make_namespace, "after")
        eventually(lambda: _reported(cluster.api, second) == 1, timeout=180)
        counts = eventually(lambda: _indices_match_the_api_server(parity, cp), timeout=180)
        eventually(lambda: parity.metric("dgp_events_pending") == 0, timeout=60)
        after = _our_events(cluster.api)
    finally:
        core.delete_collection_node(label_selector=f"{POOL_LABEL}={NEW_POOL.name}")
    print(
        f"\nkube-apiserver down and back in {down:.1f} s; the new GPU node in the inventory "
        f"{seen:.1f} s after; informer objects (ours, API server's): {counts}; "
        f"our Events: {before.total()} before, {after.total()} after"
    )
    parity.check_alive()
    assert "Traceback" not in parity.log_path.read_text()[logged_before:]
    assert _posted_again(before, after) == []
    assert after[(first, "rapids-tcp", "ParityDrift")] == 1
    assert after[(second, "rapids-tcp", "ParityDrift")] == 1
    assert first_ns != second_ns


def test_changes_while_the_watches_are_down_are_listed_again(parity, cluster):
    cp = cluster.control_plane
    core = client.CoreV1Api(cluster.api)
    nodes = _gpu_nodes(cluster.api)
    core.create_node(node_manifest(GONE, 0))
    try:
        eventually(lambda: parity.metric("dgp_gpu_nodes", driver=GONE.driver) == 1, timeout=120)
        eventually(lambda: parity.metric("dgp_events_pending") == 0, timeout=60)
        before = _our_events(cluster.api)
        with frozen(parity):
            down = cp.restart_apiserver()
            core.delete_node(GONE.node_name(0))
            core.create_node(node_manifest(ADDED, 0))
        continued = time.monotonic()

        def relisted() -> bool:
            return (
                parity.metric("dgp_gpu_nodes", driver=GONE.driver),
                parity.metric("dgp_gpu_nodes", driver=ADDED.driver),
                parity.metric("dgp_gpu_nodes"),
            ) == (0, 1, nodes + 1)

        eventually(relisted, timeout=120)
        caught_up = time.monotonic() - continued
        eventually(lambda: _indices_match_the_api_server(parity, cp), timeout=180)
        assert eventually(lambda: _denial_counts(parity, nodes + 1), timeout=60)
        eventually(lambda: parity.metric("dgp_events_pending") == 0, timeout=60)
        after = _our_events(cluster.api)
    finally:
        for pool in (GONE, ADDED):
            core.delete_collection_node(label_selector=f"{POOL_LABEL}={pool.name}")
    print(
        f"\nkube-apiserver down and back in {down:.1f} s with the operator frozen; its index "
        f"had the node deleted and the node added meanwhile {caught_up:.1f} s after it went on"
    )
    parity.check_alive()
    assert _posted_again(before, after) == []
