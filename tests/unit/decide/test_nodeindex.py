"""The node index: fed one node event at a time, it hands out the inventory a rebuild would."""

from __future__ import annotations

from typing import Any

from dask_gpu_parity.admission.decide.nodeindex import NodeIndex
from dask_gpu_parity.core.inventory import DriverClass, GpuNode
from tests.unit.gpunodes import CLASSES, node
from tests.unit.inventorywalk import Walk, same_answers

# -- incremental changes -----------------------------------------------------------------------


def test_changes_one_node_at_a_time() -> None:
    index = NodeIndex()
    a0, a1 = node("a0"), node("a1")
    first = index.upsert(GpuNode.from_node(a0), "a0")
    assert (first.before, first.after, first.changed, first.shapes_changed) == (
        None,
        DriverClass("580.95.05", "13.0"),
        True,
        True,
    )
    second = index.upsert(GpuNode.from_node(a1), "a1")
    assert second.changed
    assert not second.shapes_changed
    snapshot = index.snapshot()
    assert snapshot is index.snapshot()  # the same object until a change
    heartbeat = index.upsert(GpuNode.from_node(node("a1")), "a1")
    assert not heartbeat.changed
    assert index.snapshot() is snapshot

    upgraded = index.upsert(GpuNode.from_node(node("a1", "570.172.08", "12.8")), "a1")
    assert upgraded.before == DriverClass("580.95.05", "13.0")
    assert upgraded.after == DriverClass("570.172.08", "12.8")
    assert upgraded.shapes_changed
    assert index.driver_class("a1") == DriverClass("570.172.08", "12.8")
    assert index.class_counts() == {
        DriverClass("580.95.05", "13.0"): 1,
        DriverClass("570.172.08", "12.8"): 1,
    }
    assert index.snapshot() is not snapshot

    gone = index.upsert(None, "a0")  # no longer a GPU node
    assert (gone.before, gone.after, gone.shapes_changed) == (
        DriverClass("580.95.05", "13.0"),
        None,
        True,
    )
    assert index.driver_class("a0") is None
    assert len(index) == 1
    index.delete("a1")
    assert index.snapshot() is None
    assert index.class_counts() == {}


def test_incremental_index_equals_a_rebuild() -> None:
    index = NodeIndex()
    current: dict[str, dict[str, Any]] = {}
    for step in range(300):
        name = f"n{step * 7 % 40}"
        if step % 5 == 4:
            index.delete(name)
            current.pop(name, None)
            continue
        manifest = node(name, *CLASSES[step % 3], cordoned=step % 11 == 0, gpus=str(step % 3 + 1))
        index.upsert(GpuNode.from_node(manifest), name)
        current[name] = manifest
    snapshot = index.snapshot()
    assert snapshot is not None
    pod = {"containers": [{"name": "w", "resources": {"limits": {"nvidia.com/gpu": "2"}}}]}
    same_answers(Walk(current.values()), snapshot, pod)
