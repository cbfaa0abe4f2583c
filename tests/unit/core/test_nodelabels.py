"""What the nodes of a pool have alike is held once, and each node still reads as its own.

Node objects: ``tests/unit/gpunodes.py`` (GFD's labels) and a GKE GPU node's labels as GKE
sets them (https://cloud.google.com/kubernetes-engine/docs/how-to/gpus:
``cloud.google.com/gke-nodepool``, ``cloud.google.com/gke-accelerator``;
``kubernetes.io/hostname`` the node's name).
"""

from __future__ import annotations

import copy
import gc
import pickle
from typing import Any

from dask_gpu_parity.admission.decide.nodeindex import NodeIndex
from dask_gpu_parity.core.inventory import GpuNode
from dask_gpu_parity.core.nodelabels import HeldNode, NodeLabels, shared_labels, shared_taints
from tests.unit.gpunodes import node


def gke(name: str, driver: str = "580.95.05") -> dict[str, str]:
    return {
        "cloud.google.com/gke-accelerator": "nvidia-h100-80gb",
        "cloud.google.com/gke-nodepool": "gpu-pool",
        "kubernetes.io/hostname": name,
        "nvidia.com/cuda.driver-version.full": driver,
        "topology.kubernetes.io/zone": "us-central1-a",
        "example.com/instance": name,  # any label whose value is the name is the node's own
    }


def test_the_labels_read_as_given_in_their_order() -> None:
    given = gke("gke-gpu-1")
    labels = shared_labels(given, "gke-gpu-1")
    assert list(labels) == list(given)
    assert dict(labels) == given
    assert labels == given
    assert given == labels
    assert len(labels) == len(given)
    assert labels["kubernetes.io/hostname"] == "gke-gpu-1"
    assert labels.get("example.com/instance") == "gke-gpu-1"
    assert labels.get("missing", "default") == "default"
    assert "cloud.google.com/gke-nodepool" in labels
    assert "missing" not in labels
    assert labels != {**given, "kubernetes.io/hostname": "gke-gpu-2"}
    assert labels != {k: v for k, v in given.items() if k != "topology.kubernetes.io/zone"}


def test_nodes_of_a_pool_share_one_mapping_and_keep_their_own_values() -> None:
    one, two = (
        shared_labels(gke("gke-gpu-1"), "gke-gpu-1"),
        shared_labels(gke("gke-gpu-2"), "gke-gpu-2"),
    )
    assert one._pool is two._pool
    assert one["kubernetes.io/hostname"] == "gke-gpu-1"
    assert two["kubernetes.io/hostname"] == "gke-gpu-2"
    assert two["example.com/instance"] == "gke-gpu-2"
    assert one != two
    assert shared_labels(gke("gke-gpu-1"), "gke-gpu-1") == one


def test_a_driver_upgrade_on_one_node_leaves_its_pool_alone() -> None:
    kept = shared_labels(gke("gke-gpu-1"), "gke-gpu-1")
    upgraded = shared_labels(gke("gke-gpu-2", driver="590.48.01"), "gke-gpu-2")
    assert upgraded._pool is not kept._pool
    assert kept["nvidia.com/cuda.driver-version.full"] == "580.95.05"
    assert upgraded["nvidia.com/cuda.driver-version.full"] == "590.48.01"


def test_a_pool_no_node_refers_to_is_let_go() -> None:
    labels = shared_labels(gke("gke-gpu-9", driver="1.2.3"), "gke-gpu-9")
    pool = labels._pool
    import weakref

    ref = weakref.ref(pool)
    del labels, pool
    gc.collect()
    assert ref() is None


def test_copies_and_pickles_are_plain_dicts() -> None:
    labels = shared_labels(gke("gke-gpu-1"), "gke-gpu-1")
    for copied in (copy.copy(labels), copy.deepcopy(labels), pickle.loads(pickle.dumps(labels))):
        assert type(copied) is dict
        assert copied == gke("gke-gpu-1")


