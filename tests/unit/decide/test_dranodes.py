"""Nodes, ResourceSlices and DeviceClasses fed one watch event at a time into the node index.

Fleets: ``tests/fixtures/dra/`` (sources in its SOURCES.md: NVIDIA's DRA driver's slices and
DeviceClasses); verdicts from its EXPECTED.md §3 (written before the core), which a watch must
reach whatever order the events come in.
"""

from __future__ import annotations

import copy
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
import yaml

from dask_gpu_parity.admission.decide.dranodes import DraNodes
from dask_gpu_parity.admission.decide.nodeindex import NodeIndex
from dask_gpu_parity.core.inventory import DriverClass, Inventory

DRA = Path(__file__).parents[2] / "fixtures" / "dra"
A580 = DriverClass("580.95.5", "13.0")
H570 = DriverClass("570.172.8", "12.8")
IMPLICIT = "deviceclass.resource.kubernetes.io/"


def _items(name: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for doc in yaml.safe_load_all((DRA / name).read_text()):
        found += doc["items"] if doc and doc.get("kind") == "List" else [doc] if doc else []
    return found


def _key(obj: dict[str, Any]) -> str:
    return str(obj["metadata"]["name"])


def _feed(dra: DraNodes, objects: list[dict[str, Any]], *, release: bool = True) -> None:
    for obj in objects:
        if obj["kind"] == "Node":
            dra.node_upserted(obj, _key(obj))
        elif obj["kind"] == "ResourceSlice":
            dra.slice_upserted(obj, _key(obj))
        elif obj["kind"] == "DeviceClass":
            dra.class_upserted(obj, _key(obj))
    if release:  # Nodes, slices and classes listed in full
        dra.release()


def _snapshot(dra: DraNodes) -> Inventory:
    found = dra.index.snapshot()
    assert found is not None
    return found


def _view(inventory: Inventory) -> dict[str, tuple[DriverClass | None, dict[str, Decimal]]]:
    return {n.name: (n.driver_class, dict(n.allocatable)) for n in inventory.nodes}


@pytest.mark.parametrize("order", ["nodes first", "slices first", "classes last"])
def test_pure_dra_fleet_is_in_the_inventory_whatever_the_event_order(order: str) -> None:
    objects = _items("pure-dra.yaml") + _items("deviceclasses.yaml")
    rank = {
        "nodes first": {"Node": 0, "ResourceSlice": 1, "DeviceClass": 2},
        "slices first": {"ResourceSlice": 0, "DeviceClass": 1, "Node": 2},
        "classes last": {"Node": 1, "ResourceSlice": 0, "DeviceClass": 2},
    }[order]
    dra = DraNodes(NodeIndex())
    _feed(dra, sorted(objects, key=lambda o: rank[o["kind"]]))
    inventory = _snapshot(dra)
    nodes = _view(inventory)
    assert sorted(nodes) == ["dra-a100-0", "dra-gh200-0", "dra-h100-0"]  # never cpu-0
    assert nodes["dra-a100-0"][0] == A580
    assert nodes["dra-gh200-0"][0] == A580
    assert nodes["dra-h100-0"][0] == H570
    assert nodes["dra-a100-0"][1]["nvidia.com/gpu"] == 4
    assert nodes["dra-a100-0"][1][IMPLICIT + "gpu.nvidia.com"] == 4
    assert nodes["dra-h100-0"][1]["nvidia.com/gpu"] == 8
    assert nodes["dra-gh200-0"][1][IMPLICIT + "mig.nvidia.com"] == 14
    assert nodes["dra-gh200-0"][1]["nvidia.com/mig-1g.12gb"] == 14  # the cluster's class
    assert "nvidia.com/gpu" not in nodes["dra-gh200-0"][1]
    assert "mig-1g-12gb.gpu.nvidia.com" in inventory.device_classes.by_name


@pytest.mark.parametrize("fleet", ["pure-dra.yaml", "mixed.yaml", "migrating.yaml"])
def test_watched_inventory_equals_the_offline_one(fleet: str) -> None:
    objects = _items(fleet) + _items("deviceclasses.yaml")
    dra = DraNodes(NodeIndex())
    _feed(dra, list(reversed(objects)))
    offline = Inventory.from_objects(objects)
    assert _view(_snapshot(dra)) == _view(offline)


def test_migrating_node_counts_only_the_newest_generation_of_its_pool() -> None:
    dra = DraNodes(NodeIndex())
    _feed(dra, _items("migrating.yaml"))
    nodes = _view(_snapshot(dra))
    assert nodes["a100-migrating-0"][0] == DriverClass("580.95.05", "13.0")
    assert nodes["a100-migrating-1"][0] is None  # labels say 570, devices 580: unknown
    for name in ("a100-migrating-0", "a100-migrating-1"):
        assert nodes[name][1]["nvidia.com/gpu"] == 8  # the device plugin's, not 16
        assert nodes[name][1][IMPLICIT + "gpu.nvidia.com"] == 8  # generation 1 not counted


def test_a_slice_event_changes_its_node_only_and_a_deleted_slice_takes_its_gpus() -> None:
    objects = _items("pure-dra.yaml")
    dra = DraNodes(NodeIndex())
    _feed(dra, objects)
    h100 = next(o for o in objects if o["kind"] == "ResourceSlice" and "h100" in _key(o))
    upgraded = copy.deepcopy(h100)
    for device in upgraded["spec"]["devices"]:
        device["attributes"]["driverVersion"] = {"version": "580.95.5"}
        device["attributes"]["cudaDriverVersion"] = {"version": "13.0.0"}
    changes = dra.slice_upserted(upgraded, _key(h100))
    assert [(c.name, c.before, c.after) for c in changes] == [("dra-h100-0", H570, A580)]
    assert dra.slice_upserted(upgraded, _key(h100)) == []  # the same slice again: no work
    gone = dra.slice_deleted(_key(h100))
    assert [(c.name, c.after) for c in gone] == [("dra-h100-0", None)]
    assert "dra-h100-0" not in _view(_snapshot(dra))


def test_node_heartbeat_costs_nothing_and_a_deleted_node_leaves_the_inventory() -> None:
    objects = _items("pure-dra.yaml")
    dra = DraNodes(NodeIndex())
    _feed(dra, objects)
    node = next(o for o in objects if _key(o) == "dra-a100-0")
    beat = copy.deepcopy(node)
    beat["metadata"]["resourceVersion"] = "999"
    beat.setdefault("status", {})["conditions"] = [
        {"type": "MemoryPressure", "status": "False", "lastHeartbeatTime": "2026-12-02T09:00:00Z"},
        *node.get("status", {}).get("conditions", []),
    ]
    assert dra.node_upserted(beat, "dra-a100-0") == []
    assert [c.name for c in dra.node_deleted("dra-a100-0")] == ["dra-a100-0"]
    assert "dra-a100-0" not in _view(_snapshot(dra))


def test_nodes_are_read_once_everything_is_listed_and_a_deleted_class_is_forgotten() -> None:
    pinned = _items("deviceclass-pinned-580.yaml")
    dra = DraNodes(NodeIndex())
    _feed(dra, _items("pure-dra.yaml") + pinned, release=False)
    assert dra.index.snapshot() is None  # held: nothing read from half the lists
    changes = dra.release()
    assert sorted(c.name for c in changes if c.changed) == [
        "dra-a100-0",
        "dra-gh200-0",
        "dra-h100-0",
    ]
    name = IMPLICIT + "gpu-580-95-5.nvidia.com"
    assert _view(_snapshot(dra))["dra-a100-0"][1][name] == 4
    assert name not in _view(_snapshot(dra))["dra-h100-0"][1]  # 570: not of the class
    assert name in dra.index.classes.gpu_names
    assert dra.release() == []  # once
    dra.class_deleted(_key(pinned[0]))
    assert name not in _view(_snapshot(dra))["dra-a100-0"][1]
    assert name not in dra.index.classes.gpu_names


def test_a_fleets_devices_share_their_records_without_the_gpus_own_identity() -> None:
    objects = _items("pure-dra.yaml") + _items("deviceclasses.yaml")
    dra = DraNodes(NodeIndex())
    _feed(dra, objects)
    a100 = dra.devices("dra-a100-0")
    assert len(a100) == 4
    assert all("uuid" not in d.attributes for d in a100)
    assert a100[0].attributes["driverVersion"] == "580.95.5"
    again = DraNodes(NodeIndex())
    _feed(again, copy.deepcopy(objects))
    assert [id(d) for d in again.devices("dra-a100-0")] == [id(d) for d in a100]
