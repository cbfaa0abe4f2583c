"""The drift watch's checks of one DaskCluster: its spec, its placement, its scheduler's GPU check.

:class:`DriftChecks` reads the stores (``driftstore.py``) and what the operator knows (an
:class:`Operator`: namespaces, policies, nodes), records each verdict, and says what is new in
Events (an ``events.Events``); where the policy asks for repair it patches the scheduler
Deployment (a :data:`PatchDeployment`). Which clusters to check, and when, is the watch's
(``driftwatch.py``). Events are named after what they report, so a restarted operator does not
post them twice.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any, Protocol

from dask_gpu_parity.admission.decide import placement, podevents, reports
from dask_gpu_parity.admission.decide.nodeindex import NodeIndex
from dask_gpu_parity.core.deviceclasses import DeviceClasses
from dask_gpu_parity.core.inventory import Inventory
from dask_gpu_parity.core.policy import Policy
from dask_gpu_parity.core.policyreport import Outcome, Subject
from dask_gpu_parity.core.rules import pins
from dask_gpu_parity.names import DASK_API_VERSION

from .driftstore import (
    CLUSTERS,
    DEPLOYMENTS,
    PLACEMENT,
    PODS,
    SPEC,
    DriftStores,
    Key,
    StoredCluster,
)
from .events import Events
from .reports import ReportCounts

__all__ = ["DriftChecks", "Operator", "PatchDeployment", "Reports"]

log = logging.getLogger("dask_gpu_parity")

# Patch a scheduler Deployment (namespace, name, JSON Patch): the wiring gives the API client's.
PatchDeployment = Callable[[str, str, list[dict[str, Any]]], Awaitable[None]]


class Operator(Protocol):
    """What the checks read of the operator's state (``state.OperatorState``)."""

    @property
    def started(self) -> float:
        """``time.monotonic()`` when the operator started."""

    @property
    def nodes(self) -> NodeIndex:
        """The GPU nodes, by name and by shape."""

    def namespace(self, name: str) -> tuple[dict[str, str], bool]:
        """The namespace's labels and whether it opted out."""

    def policy(self, labels: Mapping[str, str]) -> Policy:
        """The policy in force for a namespace with these labels."""

    def inventory(self) -> Inventory | None:
        """The GPU nodes as of now (``None`` without any)."""

    def device_classes(self) -> DeviceClasses:
        """The DeviceClasses in force (NVIDIA's catalogue, extended with the cluster's)."""


class Reports(Protocol):
    """Where each cluster's PolicyReport goes (``reports.PolicyReports``)."""

    def update(self, subject: Subject, outcomes: Sequence[Outcome]) -> None:
        """The cluster's report should say ``outcomes``."""

    def remove(self, key: Key) -> None:
        """The cluster should have no report."""

    def first_pass_done(self) -> None:
        """Every cluster has been checked once."""

    async def run(self) -> None:
        """Write reports until cancelled."""

    def counts(self) -> ReportCounts:
        """What became of the reports so far."""


