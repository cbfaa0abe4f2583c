"""Node pool definitions (pure data; no cluster needed)."""

from __future__ import annotations

from collections import Counter

import pytest
import yaml

from provingground import POOL_LABEL, POOLS, dra, inventory_yaml, node_manifests, pools
from provingground.dra import (
    device_classes,
    driver_class,
    normalise_version,
    resource_slice,
    resource_slices,
)
from provingground.pools import FLEETS, GPU_TAINT

NEW_AND_LEGACY = [
    "nvidia.com/cuda.driver-version.full",
    "nvidia.com/cuda.driver-version.major",
    "nvidia.com/cuda.driver-version.minor",
    "nvidia.com/cuda.driver-version.revision",
    "nvidia.com/cuda.runtime-version.full",
    "nvidia.com/cuda.runtime-version.major",
    "nvidia.com/cuda.runtime-version.minor",
    "nvidia.com/cuda.driver.major",
    "nvidia.com/cuda.driver.minor",
    "nvidia.com/cuda.driver.rev",
    "nvidia.com/cuda.runtime.major",
    "nvidia.com/cuda.runtime.minor",
    "nvidia.com/gpu.product",
    "nvidia.com/gpu.family",
    "nvidia.com/gpu.compute.major",
    "nvidia.com/gpu.compute.minor",
    "nvidia.com/gpu.memory",
    "nvidia.com/gpu.count",
    "nvidia.com/gpu.present",
]


@pytest.mark.parametrize(
    ("pool", "product", "driver", "cuda"),
    [
        ("a100", "NVIDIA-A100-SXM4-80GB", "580.95.05", "13.0"),
        ("t4", "Tesla-T4", "580.95.05", "13.0"),
        ("h100", "NVIDIA-H100-80GB-HBM3", "570.172.08", "12.8"),
        ("a100-mig", "NVIDIA-A100-SXM4-80GB", "580.95.05", "13.0"),
    ],
)
def test_gpu_pools_carry_gfd_labels_capacity_and_taint(
    pool: str, product: str, driver: str, cuda: str
) -> None:
    (node, *_) = node_manifests({n: int(n == pool) for n in POOLS})
    labels = node["metadata"]["labels"]
    assert set(NEW_AND_LEGACY) <= set(labels)
    assert labels[POOL_LABEL] == pool
    assert labels["nvidia.com/gpu.product"] == product
    assert labels["nvidia.com/cuda.driver-version.full"] == driver
    assert labels["nvidia.com/cuda.runtime-version.full"] == cuda
    major, minor, rev = driver.split(".")
    assert (labels["nvidia.com/cuda.driver.major"], labels["nvidia.com/cuda.driver.rev"]) == (
        major,
        rev,
    )
    assert labels["nvidia.com/cuda.driver-version.minor"] == minor
    assert node["spec"]["taints"] == [GPU_TAINT]
    assert node["status"]["allocatable"]["nvidia.com/gpu"] == labels["nvidia.com/gpu.count"]
    assert node["metadata"]["annotations"]["kwok.x-k8s.io/node"] == "fake"


def test_mig_node_exposes_mixed_strategy_resources() -> None:
    (node,) = node_manifests({n: int(n == "a100-mig") for n in POOLS})
    labels, alloc = node["metadata"]["labels"], node["status"]["allocatable"]
    assert labels["nvidia.com/mig.strategy"] == "mixed"
    assert labels["nvidia.com/mig.capable"] == "true"
    assert alloc["nvidia.com/mig-1g.10gb"] == labels["nvidia.com/mig-1g.10gb.count"] == "14"
    assert labels["nvidia.com/mig-3g.40gb.product"] == "NVIDIA-A100-SXM4-80GB-MIG-3g.40gb"


def test_cpu_pool_has_no_gpu_labels_or_taint() -> None:
    (node,) = node_manifests({n: int(n == "cpu") for n in POOLS})
    assert not [k for k in node["metadata"]["labels"] if k.startswith("nvidia.com/")]
    assert "nvidia.com/gpu" not in node["status"]["capacity"]
    assert node["spec"] == {}


