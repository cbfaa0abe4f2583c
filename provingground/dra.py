"""DRA GPU pools: NVIDIA's DeviceClasses and, per DRA node, the ResourceSlice its driver publishes.

One source of truth beside ``pools.py`` (which says which nodes are DRA nodes). kwok nodes run no
kubelet plugin, so the harness writes the slices as the admin; kube-scheduler allocates from them
(structured parameters need no driver to allocate).

Sources (kubernetes-sigs/dra-driver-nvidia-gpu, main 9593204, 2026-08-07):

* DeviceClasses: ``deployments/helm/dra-driver-nvidia-gpu/templates/deviceclass-gpu.yaml`` and
  ``deviceclass-mig.yaml`` as rendered for ``resource.k8s.io/v1`` (``gpu.nvidia.com`` gets
  ``extendedResourceName: nvidia.com/gpu`` only on v1);
* devices: ``cmd/gpu-kubelet-plugin/deviceinfo.go`` (``GpuInfo.Attributes``, ``CanonicalName``
  ``gpu-<minor>``), ``partitions.go`` (capacity ``memory``), versions through Masterminds
  ``semver.MustParse(...).String()`` (``580.95.05`` becomes ``580.95.5``, ``13.0`` ``13.0.0``);
  the example in ``site/content/docs/reference/resourceslice-attributes.md``;
* MIG devices (static MIG): ``cmd/gpu-kubelet-plugin/mig.go`` (``CommonAttributesMig``: the
  parent's attributes plus ``type: mig``, ``parentUUID``, ``profile``; ``ToCanonicalName``
  ``gpu-<parent minor>-mig-<profile without dots>-<profile id>-<placement start>``;
  ``CommonCapacitiesMig``: ``memory``, ``multiprocessors`` and engine counts, of which only the
  first two are published here); a per-profile DeviceClass with its own ``extendedResourceName``
  as in ``demo/specs/extended-resources/mig-1g-12gb.yaml``;
* slices: ``cmd/gpu-kubelet-plugin/driver.go`` publishes one pool per node, named after the node,
  through ``k8s.io/dynamic-resource-allocation/resourceslice``, which names slices
  ``<index>-gpu.nvidia.com-<random>`` (generateName) and sets ``nodeName``. Here the name is
  ``<node>-gpu.nvidia.com``, fixed, so that creating twice is harmless.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import yaml
from kubernetes import client

from .objects import create_all, name_of, present
from .pools import POOL_LABEL, POOLS, Pool, node_manifests, pools

__all__ = [
    "DRA_POOL_SIZES",
    "DRIVER",
    "GPU_CLASS",
    "MIG_CLASS",
    "RESOURCE",
    "create_objects",
    "delete_dra_objects",
    "device_classes",
    "driver_class",
    "inventory_yaml",
    "mig_profile_class",
    "normalise_version",
    "publish",
    "publish_pools",
    "resource_slice",
    "resource_slices",
]

DRIVER = "gpu.nvidia.com"
RESOURCE = ("resource.k8s.io", "v1")
GPU_CLASS = "gpu.nvidia.com"
MIG_CLASS = "mig.nvidia.com"
# The pools with DRA nodes at their own sizes: with the default pools, the "mixed" fleet.
DRA_POOL_SIZES = {name: p.size for name, p in POOLS.items() if p.dra}
_GPU_SELECTOR = f"device.driver == '{DRIVER}' && device.attributes['{DRIVER}'].type == 'gpu'"
_MIG_SELECTOR = f"device.driver == '{DRIVER}' && device.attributes['{DRIVER}'].type == 'mig'"


def _device_class(
    name: str, expression: str, extended_resource_name: str | None = None
) -> dict[str, Any]:
    spec: dict[str, Any] = {"selectors": [{"cel": {"expression": expression}}]}
    if extended_resource_name:
        spec["extendedResourceName"] = extended_resource_name
    return {
        "apiVersion": "/".join(RESOURCE),
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": spec,
    }


def device_classes() -> list[dict[str, Any]]:
    """The DeviceClasses the driver's Helm chart renders on ``resource.k8s.io/v1``."""
    return [
        _device_class(GPU_CLASS, _GPU_SELECTOR, "nvidia.com/gpu"),
        _device_class(MIG_CLASS, _MIG_SELECTOR),
    ]


