"""A driver upgrade in flight under a running GPU cluster, reported by the drift watch.

A pool of two H100 nodes with one GPU each, on driver 570 / CUDA 12.8, so the scheduler and
its one worker run on different nodes. The GPU Operator then upgrades the pool to 580 / CUDA
13.0 node by node, as it does: cordon, evict the GPU pods, new driver (GFD relabels the node),
uncordon. After the worker's node, the scheduler runs on 570 and its worker on 580: the drift
watch says so in an Event on the DaskCluster and in ``dgp_driver_mismatched_clusters``. After
the scheduler's node, both run on 580 again: a ``ParityDriverRestored`` Event, the metric back
to 0.
"""

from __future__ import annotations

import dataclasses
import json
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from provingground import POOL_LABEL, POOLS, create_nodes, placements, wait_nodes_ready
from provingground.parity import eventually, example, policy_for
from provingground.pools import _gfd_labels, node_manifest

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]
CLUSTER = "upgraded"
OLD = ("570.172.08", "12.8")
NEW = ("580.95.05", "13.0")
IMAGE = "nvcr.io/nvidia/rapidsai/base:25.12-cuda12.8-py3.12"


def _events(api: client.ApiClient, namespace: str, reason: str) -> list[client.CoreV1Event]:
    events = client.CoreV1Api(api).list_namespaced_event(namespace).items
    return [
        e
        for e in events
        if e.reason == reason
        and e.involved_object.kind == "DaskCluster"
        and e.involved_object.name == CLUSTER
    ]


def _running(api: client.ApiClient, namespace: str) -> dict[str, str]:
    """component -> node, once exactly one scheduler and one worker run."""
    rows = [r for r in placements(api, namespace, CLUSTER) if r.phase == "Running"]
    found = {r.component: r.node for r in rows}
    assert sorted(r.component for r in rows) == ["scheduler", "worker"], rows
    return found


def _upgrade_node(api: client.ApiClient, pool: Any, name: str, namespace: str) -> None:
    """What the GPU Operator's upgrade controller does to one node, and GFD after it."""
    core = client.CoreV1Api(api)
    core.patch_node(name, {"spec": {"unschedulable": True}})
    for pod in core.list_namespaced_pod(namespace, field_selector=f"spec.nodeName={name}").items:
        core.delete_namespaced_pod(pod.metadata.name, namespace, grace_period_seconds=0)
    upgraded = dataclasses.replace(pool, driver=NEW[0], cuda=NEW[1])
    core.patch_node(name, {"metadata": {"labels": _gfd_labels(upgraded)}})
    core.patch_node(name, {"spec": {"unschedulable": None}})


@pytest.fixture(scope="module")
def running(cluster, parity, dask_operator) -> Iterator[tuple[str, Any]]:
    """A GPU cluster running on a two-node 570 pool of its own; yields (namespace, pool)."""
    suffix = uuid.uuid4().hex[:5]
    pool = dataclasses.replace(
        POOLS["h100"], name=f"upgrade-{suffix}", size=2, gpus=1, driver=OLD[0], cuda=OLD[1]
    )
    namespace = f"e2e-upgrade-{suffix}"
    core = client.CoreV1Api(cluster.api)
    create_nodes(cluster.api, [node_manifest(pool, i) for i in range(pool.size)])
    policy = policy_for(namespace, scheduler={"nodeSelector": {POOL_LABEL: pool.name}})
    try:
        wait_nodes_ready(cluster.api, pool.size, f"{POOL_LABEL}={pool.name}", timeout=120)
        cluster.kubectl("create", "namespace", namespace)
        cluster.kubectl("apply", "-f", "-", input=json.dumps(policy))
        doc = example("gpu-cluster-tcp.yaml", namespace=namespace, name=CLUSTER)
        doc["spec"]["worker"]["replicas"] = 1
        # A CUDA 12 image: it runs on both drivers (a CUDA 13 one is denied on 570: DGP020).
        for side in ("scheduler", "worker"):
            doc["spec"][side]["spec"]["containers"][0]["image"] = IMAGE
        doc["spec"]["worker"]["spec"]["nodeSelector"] = {POOL_LABEL: pool.name}
        # Through our webhooks: the scheduler gets its GPU and the pool from the policy.
        eventually(lambda: parity.create(doc), timeout=60, retry_on=(ApiException,))
        eventually(lambda: _running(cluster.api, namespace), timeout=240)
        yield namespace, pool
    finally:
        cluster.release_namespace(namespace)
        cluster.kubectl("delete", "daskgpupolicy", policy["metadata"]["name"], check=False)
        core.delete_collection_node(label_selector=f"{POOL_LABEL}={pool.name}")


def test_upgrade_in_flight_is_reported_then_restored(cluster, parity, running):
    namespace, pool = running
    api = cluster.api
    before = _running(api, namespace)
    assert before["scheduler"] != before["worker"]  # one GPU per node
    assert not _events(api, namespace, "ParityDriverMismatch")
    assert parity.metric("dgp_driver_mismatched_clusters", namespace=namespace) == 0

    # The worker's node first: the worker comes back on it, on 580; the scheduler stays on 570.
    _upgrade_node(api, pool, before["worker"], namespace)
    moved = eventually(lambda: _running(api, namespace), timeout=180)
    back = time.monotonic()
    assert moved["worker"] == before["worker"]
    (event, *_) = eventually(lambda: _events(api, namespace, "ParityDriverMismatch"), timeout=60)
    print(f"\nParityDriverMismatch seen {time.monotonic() - back:.1f}s after the worker ran again")
    assert event.type == "Warning"
    scheduler_pod = next(
        r.pod for r in placements(api, namespace, CLUSTER) if r.component == "scheduler"
    )
    worker_pod = next(r.pod for r in placements(api, namespace, CLUSTER) if r.component == "worker")
    assert event.message.startswith(
        f"Scheduler pod {scheduler_pod} runs on node {before['scheduler']} with driver "
        f"{OLD[0]} / CUDA {OLD[1]}, but its workers run on driver {NEW[0]} / CUDA {NEW[1]} "
        f"(1 pod: {worker_pod} on {before['worker']}): the scheduler's GPU driver and CUDA no "
        "longer match its workers' (a driver upgrade in flight?)"
    ), event.message
    assert f"Restart the scheduler on driver {NEW[0]} / CUDA {NEW[1]}" in event.message
    assert eventually(
        lambda: parity.metric("dgp_driver_mismatched_clusters", namespace=namespace) == 1
    )

    # Then the scheduler's node: the scheduler comes back on it, on 580, beside its worker.
    _upgrade_node(api, pool, before["scheduler"], namespace)
    eventually(lambda: _running(api, namespace), timeout=180)
    (restored, *_) = eventually(lambda: _events(api, namespace, "ParityDriverRestored"), timeout=60)
    assert restored.type == "Normal"
    assert restored.message == (
        f"Scheduler and workers of DaskCluster {CLUSTER} run on driver {NEW[0]} / CUDA "
        f"{NEW[1]} again"
    )
    assert eventually(
        lambda: parity.metric("dgp_driver_mismatched_clusters", namespace=namespace) == 0
    )
    # Reported, never repaired: the policy in force does not allow repair.
    assert not _events(api, namespace, "ParityRepaired")
