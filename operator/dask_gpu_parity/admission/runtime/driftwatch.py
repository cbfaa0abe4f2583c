"""The drift watch: every DaskCluster's scheduler against parity, kept current.

Two checks per cluster:

- **spec**: the scheduler Deployment's pod template against what ``evaluate`` would make of it
  (``drift.py``): clusters created before the webhooks, or while they were down;
- **placement**: the driver class of the nodes the scheduler pod and the worker pods actually
  run on (``placement.py``): driver upgrades rolling node by node under a running cluster.

Informers feed three stores here (DaskClusters, scheduler Deployments, Dask pods); nodes,
namespaces and policies come from the operator's state. A change marks the clusters it can
affect, and one task checks marked clusters a slice at a time, so webhooks keep answering:

=========================================================  ====================================
change                                                     clusters checked again
=========================================================  ====================================
a DaskCluster, or its scheduler Deployment's template      that one: spec and placement
a Dask pod bound, moved or gone                            that one: placement
a node's driver class                                      those with pods on it: placement
a namespace's labels or opt-out                            that namespace's
a DaskGPUPolicy                                            those whose policy in force changed
a node shape appears or disappears                         all: spec, at most once per 5 s
a node joins or leaves an existing shape, status updates   none
=========================================================  ====================================

Three parts, each its own object: the stores (``driftstore.py``, which tell this watch what
changed), the checks of one cluster (``driftcheck.py``, which post Events through an
``events.Events`` and repair through the API client) and, here, the marks and the task that
works through them. A failed ``gpu-parity-check`` gets an Event too (``podevents.py``). Each GPU
cluster's verdict also goes to its PolicyReport (``reports.py``), written in the background.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque

from dask_gpu_parity.admission.decide import podevents
from dask_gpu_parity.admission.decide.nodeindex import NodeChange

from . import metrics
from .driftcheck import DriftChecks, Operator, PatchDeployment, Reports
from .driftstore import CLUSTERS, DEPLOYMENTS, PLACEMENT, PODS, SPEC, DriftStores, Key
from .events import Events
from .informer import Resource, Sink

__all__ = ["DriftWatch", "Operator", "PatchDeployment"]

log = logging.getLogger("dask_gpu_parity")

_KINDS = frozenset(r.kind for r in (CLUSTERS, DEPLOYMENTS, PODS))
_SLICE_SECONDS = 0.02  # checks run this long, then the event loop serves others
_RESHAPE_SECONDS = 5.0  # node shape changes are coalesced for this long


class DriftWatch:
    """The drift watch: its stores, its checks, and the marks the checking task works through.

    Args:
        operator: the operator's state (namespaces, policies, nodes).
        events: where Events go (``events.EventPoster``).
        patch_deployment: how a scheduler Deployment is repaired.
        reports: where each GPU cluster's PolicyReport goes (``reports.PolicyReports``), if
            anywhere.
    """

    def __init__(
        self,
        operator: Operator,
        events: Events,
        patch_deployment: PatchDeployment,
        reports: Reports | None = None,
    ) -> None:
        self.events = events
        self.reports = reports
        self.stores = DriftStores(self)
        self.checker = DriftChecks(self.stores, operator, events, patch_deployment, reports)
        self._operator = operator
        self._queue: deque[Key] = deque()
        self._marks: dict[Key, int] = {}
        self._wake = asyncio.Event()
        self._reshape: asyncio.TimerHandle | None = None
        self.first_pass_seconds: float | None = None

    @property
    def checks(self) -> int:
        """Cluster checks made so far."""
        return self.checker.checks

    @property
    def pending(self) -> int:
        """Clusters marked, not checked yet."""
        return len(self._queue)

    def sinks(self) -> list[tuple[Resource, Sink]]:
        """The informers this watch needs, with their sinks (the stores')."""
        return self.stores.sinks()

    # -- what the operator's state tells -----------------------------------------------------

    def node_changed(self, change: NodeChange) -> None:
        """A node changed: its pods' clusters if its class did; all if the shapes did."""
        if change.before != change.after:
            for key in self.stores.on_node(change.name):
                self.mark(key, PLACEMENT)
        if change.shapes_changed and self.first_pass_seconds is not None and not self._reshape:
            loop = asyncio.get_running_loop()
            self._reshape = loop.call_later(_RESHAPE_SECONDS, self._reshaped)

    def _reshaped(self) -> None:
        self._reshape = None
        for key in self.stores.clusters():
            self.mark(key, SPEC)

    def namespace_changed(self, namespace: str) -> None:
        """A namespace's labels or opt-out changed."""
        for key in self.stores.in_namespace(namespace):
            self.mark(key, SPEC | PLACEMENT)

    def policies_changed(self) -> None:
        """A policy changed: clusters whose namespace now has another policy in force."""
        operator, checked = self._operator, self.checker.policies
        for namespace, names in self.stores.namespaces():
            if checked.get(namespace) != operator.policy(operator.namespace(namespace)[0]):
                for name in names:
                    self.mark((namespace, name), SPEC | PLACEMENT)

    # -- what the stores tell (driftstore.Changes) -------------------------------------------

    def listed(self, kind: str) -> None:
        """A resource's LIST is complete (the first pass may be done)."""
        self._wake.set()

    def mark(self, key: Key, what: int) -> None:
        """Check this cluster again (``SPEC``, ``PLACEMENT`` or both)."""
        if key not in self._marks:
            self._queue.append(key)
            self._marks[key] = what
        else:
            self._marks[key] |= what
        self._wake.set()

    def probe_failed(self, failure: podevents.ProbeFailure) -> None:
        """A scheduler pod's GPU check failed: the checks say why, in Events."""
        self.checker.probe_failed(failure)

    # -- checking ----------------------------------------------------------------------------

    async def run(self) -> None:
        """Check what is marked, as it arrives; the first pass ends when all is listed and checked.

        Checks start while DaskClusters and Deployments are still being listed (every object
        listed marks its cluster), so the first pass takes about as long as the lists, not the
        lists and then the checks. Placement waits for the Pod list: a verdict from some of a
        cluster's Pods could be wrong.
        """
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._queue:
                started = time.perf_counter()
                while self._queue and time.perf_counter() - started < _SLICE_SECONDS:
                    key = self._queue.popleft()
                    self.checker.check(key, self._marks.pop(key))
                await asyncio.sleep(0)
            if self.first_pass_seconds is None and self.stores.listed >= _KINDS:
                self._first_pass_done()

    def _first_pass_done(self) -> None:
        self.first_pass_seconds = time.monotonic() - self._operator.started
        self.checker.quiet = False
        if self.reports is not None:
            self.reports.first_pass_done()
        stores = self.stores
        drifted = sum(stores.specs.counts().values())
        log.log(
            logging.WARNING if drifted else logging.INFO,
            f"Drift watch: first pass over {len(stores)} DaskClusters done "
            f"{self.first_pass_seconds:.2f} s after start: {drifted} lack GPU parity "
            f"(a ParityDrift Event on each), "
            f"{sum(stores.places.counts().values())} run on another driver than their workers",
        )

    def figures(self) -> metrics.DriftFigures:
        """The watch's part of the metrics snapshot (namespaces, not clusters, are walked)."""
        return metrics.DriftFigures(
            drifted=tuple(sorted(self.stores.specs.counts().items())),
            mismatched=tuple(sorted(self.stores.places.counts().items())),
            watched=len(self.stores),
            pending=len(self._queue),
            checks=self.checker.checks,
            first_pass_seconds=self.first_pass_seconds,
        )