def mig_profile_class(profile: str) -> dict[str, Any]:
    """A DeviceClass for one MIG profile, requested as ``nvidia.com/mig-<profile>``."""
    expression = f"{_MIG_SELECTOR} && device.attributes['{DRIVER}'].profile == '{profile}'"
    name = f"mig-{profile.replace('.', '-')}.{DRIVER}"
    return _device_class(name, expression, f"nvidia.com/mig-{profile}")


def normalise_version(version: str) -> str:
    """A version as the driver publishes it: three numeric parts, no leading zeros."""
    parts = [str(int(p)) for p in version.split(".")]
    return ".".join([*parts, "0", "0"][:3])


def driver_class(driver: str) -> dict[str, Any]:
    """A per-driver-class DeviceClass: full GPUs of driver ``driver`` only (CEL ``semver``).

    Its name, ``gpu-<driver with dashes>.nvidia.com``, makes the implicit extended resource
    ``deviceclass.resource.kubernetes.io/<name>`` (KEP-5004) that pins a Pod to that driver.
    """
    version = normalise_version(driver)
    expression = (
        f"{_GPU_SELECTOR} && device.attributes['{DRIVER}'].driverVersion"
        f".compareTo(semver('{version}')) == 0"
    )
    return _device_class(f"gpu-{version.replace('.', '-')}.nvidia.com", expression)


def _gpu_uuid(node: str, minor: int) -> str:
    return f"GPU-{uuid.uuid5(uuid.NAMESPACE_DNS, f'{minor}.{node}.dask-gpu-parity.test')}"


# NVML GPU instance profile IDs (``nvidia-smi mig -lgip`` on an A100 80GB).
MIG_PROFILE_IDS = {"1g.10gb": 19, "2g.20gb": 14, "3g.40gb": 9}


def _attributes(pool: Pool, uuid_: str, kind: str) -> dict[str, dict[str, str]]:
    def version(value: str) -> dict[str, str]:
        return {"version": normalise_version(value)}

    return {
        "architecture": {"string": pool.family.capitalize()},
        "brand": {"string": "Nvidia"},
        "cudaComputeCapability": version(".".join(map(str, pool.compute))),
        "cudaDriverVersion": version(pool.cuda),
        "driverVersion": version(pool.driver),
        "productName": {"string": pool.product_name},
        "type": {"string": kind},
        "uuid": {"string": uuid_},
    }


def _devices(pool: Pool, node: str) -> Iterator[dict[str, Any]]:
    """Whole GPUs ``gpu-0..``, then each partitioned GPU's MIG devices (profile by profile)."""
    for minor in range(pool.gpus):
        yield {
            "name": f"gpu-{minor}",
            "attributes": _attributes(pool, _gpu_uuid(node, minor), "gpu"),
            "capacity": {"memory": {"value": f"{pool.gpu_memory_mib}Mi"}},
        }
    minor = pool.gpus
    for prof in pool.mig:
        per_gpu = 7 // prof.slices_gi  # an A100 has 7 compute slices: 7, 3 or 2 instances
        for index in range(prof.count):
            parent, placement = minor + index // per_gpu, (index % per_gpu) * (8 // per_gpu)
            attributes = _attributes(
                pool, f"MIG-{_gpu_uuid(node, 100 * parent + index)[4:]}", "mig"
            )
            attributes["parentUUID"] = {"string": _gpu_uuid(node, parent)}
            attributes["profile"] = {"string": prof.name}
            yield {
                "name": f"gpu-{parent}-mig-{prof.name.replace('.', '')}-"
                f"{MIG_PROFILE_IDS[prof.name]}-{placement}",
                "attributes": attributes,
                "capacity": {
                    "memory": {"value": f"{prof.memory_mib}Mi"},
                    "multiprocessors": {"value": str(prof.multiprocessors)},
                },
            }
        minor += -(-prof.count // per_gpu)


def resource_slice(pool: Pool, index: int, node_uid: str | None = None) -> dict[str, Any]:
    """The ResourceSlice of node ``index`` of ``pool`` (a DRA node): its GPUs and MIG devices.

    With ``node_uid`` the slice is owned by the Node, as the kubelet plugin's are, so the
    garbage collector deletes it with the Node.
    """
    if not pool.is_dra(index):
        raise ValueError(f"Node {pool.node_name(index)} runs the device plugin, not DRA")
    node = pool.node_name(index)
    metadata: dict[str, Any] = {"name": f"{node}-{DRIVER}", "labels": {POOL_LABEL: pool.name}}
    if node_uid:
        metadata["ownerReferences"] = [
            {"apiVersion": "v1", "kind": "Node", "name": node, "uid": node_uid, "controller": True}
        ]
    return {
        "apiVersion": "/".join(RESOURCE),
        "kind": "ResourceSlice",
        "metadata": metadata,
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": list(_devices(pool, node)),
        },
    }