def test_sizes_are_parameters_and_scale_to_thousands() -> None:
    names = [n["metadata"]["name"] for n in node_manifests({"a100": 5000, "cpu": 0})]
    assert len(names) == 5000 + sum(p.size for p in pools() if p.name not in {"a100", "cpu"})
    assert len(set(names)) == len(names)
    with pytest.raises(ValueError, match="Unknown node pool"):
        pools({"v100": 1})


def test_inventory_is_a_node_list() -> None:
    doc = yaml.safe_load(inventory_yaml())
    assert doc["kind"] == "List"
    assert {n["kind"] for n in doc["items"]} == {"Node"}
    assert len(doc["items"]) == sum(p.size for p in pools())


# -- DRA pools ---------------------------------------------------------------------------------


def test_dra_node_has_no_gpu_capacity_no_gfd_labels_and_the_dra_deploy_label() -> None:
    (node,) = node_manifests({n: int(n == "a100-dra") for n in POOLS})
    labels = node["metadata"]["labels"]
    assert "nvidia.com/gpu" not in node["status"]["capacity"]
    assert not [k for k in labels if k.startswith(("nvidia.com/cuda", "nvidia.com/gpu.product"))]
    assert labels["nvidia.com/gpu.deploy.dra-driver"] == "true"
    assert node["spec"]["taints"] == [GPU_TAINT]  # the cloud's GPU pool taint stays


def test_migrating_pool_has_switched_and_unswitched_nodes() -> None:
    nodes = list(node_manifests(FLEETS["migrating"]))
    migrating = [n for n in nodes if n["metadata"]["labels"][POOL_LABEL] == "a100-migrating"]
    on_dra = [
        n["metadata"]["name"] for n in migrating if "nvidia.com/gpu" not in n["status"]["capacity"]
    ]
    assert on_dra == ["a100-migrating-0000", "a100-migrating-0001"]
    assert len(migrating) == 4
    assert [s["spec"]["nodeName"] for s in resource_slices(FLEETS["migrating"])] == on_dra


def test_fleet_kinds() -> None:
    def kinds(fleet: str) -> set[str]:
        out = set()
        for pool in pools(FLEETS[fleet]):
            for i in range(pool.size):
                out.add("cpu" if not pool.has_gpu else "dra" if pool.is_dra(i) else "plugin")
        return out

    assert kinds("device-plugin") == {"cpu", "plugin"}
    assert kinds("pure-dra") == {"cpu", "dra"}
    assert kinds("mixed") == kinds("migrating") == {"cpu", "dra", "plugin"}
    assert pools() == pools(FLEETS["device-plugin"])  # the default fleet did not change


# Expected values: the device entry in the driver's site/content/docs/reference/
# resourceslice-attributes.md (kubernetes-sigs/dra-driver-nvidia-gpu), with this pool's GPU.
def test_slice_is_what_the_kubelet_plugin_publishes() -> None:
    (s, _) = resource_slices({n: 2 * (n == "a100-dra") for n in POOLS})
    assert s["apiVersion"] == "resource.k8s.io/v1"
    spec = s["spec"]
    assert spec["driver"] == "gpu.nvidia.com"
    assert spec["nodeName"] == spec["pool"]["name"] == "a100-dra-0000"
    assert [d["name"] for d in spec["devices"]] == [f"gpu-{i}" for i in range(8)]
    device = spec["devices"][0]
    assert device["attributes"] | {"uuid": None} == {
        "architecture": {"string": "Ampere"},
        "brand": {"string": "Nvidia"},
        "cudaComputeCapability": {"version": "8.0.0"},
        "cudaDriverVersion": {"version": "13.0.0"},
        "driverVersion": {"version": "580.95.5"},
        "productName": {"string": "NVIDIA A100-SXM4-80GB"},
        "type": {"string": "gpu"},
        "uuid": None,
    }
    assert device["attributes"]["uuid"]["string"].startswith("GPU-")
    assert len({d["attributes"]["uuid"]["string"] for d in spec["devices"]}) == 8
    assert device["capacity"] == {"memory": {"value": "81920Mi"}}


