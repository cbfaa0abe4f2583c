"""Whether the init container's DRA-backed GPU is the scheduler's, by Kubernetes version.

An extended resource backed by DRA (KEP-5004) is served from a ResourceClaim the scheduler makes
for the Pod, one request per container and resource. Kubernetes PR #134882 ("Extended resources
requested by initContainers which are allocated using an automatic ResourceClaim now match the
behavior of legacy device plugins") lets a non-sidecar init container reuse the device of a later
container; before it, the ``gpu-parity-check`` init container's request was a second device, and
the check proved a GPU the scheduler does not get. The PR is listed in v1.35.0-beta.0's changes;
the reuse was measured on v1.36.3 (docs/proving-ground.md). On 1.34, ``DRAExtendedResource`` is
alpha and off by default. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from dask_gpu_parity.core.deviceclasses import IMPLICIT_PREFIX, DeviceClasses
from dask_gpu_parity.core.gpu import containers
from dask_gpu_parity.core.inventory import Inventory
from dask_gpu_parity.core.plain import as_map, get_in
from dask_gpu_parity.core.resources import view
from dask_gpu_parity.names import VERIFIER_CONTAINER

__all__ = ["REUSE_SINCE", "minor_version", "second_device"]

REUSE_SINCE = (1, 35)  # the first release with kubernetes PR #134882
_MINOR = re.compile(r"^(\d+)")


def minor_version(version: Mapping[str, Any]) -> tuple[int, int] | None:
    """``(major, minor)`` of an API server's ``/version`` answer (``"36+"`` on some providers)."""
    major, minor = (_MINOR.match(str(version.get(k, ""))) for k in ("major", "minor"))
    return (int(major.group(1)), int(minor.group(1))) if major and minor else None


def _dra_backed(name: str, classes: DeviceClasses, inventory: Inventory | None) -> bool:
    """Whether ``name`` is served by DRA: an implicit name, or a GPU class' name on DRA nodes."""
    if name.startswith(IMPLICIT_PREFIX):
        return True
    served = any(c.extended_resource_name == name for c in classes.gpu_classes())
    return served and inventory is not None and any(n.dra for n in inventory.nodes)


def second_device(
    resource: Mapping[str, Any],
    classes: DeviceClasses,
    inventory: Inventory | None,
    version: tuple[int, int] | None,
) -> str | None:
    """A warning where the verifier's DRA-backed GPU is a second device on this Kubernetes.

    ``None`` on a version with the reuse, an unknown version, or a verifier on no DRA name.
    """
    if version is None or version >= REUSE_SINCE:
        return None
    dask = view(resource)
    if dask is None or dask.scheduler_path is None:
        return None
    spec = get_in(resource, dask.scheduler_path)
    for _, init in containers(spec, "initContainers"):
        if init.get("name") != VERIFIER_CONTAINER:
            continue
        limits = as_map(as_map(init.get("resources")).get("limits"))
        for name in sorted(str(k) for k in limits):
            if _dra_backed(name, classes, inventory):
                return (
                    f"dask-gpu-parity: on Kubernetes {version[0]}.{version[1]} the "
                    f"{VERIFIER_CONTAINER} init container's {name} is a second device, not the "
                    "scheduler's (kubernetes PR #134882 is in 1.35 and later): the Pod asks for "
                    "two; upgrade, or set spec.verifier.enabled: false in the DaskGPUPolicy"
                )
    return None