def resource_slices(sizes: Mapping[str, int] | None = None) -> Iterator[dict[str, Any]]:
    """Every DRA node's ResourceSlice (sizes as in ``pools.pools``)."""
    for pool in pools(sizes):
        for i in range(pool.size):
            if pool.is_dra(i):
                yield resource_slice(pool, i)


def inventory_yaml(sizes: Mapping[str, int] | None = None) -> str:
    """The fleet as one ``List``: its Nodes, then the DRA nodes' ResourceSlices.

    With ``pools.FLEETS[...]`` sizes, what ``kubectl get nodes,resourceslices -o yaml`` gives.
    """
    items = [*node_manifests(sizes), *resource_slices(sizes)]
    return yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items}, sort_keys=False)


def create_objects(
    api: client.ApiClient, plural: str, bodies: Iterable[Mapping[str, Any]], concurrency: int = 16
) -> int:
    """Create cluster-scoped ``resource.k8s.io/v1`` objects; existing ones are left alone.

    Returns how many were created.
    """
    custom = client.CustomObjectsApi(api)

    def create(body: dict[str, Any]) -> object:
        return custom.create_cluster_custom_object(*RESOURCE, plural, body, _request_timeout=30)

    return create_all(create, bodies, concurrency)


def publish(api: client.ApiClient, sizes: Mapping[str, int], concurrency: int = 16) -> int:
    """Create the DeviceClasses and each DRA node's ResourceSlice, owned by its Node.

    The Nodes of ``sizes`` (as in ``pools.pools``) must exist (``nodes.create_nodes``).
    Returns how many slices were created (existing ones are left alone).
    """
    return publish_pools(api, pools(sizes), concurrency)


def publish_pools(api: client.ApiClient, fleet: Iterable[Pool], concurrency: int = 16) -> int:
    """``publish`` for any pools, e.g. a benchmark's own (``dataclasses.replace`` of ``POOLS``)."""
    create_objects(api, "deviceclasses", device_classes())
    wanted = [(p, i) for p in fleet for i in range(p.size) if p.is_dra(i)]
    uids: dict[str, str] = {}
    if wanted:
        core = client.CoreV1Api(api)
        selector = f"{POOL_LABEL} in ({','.join(sorted({p.name for p, _ in wanted}))})"
        token = None
        while True:  # paged: thousands of Nodes
            page = core.list_node(label_selector=selector, limit=500, _continue=token)
            for node in page.items:
                uids[name_of(node)] = str(present(node.metadata, "metadata").uid)
            token = page.metadata._continue if page.metadata else None
            if not token:
                break
    missing = [p.node_name(i) for p, i in wanted if p.node_name(i) not in uids]
    if missing:
        raise RuntimeError(f"No Node for ResourceSlices of {missing[:5]}: create the Nodes first")
    slices = (resource_slice(p, i, uids[p.node_name(i)]) for p, i in wanted)
    return create_objects(api, "resourceslices", slices, concurrency)


def delete_dra_objects(api: client.ApiClient, selector: str = POOL_LABEL) -> None:
    """Delete the ResourceSlices matching ``selector`` (the DeviceClasses stay)."""
    client.CustomObjectsApi(api).delete_collection_cluster_custom_object(
        *RESOURCE, "resourceslices", label_selector=selector
    )
