"""GPU nodes from ResourceSlices beside Nodes (tests/fixtures/dra/EXPECTED.md §3)."""

from __future__ import annotations

from decimal import Decimal
from typing import Any

import pytest

from dask_gpu_parity.core.inventory import DriverClass, Inventory
from dask_gpu_parity.core.slices import node_devices
from tests.unit.core.dra import IMPLICIT, catalogue, items

GPU, MIG = IMPLICIT + "gpu.nvidia.com", IMPLICIT + "mig.nvidia.com"


def allocatable(inventory: Inventory) -> dict[str, dict[str, Decimal]]:
    return {n.name: dict(n.allocatable) for n in inventory.nodes}


def classes(inventory: Inventory) -> dict[str, list[str]]:
    return {
        f"{dc.driver}/{dc.cuda}": sorted(n.name for n in nodes)
        for dc, nodes in inventory.classes().items()
    }


def test_a_pure_dra_fleet_has_gpu_nodes_though_no_allocatable_lists_a_gpu() -> None:
    objects = items("pure-dra.yaml")
    nodes = [o for o in objects if o["kind"] == "Node"]
    assert all("nvidia.com/gpu" not in n["status"]["allocatable"] for n in nodes)
    assert Inventory.from_nodes(nodes).size == 0  # allocatable alone: the blind spot
    inventory = Inventory.from_objects(objects)
    assert [n.name for n in inventory.nodes] == ["dra-a100-0", "dra-gh200-0", "dra-h100-0"]
    assert classes(inventory) == {
        "580.95.5/13.0": ["dra-a100-0", "dra-gh200-0"],
        "570.172.8/12.8": ["dra-h100-0"],
    }
    assert allocatable(inventory) == {
        "dra-a100-0": {"nvidia.com/gpu": 4, GPU: 4},
        "dra-gh200-0": {MIG: 14},
        "dra-h100-0": {"nvidia.com/gpu": 8, GPU: 8},
    }


def test_a_per_profile_class_counts_mig_devices_under_its_extended_resource_name() -> None:
    inventory = Inventory.from_objects(items("pure-dra.yaml"), catalogue("deviceclasses.yaml"))
    gh200 = allocatable(inventory)["dra-gh200-0"]
    assert gh200 == {
        MIG: 14,
        IMPLICIT + "mig-1g-12gb.gpu.nvidia.com": 14,
        "nvidia.com/mig-1g.12gb": 14,
    }


def test_device_classes_in_the_same_list_extend_the_catalogue() -> None:
    objects = items("pure-dra.yaml") + items("deviceclass-pinned-580.yaml")
    inventory = Inventory.from_objects(objects)
    assert allocatable(inventory)["dra-a100-0"][IMPLICIT + "gpu-580-95-5.nvidia.com"] == 4
    assert IMPLICIT + "gpu-580-95-5.nvidia.com" not in allocatable(inventory)["dra-h100-0"]


def test_on_a_mixed_fleet_gfd_and_dra_spellings_of_one_driver_are_one_class() -> None:
    inventory = Inventory.from_objects(items("mixed.yaml"))
    assert classes(inventory) == {
        "580.95.05/13.0": ["dra-a100-1", "gfd-a100-0"],  # GFD's spelling: a label pin needs it
        "570.172.8/12.8": ["dra-h100-0"],
    }
    assert allocatable(inventory)["gfd-a100-0"] == {"nvidia.com/gpu": 8}