@pytest.mark.parametrize(
    ("version", "expected"),
    [("580.95.05", "580.95.5"), ("550.144.03", "550.144.3"), ("13.0", "13.0.0"), ("8.0", "8.0.0")],
)
def test_versions_are_normalised_as_the_driver_does(version: str, expected: str) -> None:
    assert normalise_version(version) == expected


# Expected: deployments/helm/dra-driver-nvidia-gpu/templates/deviceclass-{gpu,mig}.yaml rendered
# for resource.k8s.io/v1 (kubernetes-sigs/dra-driver-nvidia-gpu).
def test_device_classes_are_the_helm_charts() -> None:
    gpu, mig = device_classes()
    assert gpu == {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": "gpu.nvidia.com"},
        "spec": {
            "selectors": [{"cel": {"expression": "device.driver == 'gpu.nvidia.com' && "
                                   "device.attributes['gpu.nvidia.com'].type == 'gpu'"}}],
            "extendedResourceName": "nvidia.com/gpu",
        },
    }  # fmt: skip
    assert mig["metadata"]["name"] == "mig.nvidia.com"
    assert "extendedResourceName" not in mig["spec"]
    assert "type == 'mig'" in mig["spec"]["selectors"][0]["cel"]["expression"]


def test_driver_class_selects_one_driver_version_by_semver() -> None:
    cls = driver_class("570.172.08")
    assert cls["metadata"]["name"] == "gpu-570-172-8.nvidia.com"
    expression = cls["spec"]["selectors"][0]["cel"]["expression"]
    assert expression.endswith(".driverVersion.compareTo(semver('570.172.8')) == 0")
    assert "type == 'gpu'" in expression


def test_device_plugin_node_has_no_slice() -> None:
    pool = POOLS["a100-migrating"]
    with pytest.raises(ValueError, match="runs the device plugin"):
        resource_slice(pool, pool.size - 1)


# Expected: the MIG device of the driver's attribute reference, with cmd/gpu-kubelet-plugin/mig.go's
# canonical name; A100 80GB profile IDs as `nvidia-smi mig -lgip` lists them.
def test_mig_node_slice_has_whole_gpus_then_mig_devices_per_profile() -> None:
    (s,) = resource_slices({n: int(n == "a100-mig-dra") for n in POOLS})
    devices = {d["name"]: d for d in s["spec"]["devices"]}
    kinds = Counter(d["attributes"]["type"]["string"] for d in devices.values())
    assert kinds == {"gpu": 2, "mig": 14 + 6 + 4}
    first = devices["gpu-2-mig-1g10gb-19-0"]["attributes"]
    assert first["profile"] == {"string": "1g.10gb"}
    parents = {
        n.split("-mig-")[0]: d["attributes"]["parentUUID"]["string"]
        for n, d in devices.items()
        if "-mig-" in n
    }
    assert sorted(parents) == ["gpu-2", "gpu-3", "gpu-4", "gpu-5", "gpu-6", "gpu-7"]
    whole = {devices[f"gpu-{m}"]["attributes"]["uuid"]["string"] for m in (0, 1)}
    assert len(set(parents.values()) | whole) == 8  # one UUID per physical GPU
    assert first["uuid"]["string"].startswith("MIG-")
    assert first["driverVersion"] == {"version": "580.95.5"}
    assert {n for n in devices if "-mig-3g40gb-" in n} == {
        f"gpu-{parent}-mig-3g40gb-9-{start}" for parent in (6, 7) for start in (0, 4)
    }
    assert devices["gpu-4-mig-2g20gb-14-2"]["capacity"] == {
        "memory": {"value": "19968Mi"},
        "multiprocessors": {"value": "28"},
    }


def test_dra_inventory_lists_nodes_then_their_slices() -> None:
    doc = yaml.safe_load(dra.inventory_yaml(FLEETS["migrating"]))
    kinds = [item["kind"] for item in doc["items"]]
    assert kinds == ["Node"] * 8 + ["ResourceSlice"] * 2
    nodes = {item["metadata"]["name"] for item in doc["items"] if item["kind"] == "Node"}
    assert {item["spec"]["nodeName"] for item in doc["items"][8:]} <= nodes