class DriftChecks:
    """Check clusters, record the verdicts in the stores, post what is new, repair if asked."""

    def __init__(
        self,
        stores: DriftStores,
        operator: Operator,
        events: Events,
        patch_deployment: PatchDeployment,
        reports: Reports | None = None,
    ) -> None:
        self.stores = stores
        self.reports = reports
        self.operator = operator
        self.events = events
        self._patch = patch_deployment
        self.policies: dict[str, Policy] = {}  # the policy each namespace was last checked under
        self.checks = 0
        self.quiet = True  # during the first pass, which sums up in one line: no line per drift
        self._repairs: set[asyncio.Task[None]] = set()
        # The outcomes of the last findings reported without a mismatch (they depend on nothing
        # else), shared by the next cluster whose verdict, shared too, has the same findings.
        self._outcomes: tuple[object, tuple[Outcome, ...]] = (None, ())

    def check(self, key: Key, what: int) -> None:
        """Check a cluster's spec, placement or both (``SPEC``, ``PLACEMENT``)."""
        self.checks += 1
        stores = self.stores
        cluster = stores.cluster(key)
        labels, namespace_skip = self.operator.namespace(key[0])
        if cluster is None or cluster.skip or namespace_skip:
            stores.specs.forget(*key)
            stores.places.forget(*key)
            if self.reports is not None and (cluster is not None or CLUSTERS.kind in stores.listed):
                self.reports.remove(key)  # not for a cluster that may yet be listed
            return
        policy = self.operator.policy(labels)
        self.policies[key[0]] = policy
        try:
            if what & SPEC:
                self._check_spec(key, cluster, policy)
            if what & PLACEMENT:
                self._check_placement(key, cluster, policy)
            if self.reports is not None:
                self._report(key, cluster, policy)
        except Exception:
            log.exception(f"Checking DaskCluster {key[0]}/{key[1]} for drift failed")

    def _report(self, key: Key, cluster: StoredCluster, policy: Policy) -> None:
        """The cluster's PolicyReport: while it has GPU workers and a scheduler Deployment."""
        assert self.reports is not None
        findings = self.stores.specs.findings(*key)
        if findings is None:
            # No GPU workers, or no scheduler Deployment: known only once every Deployment is
            # listed (a restarted operator must not delete, then write again, what is right).
            if DEPLOYMENTS.kind in self.stores.listed:
                self.reports.remove(key)
            return
        subject = Subject(DASK_API_VERSION, "DaskCluster", key[0], key[1], cluster.uid)
        mismatch = self.stores.places.mismatch(*key)
        if mismatch is None and findings is self._outcomes[0]:
            found = self._outcomes[1]  # the same verdict's: one copy for every such cluster
        else:
            found = reports.outcomes(findings, mismatch, repairing=policy.drift.repair)
            if mismatch is None:
                self._outcomes = (findings, found)
        self.reports.update(subject, found)

    def _check_spec(self, key: Key, cluster: StoredCluster, policy: Policy) -> None:
        deployment = self.stores.deployment(key)
        if deployment is None:
            self.stores.specs.forget(*key)
            return
        body = {
            "metadata": {
                "namespace": key[0],
                "name": deployment.name,
                "uid": deployment.uid,
                "generation": deployment.generation,
            },
            "spec": {"template": {"spec": deployment.template()}},
        }
        found = cluster.body()
        found["metadata"]["name"] = key[1]  # the store's copy, which the verdicts keep
        report = self.stores.specs.check(
            found, body, policy, self.operator.inventory(), self.operator.device_classes()
        )
        if report is None or not report.new:
            return
        repair = policy.drift.repair and report.repair_patch is not None
        message = report.message(repairing=repair)
        parts = (cluster.uid, deployment.uid, str(deployment.generation), message)
        name = podevents.event_name(key[1], *parts)
        self.events.post(cluster.ref(key), "Warning", "ParityDrift", message, name=name)
        if not self.quiet:
            log.warning(message)
        if repair and report.repair_patch:
            self._repair(
                key, cluster, deployment.name, report.repair_patch, "Scheduler Deployment patched"
            )

    def _check_placement(self, key: Key, cluster: StoredCluster, policy: Policy) -> None:
        if PODS.kind not in self.stores.listed:
            return  # checked again once every Pod is listed
        schedulers: list[placement.PodPlace] = []
        workers: list[placement.PodPlace] = []
        nodes = self.operator.nodes
        pods = self.stores.pods(key)
        for name, pod in pods:
            place = placement.PodPlace(
                name.partition("/")[2], pod.node, nodes.driver_class(pod.node)
            )
            (schedulers if pod.component == "scheduler" else workers).append(place)
        if not placement.comparable(schedulers, workers):
            if not pods:
                self.stores.places.forget(*key)  # no pod at all: stopped, or not started yet
            return  # a pod being replaced: the last verdict stands
        mismatch = placement.check(key[0], key[1], schedulers, workers)
        news, before = self.stores.places.update(key[0], key[1], mismatch)
        if not news:
            return
        ref = cluster.ref(key)
        if mismatch is None:
            if before is not None:
                now = next(s.driver_class for s in schedulers if s.driver_class)
                text = before.restored(now)
                self.events.post(ref, "Normal", "ParityDriverRestored", text)
                log.info(f"DaskCluster {key[0]}/{key[1]}: {text}")
            return
        deployment = self.stores.deployment(key)
        target = mismatch.target
        repair = policy.drift.repair and target is not None and deployment is not None
        message = mismatch.message(repairing=repair)
        self.events.post(ref, "Warning", "ParityDriverMismatch", message)
        log.warning(f"DaskCluster {key[0]}/{key[1]}: {message}")
        if repair and deployment is not None and target is not None:
            inventory = self.operator.inventory()
            legacy = None if inventory is None else pins.legacy_pin(inventory, target)
            ops = placement.repin(deployment.template(), target, legacy)
            if ops:
                self._repair(
                    key, cluster, deployment.name, ops, f"Scheduler Deployment pinned to {target}"
                )

    def _repair(
        self, key: Key, cluster: StoredCluster, deployment: str, ops: list[Any], done: str
    ) -> None:
        async def repair() -> None:
            try:
                await self._patch(key[0], deployment, ops)
            except Exception as exc:
                log.error(f"Repairing {key[0]}/{deployment} failed: {exc}")
                self.events.post(cluster.ref(key), "Warning", "ParityRepairFailed", str(exc))
                return
            self.events.post(cluster.ref(key), "Normal", "ParityRepaired", done)

        task = asyncio.create_task(repair(), name=f"repair {key[0]}/{deployment}")
        self._repairs.add(task)
        task.add_done_callback(self._repairs.discard)

    def probe_failed(self, failure: podevents.ProbeFailure) -> None:
        """Say why a scheduler pod's GPU check failed: an Event on the pod and its DaskCluster.

        Not for opted-out clusters or namespaces, nor for a failure that ended more than
        ``podevents.HORIZON`` ago (seen when listing after a restart: old news).
        """
        cluster = self.stores.cluster((failure.namespace, failure.cluster))
        if (cluster is not None and cluster.skip) or self.operator.namespace(failure.namespace)[1]:
            return
        if not podevents.recent(failure, dt.datetime.now(dt.UTC)):
            return
        for n in podevents.notices(failure, cluster.uid if cluster else None):
            self.events.post(
                n.ref, "Warning", n.reason, n.message, name=n.name, field_path=n.field_path
            )
        log.warning(f"Scheduler pod {failure.namespace}/{failure.pod}: {failure.text()}")
