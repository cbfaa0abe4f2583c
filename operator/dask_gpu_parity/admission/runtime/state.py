"""The running operator's state, in one owner: what the informers keep, readiness, drift.

Informers (``informer.py``) list then watch nodes, namespaces and DaskGPUPolicies into the sinks
below, and, where the API server serves ``resource.k8s.io/v1`` (DRA, GA in Kubernetes 1.34),
DeviceClasses and ResourceSlices beside the nodes (``dranodes.py``); whether it does is found by
discovery before the informers start, and said once in the log. The webhook server and the drift
watch read them through :class:`OperatorState`, on the event loop. Ready means right: the webhook
server does not listen until all of them have been listed in full (``ready``), so no verdict is
ever made from half an inventory or without a policy that exists. ``/metrics`` and ``/readyz``
read a snapshot that :meth:`publish` swaps in.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dask_gpu_parity.admission.decide.dranodes import DraNodes
from dask_gpu_parity.admission.decide.nodeindex import NodeChange, NodeIndex
from dask_gpu_parity.core.deviceclasses import DeviceClasses
from dask_gpu_parity.core.inventory import GpuNode, Inventory
from dask_gpu_parity.core.policy import Policy, select
from dask_gpu_parity.names import POLICY_GROUP, POLICY_PLURAL, POLICY_VERSION

from . import metrics
from .apiserver import ApiClient
from .dra import (
    DEVICE_CLASSES,
    DRA_API,
    NODES,
    RESOURCE_SLICES,
    dra_sinks,
    server_version,
    serves_dra,
)
from .driftwatch import DriftWatch
from .events import EventCounts
from .informer import Callbacks, Informer, Resource, Sink, object_key
from .reports import ReportCounts
from .stores import Namespaces, Policies

__all__ = [
    "DEVICE_CLASSES",
    "DRA_API",
    "NAMESPACES",
    "NODES",
    "POLICIES",
    "REQUIRED",
    "RESOURCE_SLICES",
    "OperatorState",
    "Options",
]

log = logging.getLogger("dask_gpu_parity")

NAMESPACES = Resource("namespaces", "/api/v1/namespaces")
POLICIES = Resource(POLICY_PLURAL, f"/apis/{POLICY_GROUP}/{POLICY_VERSION}/{POLICY_PLURAL}")
REQUIRED = (NODES, NAMESPACES, POLICIES)  # listed in full before any webhook answer
_PUBLISH_SECONDS = 0.5  # /metrics trails the event loop by at most this


@dataclass(frozen=True)
class Options:
    """How ``dask-gpu-parity run`` serves."""

    certfile: str
    keyfile: str
    port: int = 9443
    addr: str = "0.0.0.0"  # a Pod serves on all its addresses
    metrics_port: int = 8080
    health_port: int = 8081
    drift: bool = True
    policy_reports: bool = True  # the drift watch writes PolicyReports where the CRD is served


class OperatorState:
    """What one operator process holds while it runs."""

    def __init__(self, options: Options, *, started: float | None = None) -> None:
        self.options = options
        self.started = time.monotonic() if started is None else started
        self.nodes = NodeIndex()
        self.dra: DraNodes | None = None  # set when the API server serves resource.k8s.io/v1
        self.kube: tuple[int, int] | None = None  # the API server's (major, minor), once read
        self._namespaces = Namespaces(self.namespace_changed)
        self._policies = Policies(self.policies_changed)
        self.informers: list[Informer] = []
        self.ready = asyncio.Event()
        self.ready_at: float | None = None  # seconds after ``started``
        self.drift: DriftWatch | None = None  # when the drift watch runs (not --no-drift)
        self._tasks: list[asyncio.Task[Any]] = []

    # -- what the webhooks and the drift watch read ------------------------------------------

    def namespace(self, name: str) -> tuple[dict[str, str], bool]:
        """The namespace's labels and whether it opted out."""
        found = self._namespaces.items.get(name)
        return found if found is not None else ({"kubernetes.io/metadata.name": name}, False)

    def policy(self, labels: Mapping[str, str]) -> Policy:
        """The policy in force for a namespace with these labels."""
        return select(self._policies.items.values(), labels)

    def inventory(self) -> Inventory | None:
        """The GPU nodes as of now (``None`` without any: placement rules off).

        An immutable snapshot, rebuilt from the node shapes only after a node changed.
        """
        return self.nodes.snapshot()

    def device_classes(self) -> DeviceClasses:
        """The DeviceClasses in force: NVIDIA's catalogue, extended with the cluster's."""
        return self.nodes.classes

    def namespaces(self) -> list[str]:
        """Every namespace listed."""
        return list(self._namespaces.items)

    # -- changes, from the sinks -----------------------------------------------------------

    def required(self) -> tuple[Resource, ...]:
        """What the webhooks wait for: :data:`REQUIRED`, and DRA's kinds where it is served."""
        return REQUIRED if self.dra is None else (*REQUIRED, DEVICE_CLASSES, RESOURCE_SLICES)

    def sinks(self, *, dra: bool = False) -> list[tuple[Resource, Sink]]:
        """The informers the webhooks need (:meth:`required`), with their sinks.

        ``dra``: the API server serves ``resource.k8s.io/v1``; Nodes then go through
        :class:`DraNodes` with the DeviceClasses and ResourceSlices.
        """
        if not dra:
            nodes = Callbacks(self._node_upserted, self._node_deleted)
            return [(NODES, nodes), (NAMESPACES, self._namespaces), (POLICIES, self._policies)]
        self.dra = DraNodes(self.nodes)
        return [
            *dra_sinks(self.dra, self.node_changed),
            (NAMESPACES, self._namespaces),
            (POLICIES, self._policies),
        ]

    def _node_upserted(self, obj: Mapping[str, Any]) -> None:
        """A node, reduced to what placement reads, into the shape index."""
        self.node_changed(self.nodes.upsert(GpuNode.from_node(obj), object_key(obj)))

    def _node_deleted(self, key: str, obj: Mapping[str, Any] | None) -> None:
        self.node_changed(self.nodes.delete(key))

    def node_changed(self, change: NodeChange) -> None:
        """A node's reduced form changed (the drift watch re-checks the pods on it)."""
        if self.drift is not None and change.changed:
            self.drift.node_changed(change)

    def namespace_changed(self, name: str) -> None:
        """A namespace's labels or opt-out changed."""
        if self.drift is not None:
            self.drift.namespace_changed(name)

    def policies_changed(self) -> None:
        """A policy was added, changed or removed."""
        if self.drift is not None:
            self.drift.policies_changed()

    # -- running ---------------------------------------------------------------------------

    def start(self, api: ApiClient) -> None:
        """Start the informers, readiness, the metrics publisher and then the drift watch.

        The drift watch's informers start once the webhooks' are listed: on one core, listing
        10,000 DaskClusters alongside would delay readiness by as long again.
        """
        self._spawn(self._start(api), "informers")
        self._spawn(self._publisher(), "metrics publisher")
        if self.drift is not None:
            self._spawn(self._start_drift(api, self.drift), "drift start")

    async def _start(self, api: ApiClient) -> None:
        dra = await serves_dra(api)
        if dra:
            self.kube = await server_version(api)
        for resource, sink in self.sinks(dra=dra):
            self._inform(api, resource, sink)
        await self._become_ready()

    async def _start_drift(self, api: ApiClient, drift: DriftWatch) -> None:
        await self.ready.wait()
        for resource, sink in drift.sinks():
            self._inform(api, resource, sink)
        self._spawn(drift.run(), "drift watch")
        self._spawn(drift.events.run(), "events")
        if drift.reports is not None:
            self._spawn(drift.reports.run(), "policyreports")

    def _inform(self, api: ApiClient, resource: Resource, sink: Sink) -> None:
        informer = Informer(api, resource, sink, page_size=resource.page_size)
        self.informers.append(informer)
        self._spawn(informer.run(), f"informer {resource.kind}")

    async def stop(self) -> None:
        """Cancel what :meth:`start` started."""
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._tasks.clear()

    def _spawn(self, coro: Any, name: str) -> None:
        self._tasks.append(asyncio.create_task(coro, name=name))

    def synced(self, *kinds: str) -> bool:
        """Whether the informers of these resources have been listed in full."""
        return all(i.synced.is_set() for i in self.informers if i.resource.kind in kinds)

    def waiting(self) -> tuple[str, ...]:
        """Required resources whose first LIST is not complete yet."""
        synced = {i.resource.kind for i in self.informers if i.synced.is_set()}
        if not self.informers:
            return tuple(r.kind for r in REQUIRED)
        return tuple(r.kind for r in self.required() if r.kind not in synced)

    async def _become_ready(self) -> None:
        kinds = {r.kind for r in self.required()}
        await asyncio.gather(*(i.synced.wait() for i in self.informers if i.resource.kind in kinds))
        if self.dra is not None:  # every node read once, with its slices and the classes
            for change in self.dra.release():
                self.node_changed(change)
        self.ready_at = time.monotonic() - self.started
        self.ready.set()
        self.publish()
        log.info(
            f"Ready after {self.ready_at:.2f} s: {len(self.nodes)} GPU nodes in "
            f"{len(self.nodes.class_counts())} driver classes"
            + (f" ({self.dra.slices} ResourceSlices)" if self.dra is not None else "")
            + f", {len(self._policies.items)} "
            f"policies, {len(self._namespaces.items)} namespaces"
        )

    async def _publisher(self) -> None:
        while True:
            self.publish()
            await asyncio.sleep(_PUBLISH_SECONDS)

    def publish(self) -> None:
        """Swap in a new metrics snapshot (cost: classes, informers and namespaces, not nodes)."""
        inventory = self.nodes.snapshot()
        drift = self.drift
        metrics.publish(
            metrics.Snapshot(
                ready=self.ready.is_set(),
                waiting=self.waiting(),
                gpu_nodes=tuple(
                    sorted(
                        (dc.driver if dc else "", dc.cuda if dc else "", n)
                        for dc, n in self.nodes.class_counts().items()
                    )
                ),
                gpu_shapes=inventory.shapes if inventory is not None else 0,
                informers=tuple(
                    metrics.InformerFigures(s.kind, s.synced, s.objects, s.lists, s.events)
                    for s in (i.status() for i in self.informers)
                ),
                drift=drift.figures() if drift is not None else metrics.DriftFigures(),
                events=drift.events.counts() if drift is not None else EventCounts(),
                reports=drift.reports.counts()
                if drift is not None and drift.reports is not None
                else ReportCounts(),
            )
        )
