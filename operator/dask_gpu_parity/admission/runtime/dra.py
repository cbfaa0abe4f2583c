"""DRA in the running operator: whether the API server serves it, and its informers' sinks.

Where ``resource.k8s.io/v1`` is served (Kubernetes 1.34 and later with DRA on), DeviceClasses and
ResourceSlices are listed and watched beside the Nodes, all three into one
:class:`~dask_gpu_parity.admission.decide.dranodes.DraNodes`, which feeds the node index.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from dask_gpu_parity.admission.decide.dranodes import DraNodes
from dask_gpu_parity.admission.decide.draversion import minor_version
from dask_gpu_parity.admission.decide.nodeindex import NodeChange
from dask_gpu_parity.core.plain import as_map

from .apiserver import ApiClient, ApiError, NotFound
from .informer import Callbacks, Resource, Sink, object_key

__all__ = [
    "DEVICE_CLASSES",
    "DRA_API",
    "NODES",
    "RESOURCE_SLICES",
    "dra_sinks",
    "server_version",
    "serves_dra",
]

log = logging.getLogger("dask_gpu_parity")

NODES = Resource("nodes", "/api/v1/nodes")
DRA_API = "/apis/resource.k8s.io/v1"
DEVICE_CLASSES = Resource("deviceclasses", f"{DRA_API}/deviceclasses")
# A slice of 8 GPUs is 3.8 KiB of JSON (benchmarks/scale.py --dra): a page of 100 holds 0.4 MiB
# of it where 500 would hold 1.9 MiB, several times that once parsed.
RESOURCE_SLICES = Resource("resourceslices", f"{DRA_API}/resourceslices", page_size=100)
_DISCOVERY_BACKOFF = (1.0, 2.0, 4.0, 8.0, 16.0, 30.0)


def dra_sinks(
    found: DraNodes, changed: Callable[[NodeChange], None]
) -> list[tuple[Resource, Sink]]:
    """The sinks of Nodes, DeviceClasses and ResourceSlices, each change told to ``changed``."""

    def each(changes: list[NodeChange]) -> None:
        for change in changes:
            changed(change)

    return [
        (
            NODES,
            Callbacks(
                lambda o: each(found.node_upserted(o, object_key(o))),
                lambda k, _: each(found.node_deleted(k)),
            ),
        ),
        (
            DEVICE_CLASSES,
            Callbacks(
                lambda o: each(found.class_upserted(o, object_key(o))),
                lambda k, _: each(found.class_deleted(k)),
                lambda: each(found.classes_listed()),
            ),
        ),
        (
            RESOURCE_SLICES,
            Callbacks(
                lambda o: each(found.slice_upserted(o, object_key(o))),
                lambda k, _: each(found.slice_deleted(k)),
            ),
        ),
    ]


async def serves_dra(api: ApiClient) -> bool:
    """Whether the API server serves DeviceClasses and ResourceSlices at ``resource.k8s.io/v1``.

    Found by discovery (one GET), said once in the log; retried while the answer is an error
    other than 404 (an API server that is not reachable yet).
    """
    failures = 0
    while True:
        try:
            found = await api.get(DRA_API)
        except NotFound:
            found = {}
        except ApiError as exc:
            delay = _DISCOVERY_BACKOFF[min(failures, len(_DISCOVERY_BACKOFF) - 1)]
            failures += 1
            log.warning(f"Discovery of {DRA_API} failed: {exc}; retrying in {delay:g} s")
            await asyncio.sleep(delay)
            continue
        names = {str(as_map(r).get("name")) for r in found.get("resources") or []}
        if {"deviceclasses", "resourceslices"} <= names:
            log.info(
                "DRA: resource.k8s.io/v1 is served; GPU nodes are read from Nodes, "
                "ResourceSlices and DeviceClasses"
            )
            return True
        log.info(
            "DRA: resource.k8s.io/v1 is not served (Kubernetes older than 1.34, or DRA off); "
            "GPU nodes are read from Nodes only"
        )
        return False


async def server_version(api: ApiClient) -> tuple[int, int] | None:
    """The API server's (major, minor) from ``/version``; ``None`` when it cannot be read."""
    try:
        return minor_version(await api.get("/version"))
    except ApiError as exc:
        log.warning(f"The API server's version could not be read: {exc}")
        return None