def test_the_node_index_holds_a_pools_labels_taints_and_allocatable_once() -> None:
    index = NodeIndex()
    for i in range(50):
        found = GpuNode.from_node(node(f"gpu-{i}"))
        assert found is not None
        index.upsert(found, f"gpu-{i}")
    inventory = index.snapshot()
    assert inventory is not None
    held = list(inventory.nodes)
    assert len(held) == 50
    labels = [n.labels for n in held]
    assert all(isinstance(x, NodeLabels) for x in labels)
    assert len({id(x._pool) for x in labels}) == 1  # type: ignore[attr-defined]
    assert len({id(n.taints) for n in held}) == 1
    assert len({id(n.allocatable) for n in held}) == 1
    for n in held:  # each still reads as from its own Node object
        assert n == GpuNode.from_node(node(n.name))


def test_a_changed_node_changes_alone_in_the_index() -> None:
    index = NodeIndex()
    for i in range(3):
        index.upsert(GpuNode.from_node(node(f"gpu-{i}")), f"gpu-{i}")
    change = index.upsert(GpuNode.from_node(node("gpu-1", "570.172.08", "12.8")), "gpu-1")
    assert change.changed
    assert str(change.before) != str(change.after)
    inventory = index.snapshot()
    assert inventory is not None
    by_name = {n.name: n for n in inventory.nodes}
    assert by_name["gpu-0"].labels["nvidia.com/cuda.driver-version.full"] == "580.95.05"
    assert by_name["gpu-1"].labels["nvidia.com/cuda.driver-version.full"] == "570.172.08"
    assert by_name["gpu-2"] == GpuNode.from_node(node("gpu-2"))


def nodes_as_found() -> list[dict[str, Any]]:
    """Node objects as an API server sends them: heartbeats, odd taints, several conditions."""
    ready = {"type": "Ready", "status": "True", "lastHeartbeatTime": "2026-12-03T10:00:00Z"}
    plain = node("gpu-a")
    tainted = node("gpu-b", taint=False)
    tainted["spec"]["taints"] = [
        {"key": "nvidia.com/gpu", "effect": "NoSchedule"},  # no value
        {
            "key": "node.kubernetes.io/unschedulable",
            "effect": "NoSchedule",
            "timeAdded": "2026-12-03T10:00:00Z",
        },
        "not a taint",
    ]
    cordoned = node("gpu-c", cordoned=True)
    cordoned["status"]["conditions"] = [
        {"type": "MemoryPressure", "status": "False"},
        ready,
        {"type": "Ready", "status": "False"},  # the last one counts
    ]
    stringly = node("gpu-d")
    stringly["spec"]["unschedulable"] = "true"  # not a boolean: not cordoned
    stringly["status"]["conditions"] = [ready]
    stringly["metadata"]["labels"]["numeric"] = 7
    return [plain, tainted, cordoned, stringly]


def test_a_held_node_reads_as_the_node_it_came_from() -> None:
    for obj in nodes_as_found():
        assert GpuNode.from_node(HeldNode.of(obj).node()) == GpuNode.from_node(obj), obj


def test_a_heartbeat_changes_nothing_held() -> None:
    obj = nodes_as_found()[2]
    later = copy.deepcopy(obj)
    later["metadata"]["resourceVersion"] = "99"
    later["status"]["conditions"][1]["lastHeartbeatTime"] = "2026-12-03T10:01:00Z"
    assert HeldNode.of(later) == HeldNode.of(obj)
    later["spec"]["unschedulable"] = False
    assert HeldNode.of(later) != HeldNode.of(obj)


def test_held_nodes_of_a_pool_share_what_they_have_alike() -> None:
    one, two = HeldNode.of(node("gpu-1")), HeldNode.of(node("gpu-2"))
    assert one.labels._pool is two.labels._pool  # type: ignore[attr-defined]
    assert one.taints is two.taints
    assert one.allocatable is two.allocatable
    assert one.name == "gpu-1"
    assert two.labels["kubernetes.io/hostname"] == "gpu-2"
    assert shared_taints((("a", "b", "NoSchedule"),)) is shared_taints((("a", "b", "NoSchedule"),))