def test_a_migrating_node_counts_its_gpus_once_and_only_the_newest_slice_generation() -> None:
    inventory = Inventory.from_objects(items("migrating.yaml"))
    assert allocatable(inventory) == {
        "a100-migrating-0": {"nvidia.com/gpu": 8, GPU: 8},
        "a100-migrating-1": {"nvidia.com/gpu": 8, GPU: 8},
    }
    agree, disagree = inventory.nodes
    assert agree.driver_class == DriverClass("580.95.05", "13.0")
    assert not agree.conflict
    assert disagree.conflict
    assert disagree.driver_class is None
    assert disagree.dra_class == DriverClass("580.95.5", "13.0")  # generation 2, not 1's 570


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (DriverClass("580.95.05", "13.0"), DriverClass("580.95.5", "13.0")),
        (DriverClass("580.95.05", "13.0"), DriverClass("580.95.5", "13.0.0")),
    ],
)
def test_driver_classes_are_equal_across_spellings(a: DriverClass, b: DriverClass) -> None:
    assert a == b
    assert hash(a) == hash(b)
    assert {a: 1}[b] == 1


def test_slices_of_no_single_node_or_of_nodes_not_given_are_noted_not_counted() -> None:
    network = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": "fabric"},
        "spec": {"driver": "gpu.nvidia.com", "allNodes": True, "pool": {"name": "fabric"}},
    }
    objects = [o for o in items("pure-dra.yaml") if o["metadata"]["name"] != "dra-h100-0"]
    inventory = Inventory.from_objects([*objects, network])
    assert "dra-h100-0" not in {n.name for n in inventory.nodes}
    assert inventory.notes == (
        "ResourceSlice fabric belongs to no single node: its devices are left out",
        "ResourceSlice devices of node dra-h100-0 are left out: no Node dra-h100-0 was given",
    )


def test_a_slice_without_node_name_belongs_to_the_node_its_pool_names() -> None:
    [raw] = [o for o in items("pure-dra.yaml") if o["metadata"]["name"].startswith("dra-a100-0-")]
    del raw["spec"]["nodeName"]
    devices, notes = node_devices([raw])
    assert list(devices) == ["dra-a100-0"]
    assert len(devices["dra-a100-0"]) == 4
    assert notes == []


def test_v1beta1_slices_wrap_attributes_in_basic() -> None:
    raw: dict[str, Any] = {
        "apiVersion": "resource.k8s.io/v1beta1",
        "kind": "ResourceSlice",
        "metadata": {"name": "s"},
        "spec": {
            "driver": "gpu.nvidia.com",
            "nodeName": "n",
            "pool": {"name": "n", "generation": 1, "resourceSliceCount": 1},
            "devices": [
                {
                    "name": "gpu-0",
                    "basic": {
                        "attributes": {
                            "type": {"string": "gpu"},
                            "driverVersion": {"version": "580.95.5"},
                            "cudaDriverVersion": {"version": "13.0.0"},
                        }
                    },
                }
            ],
        },
    }
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}}
    inventory = Inventory.from_objects([node, raw])
    assert inventory.nodes[0].driver_class == DriverClass("580.95.05", "13.0")
    assert dict(inventory.nodes[0].allocatable) == {"nvidia.com/gpu": 1, GPU: 1}


def test_gfd_and_dra_spellings_of_product_and_compute_capability_agree() -> None:
    [node, _] = Inventory.from_objects(items("migrating.yaml")).nodes
    assert node.labels["nvidia.com/gpu.product"] == "NVIDIA-A100-SXM4-80GB"
    assert node.dra_product == "NVIDIA A100-SXM4-80GB"
    assert node.dra_compute == "8.0.0"
    assert node.disagreements == ()


def test_a_product_or_compute_capability_that_differs_is_a_disagreement() -> None:
    objects = items("migrating.yaml")
    labels = objects[0]["metadata"]["labels"]
    labels["nvidia.com/gpu.product"] = "NVIDIA-H100-80GB-HBM3"
    labels["nvidia.com/gpu.compute.major"] = "9"
    [node, _] = Inventory.from_objects(objects).nodes
    assert node.disagreements == (
        "product: labels NVIDIA-H100-80GB-HBM3, devices NVIDIA A100-SXM4-80GB",
        "compute capability: labels 9.0, devices 8.0.0",
    )
    assert node.driver_class is not None  # the driver still agrees: its class is known
