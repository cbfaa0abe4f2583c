"""Node pool definitions (pure data; no cluster needed)."""

from __future__ import annotations

import pytest
import yaml

from provingground import POOL_LABEL, POOLS, inventory_yaml, node_manifests, pools
from provingground.pools import GPU_TAINT

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
