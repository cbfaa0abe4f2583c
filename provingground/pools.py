"""Simulated GPU node pools: one source of truth for the demo, the e2e tests and benchmarks.

Each node carries the label set NVIDIA GPU Feature Discovery (GFD v0.17+) and the GPU Operator
put on real nodes (the label catalogue of NVIDIA/k8s-device-plugin ``internal/lm``; real
sets in ``tests/fixtures/inventories``), ``nvidia.com/gpu`` (or MIG)
capacity, the ``nvidia.com/gpu=present:NoSchedule`` taint of GPU pools, and
``dask-gpu-parity.test/pool: <pool>`` so tables can show which pool a Pod landed in.

A pool's ``dra`` share of nodes has NVIDIA's DRA driver instead of the device plugin (the GPU
Operator's DRA mode): no ``nvidia.com/gpu`` capacity, no GFD labels (it runs no GFD), the
operator's ``nvidia.com/gpu.present`` and ``nvidia.com/gpu.deploy.dra-driver`` labels; their GPUs
are published as ResourceSlices (``provingground.dra``). ``FLEETS`` names the pool sizes of the
three DRA fleet kinds beside the default (device plugin only) fleet.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

import yaml

__all__ = [
    "DEFAULT_SIZES",
    "FLEETS",
    "GPU_TAINT",
    "POOLS",
    "POOL_LABEL",
    "MigProfile",
    "Pool",
    "inventory_yaml",
    "node_manifest",
    "node_manifests",
    "pools",
]

POOL_LABEL = "dask-gpu-parity.test/pool"
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
KWOK_ANNOTATIONS = {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"}
GFD_TIMESTAMP = "1764400000"


@dataclass(frozen=True)
class MigProfile:
    """One MIG profile exposed under the ``mixed`` strategy as ``nvidia.com/mig-<name>``."""

    name: str  # e.g. "1g.10gb"
    count: int  # devices of this profile on the node
    memory_mib: int
    multiprocessors: int
    slices_gi: int
    slices_ci: int


@dataclass(frozen=True)
class Pool:
    """A homogeneous group of simulated nodes; ``product=None`` means CPU only."""

    name: str
    size: int
    cpu: str
    memory: str
    instance_type: str
    product: str | None = None
    gpus: int = 0  # full GPUs exposed as nvidia.com/gpu
    gpu_memory_mib: int = 0
    family: str = ""
    compute: tuple[int, int] = (0, 0)
    driver: str = ""  # e.g. "580.95.05"
    cuda: str = ""  # highest CUDA the driver supports, e.g. "13.0"
    machine: str = ""
    mig_capable: bool = False
    mig: tuple[MigProfile, ...] = field(default_factory=tuple)
    product_name: str = ""  # as NVML names it (DRA's productName), e.g. "Tesla T4"
    dra: float = 0.0  # share of nodes on the DRA driver: 0 device plugin, 1 all, between: migrating

    @property
    def has_gpu(self) -> bool:
        """Whether nodes of this pool carry GPUs (full or MIG)."""
        return self.product is not None

    def node_name(self, index: int) -> str:
        """Name of node ``index`` of this pool."""
        return f"{self.name}-{index:04d}"

    def is_dra(self, index: int) -> bool:
        """Whether node ``index`` runs the DRA driver (the first ``dra`` share of the nodes)."""
        return self.has_gpu and index < round(self.size * self.dra)


_A100_MIG = (
    MigProfile("1g.10gb", 14, 9728, 14, 1, 1),
    MigProfile("2g.20gb", 6, 19968, 28, 2, 2),
    MigProfile("3g.40gb", 4, 40192, 42, 3, 3),
)

POOLS: dict[str, Pool] = {
    p.name: p
    for p in (
        Pool(
            "cpu",
            2,
            cpu="16",
            memory="64Gi",
            instance_type="n2-standard-16",
        ),
        Pool(
            "t4",
            2,
            cpu="8",
            memory="30Gi",
            instance_type="n1-standard-8-t4",
            product="Tesla-T4",
            product_name="Tesla T4",
            gpus=1,
            gpu_memory_mib=15360,
            family="turing",
            compute=(7, 5),
            driver="580.95.05",
            cuda="13.0",
            machine="Google-Compute-Engine",
        ),
        Pool(
            "a100",
            2,
            cpu="96",
            memory="1360Gi",
            instance_type="a2-ultragpu-8g",
            product="NVIDIA-A100-SXM4-80GB",
            product_name="NVIDIA A100-SXM4-80GB",
            gpus=8,
            gpu_memory_mib=81920,
            family="ampere",
            compute=(8, 0),
            driver="580.95.05",
            cuda="13.0",
            machine="Google-Compute-Engine",
            mig_capable=True,
        ),
        Pool(
            "h100",
            2,
            cpu="208",
            memory="1872Gi",
            instance_type="a3-highgpu-8g",
            product="NVIDIA-H100-80GB-HBM3",
            product_name="NVIDIA H100 80GB HBM3",
            gpus=8,
            gpu_memory_mib=81559,
            family="hopper",
            compute=(9, 0),
            driver="570.172.08",
            cuda="12.8",
            machine="Google-Compute-Engine",
            mig_capable=True,
        ),
        # 8 x A100 80GB under MIG strategy "mixed": 6 GPUs partitioned, 2 left whole.
        Pool(
            "a100-mig",
            1,
            cpu="96",
            memory="1360Gi",
            instance_type="a2-ultragpu-8g",
            product="NVIDIA-A100-SXM4-80GB",
            product_name="NVIDIA A100-SXM4-80GB",
            gpus=2,
            gpu_memory_mib=81920,
            family="ampere",
            compute=(8, 0),
            driver="580.95.05",
            cuda="13.0",
            machine="Google-Compute-Engine",
            mig_capable=True,
            mig=_A100_MIG,
        ),
    )
}
# DRA pools (off the default fleet). h100-dra's driver is on no device-plugin pool.
POOLS |= {
    p.name: p
    for p in (
        replace(POOLS["t4"], name="t4-dra", size=1, dra=1.0),
        replace(POOLS["a100"], name="a100-dra", dra=1.0),
        replace(POOLS["h100"], name="h100-dra", dra=1.0, driver="575.57.08", cuda="12.9"),
        replace(POOLS["a100-mig"], name="a100-mig-dra", dra=1.0),
        # Moving from the device plugin to DRA: half of its nodes already switched.
        replace(POOLS["a100"], name="a100-migrating", size=4, dra=0.5),
    )
}
DEFAULT_SIZES: dict[str, int] = {name: p.size for name, p in POOLS.items() if not p.dra}
_DRA_ONLY = {"cpu": 2, "t4-dra": 1, "a100-dra": 2, "h100-dra": 2, "a100-mig-dra": 1}
FLEETS: dict[str, dict[str, int]] = {  # fleet kind -> every pool's size (0: not in it)
    "device-plugin": {**dict.fromkeys(POOLS, 0), **DEFAULT_SIZES},
    "pure-dra": {**dict.fromkeys(POOLS, 0), **_DRA_ONLY},
    "mixed": {**dict.fromkeys(POOLS, 0), **DEFAULT_SIZES, **_DRA_ONLY},
    "migrating": {**dict.fromkeys(POOLS, 0), "cpu": 2, "t4": 2, "a100-migrating": 4},
}


def pools(sizes: Mapping[str, int] | None = None) -> list[Pool]:
    """The pools with sizes overridden by ``sizes`` (pool name -> node count; 0 drops it).

    Without ``sizes``: the default fleet, device plugin only (``FLEETS["device-plugin"]``).
    """
    sizes = {**DEFAULT_SIZES, **(sizes or {})}
    unknown = set(sizes) - set(POOLS)
    if unknown:
        raise ValueError(f"Unknown node pool(s) {sorted(unknown)}; known: {sorted(POOLS)}")
    return [replace(POOLS[n], size=s) for n, s in sizes.items() if s > 0]


def _gfd_labels(pool: Pool) -> dict[str, str]:
    if not pool.has_gpu:
        return {}  # GFD emits nothing on nodes without GPUs
    d_major, d_minor, d_rev = [*pool.driver.split("."), ""][:3]
    c_major, c_minor = pool.cuda.split(".")
    n = "nvidia.com/"
    labels = {
        f"{n}gpu.present": "true",
        f"{n}gfd.timestamp": GFD_TIMESTAMP,
        f"{n}cuda.driver.major": d_major,
        f"{n}cuda.driver.minor": d_minor,
        f"{n}cuda.driver.rev": d_rev,
        f"{n}cuda.runtime.major": c_major,
        f"{n}cuda.runtime.minor": c_minor,
        f"{n}cuda.driver-version.major": d_major,
        f"{n}cuda.driver-version.minor": d_minor,
        f"{n}cuda.driver-version.revision": d_rev,
        f"{n}cuda.driver-version.full": pool.driver,
        f"{n}cuda.runtime-version.major": c_major,
        f"{n}cuda.runtime-version.minor": c_minor,
        f"{n}cuda.runtime-version.full": pool.cuda,
        f"{n}gpu.machine": pool.machine,
        f"{n}gpu.product": pool.product or "",
        f"{n}gpu.count": str(pool.gpus),
        f"{n}gpu.replicas": "1",
        f"{n}gpu.sharing-strategy": "none",
        f"{n}gpu.memory": str(pool.gpu_memory_mib),
        f"{n}gpu.family": pool.family,
        f"{n}gpu.mode": "compute",
        f"{n}gpu.compute.major": str(pool.compute[0]),
        f"{n}gpu.compute.minor": str(pool.compute[1]),
        f"{n}mig.capable": str(pool.mig_capable).lower(),
        f"{n}mps.capable": "false",
    }
    if pool.mig:
        labels[f"{n}mig.strategy"] = "mixed"
        for prof in pool.mig:
            key = f"{n}mig-{prof.name}"
            labels |= {
                f"{key}.count": str(prof.count),
                f"{key}.memory": str(prof.memory_mib),
                f"{key}.product": f"{pool.product}-MIG-{prof.name}",
                f"{key}.replicas": "1",
                f"{key}.sharing-strategy": "none",
                f"{key}.multiprocessors": str(prof.multiprocessors),
                f"{key}.slices.gi": str(prof.slices_gi),
                f"{key}.slices.ci": str(prof.slices_ci),
            }
    return labels


# What the GPU Operator labels a node with in DRA mode (``GPUCluster``): GPUs present (its
# NFD-based detection), and the deploy label its DRA kubelet plugin's DaemonSet selects on.
DRA_NODE_LABELS = {"nvidia.com/gpu.present": "true", "nvidia.com/gpu.deploy.dra-driver": "true"}


def _resources(pool: Pool, dra: bool = False) -> dict[str, str]:
    res = {"cpu": pool.cpu, "memory": pool.memory, "pods": "110", "ephemeral-storage": "500Gi"}
    if dra:  # KEP-5004: node capacity lists only device-plugin extended resources
        return res
    if pool.has_gpu:
        res["nvidia.com/gpu"] = str(pool.gpus)
    for prof in pool.mig:
        res[f"nvidia.com/mig-{prof.name}"] = str(prof.count)
    return res


def node_manifest(pool: Pool, index: int) -> dict[str, Any]:
    """The Node object (with status) for node ``index`` of ``pool``, managed by kwok."""
    name = pool.node_name(index)
    labels = {
        "kubernetes.io/hostname": name,
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "node.kubernetes.io/instance-type": pool.instance_type,
        "type": "kwok",
        POOL_LABEL: pool.name,
        **(DRA_NODE_LABELS if pool.is_dra(index) else _gfd_labels(pool)),
    }
    resources = _resources(pool, pool.is_dra(index))
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "annotations": dict(KWOK_ANNOTATIONS), "labels": labels},
        "spec": {"taints": [dict(GPU_TAINT)]} if pool.has_gpu else {},
        "status": {
            "capacity": resources,
            "allocatable": dict(resources),
        },  # kwok's node-initialize stage adds conditions, addresses and nodeInfo
    }


def node_manifests(sizes: Mapping[str, int] | None = None) -> Iterator[dict[str, Any]]:
    """Every Node of every pool (sizes as in ``pools``)."""
    for pool in pools(sizes):
        for i in range(pool.size):
            yield node_manifest(pool, i)


def inventory_yaml(sizes: Mapping[str, int] | None = None) -> str:
    """The pools as a ``kubectl get nodes -o yaml``-like ``List`` document."""
    doc = {"apiVersion": "v1", "kind": "List", "items": list(node_manifests(sizes))}
    return yaml.safe_dump(doc, sort_keys=False)
