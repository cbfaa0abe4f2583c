"""The kopf wiring: which resources are watched and indexed, and ``run`` (the only kopf entry).

It runs beside the dask-kubernetes operator (also kopf) on the same resources, so it never uses
kopf's defaults for what it writes (docs/operator.md, "Beside the dask operator"): its own
finalizer and annotation prefix, no change handlers, timers or daemons on Dask resources
(indices and ``on.event`` only), nothing written to Dask resources, no peering (standalone).
Handlers are registered on a registry of their own by :func:`run`, with the state they share,
so importing this module registers nothing.
"""

from __future__ import annotations

import asyncio
import copy
import logging
from collections.abc import Mapping
from typing import Any, cast

import kopf

from dask_gpu_parity.core.inventory import GpuNode
from dask_gpu_parity.core.plain import as_map
from dask_gpu_parity.core.policy import PolicyError
from dask_gpu_parity.core.policy_manifest import load
from dask_gpu_parity.names import (
    CLUSTER_NAME_LABEL,
    COMPONENT_LABEL,
    DASK_GROUP,
    DASK_VERSION,
    POLICY_GROUP,
    POLICY_PLURAL,
    POLICY_VERSION,
    PREFIX,
    SKIP_ANNOTATION,
)

from . import drift, kube, metrics
from .server import WebhookServer
from .state import INDEX_NAMES, OperatorState, Options

__all__ = ["Options", "registry", "run"]


class _NoEssenceDiffBase(kopf.AnnotationsDiffBaseStorage):
    """Our own diff-base annotation, without the per-event essence.

    On every watch event kopf builds the object's "essence" (a deep copy of it) for
    change-detecting handlers. This operator has none, by design (``on.event`` and indices
    only), so the copy is never read; under a stream of DaskCluster creates it was the largest
    CPU item of the watch. An empty essence is the truth for an operator that
    detects no changes: adding an ``on.create``/``on.update`` handler needs kopf's storage back.
    """

    def build(self, **_: Any) -> kopf.BodyEssence:
        return cast("kopf.BodyEssence", {})


# Indices: what admission needs to know about the cluster, kept small. ``async`` although they
# never await: they run inline, not through kopf's thread pool (a thread hop per watch event).


async def policies(*, name: str, body: kopf.Body, logger: kopf.Logger, **_: Any) -> Any:
    """Valid DaskGPUPolicies by name; an invalid one is logged and ignored."""
    try:
        return {name: load(dict(body))}
    except PolicyError as exc:
        logger.error(f"DaskGPUPolicy {name} is invalid and ignored: {exc}")
        return None


async def namespaces(
    *, name: str, labels: Mapping[str, str], annotations: Mapping[str, str], **_: Any
) -> Any:
    """Labels of every namespace, and whether it opted out."""
    flag = annotations.get(SKIP_ANNOTATION, labels.get(SKIP_ANNOTATION, ""))
    return {name: (dict(labels), str(flag).lower() == "true")}


async def gpu_nodes(*, name: str, body: kopf.Body, **_: Any) -> Any:
    """GPU nodes only, reduced to what placement needs; CPU-only nodes cost nothing."""
    node = GpuNode.from_node(body)
    return {name: node} if node is not None else None


async def dask_clusters(*, namespace: str | None, name: str, body: kopf.Body, **_: Any) -> Any:
    """DaskCluster specs, for the drift watch.

    Registered only when the drift watch is on. The webhooks do not use it: a watch of every
    DaskCluster cost each webhook replica 2.3 to 2.9 ms of CPU per DaskCluster created
    (docs/performance.md), and an index lags the API server, so a worker group created right
    after its cluster could miss DGP015. Admission reads the one cluster it needs instead.
    """
    meta = as_map(body.get("metadata"))
    kept = {k: copy.deepcopy(meta[k]) for k in ("name", "namespace", "uid") if k in meta}
    skip = as_map(meta.get("annotations")).get(SKIP_ANNOTATION)
    if skip is not None:  # the drift watch honours the resource's opt-out too
        kept["annotations"] = {SKIP_ANNOTATION: skip}
    minimal = {
        "apiVersion": body.get("apiVersion"),
        "kind": body.get("kind"),
        "metadata": kept,
        "spec": copy.deepcopy(dict(as_map(body.get("spec")))),
    }
    return {(namespace or "", name): minimal}


def registry(state: OperatorState) -> kopf.OperatorRegistry:
    """A kopf registry with this operator's handlers, bound to ``state``."""
    reg = kopf.OperatorRegistry()
    options = state.options
    # A registry of its own has none of kopf's default handlers: log in as kopf would with the
    # Kubernetes client installed (in-cluster service account, else the kubeconfig).
    kopf.on.login(registry=reg)(kopf.login_via_client)

    @kopf.on.startup(registry=reg)
    def configure(settings: kopf.OperatorSettings, **kwargs: Any) -> None:
        """Fix kopf's identity and servers in code, so no flag can be forgotten."""
        # kopf passes its indices (empty now, filled as it watches) to startup handlers too.
        state.attach({name: kwargs[name] for name in INDEX_NAMES if name in kwargs})
        settings.persistence.finalizer = f"{PREFIX}/finalizer"
        settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=PREFIX)
        settings.persistence.diffbase_storage = _NoEssenceDiffBase(
            prefix=PREFIX, key="last-handled-configuration"
        )
        settings.admission.server = WebhookServer(
            state,
            addr=options.addr,
            port=options.port,
            certfile=options.certfile,
            pkeyfile=options.keyfile,
            file_check_interval=30,  # reload renewed certificates
        )
        settings.admission.managed = None  # the chart (or the test harness) owns them
        settings.posting.loggers = False
        settings.watching.server_timeout = 300
        settings.networking.request_timeout = 30
        metrics.serve(options.metrics_port, options.addr)

        def classes() -> dict[tuple[str, str], int]:
            inventory = state.inventory()
            grouped = inventory.classes() if inventory else {}
            return {(dc.driver, dc.cuda): len(members) for dc, members in grouped.items()}

        metrics.GPU_NODES.set_function_source(classes)

    kopf.index(POLICY_GROUP, POLICY_VERSION, POLICY_PLURAL, id="policies", registry=reg)(policies)
    kopf.index("", "v1", "namespaces", id="namespaces", registry=reg)(namespaces)
    kopf.index("", "v1", "nodes", id="gpu_nodes", registry=reg)(gpu_nodes)
    if options.drift:
        kopf.index(DASK_GROUP, DASK_VERSION, "daskclusters", id="dask_clusters", registry=reg)(
            dask_clusters
        )
        kopf.on.event(
            "apps",
            "v1",
            "deployments",
            labels={COMPONENT_LABEL: "scheduler"},
            id="scheduler_deployment",
            registry=reg,
        )(_drift_watch(state))
    return reg


def _drift_watch(state: OperatorState) -> Any:
    async def scheduler_deployment(
        *,
        event: kopf.RawEvent,
        body: kopf.Body,
        namespace: str | None,
        logger: kopf.Logger,
        **_: Any,
    ) -> None:
        """Report (and, if the policy allows, repair) a drifted scheduler within seconds.

        Registered only when the drift watch is on, so webhook-only replicas (``--no-drift``)
        do not stream the cluster's Deployments at all.
        """
        ns = namespace or ""
        name = as_map(as_map(body.get("metadata")).get("labels")).get(CLUSTER_NAME_LABEL)
        if event.get("type") == "DELETED" or not isinstance(name, str):
            state.tracker.forget(ns, str(name))
            _publish_drift(state.tracker)
            return
        cluster = state.cluster(ns, name)
        if cluster is None:
            await asyncio.sleep(1)  # the index may lag the Deployment by a moment
            cluster = state.cluster(ns, name)
        labels, skip = state.namespace(ns)
        if cluster is None or skip:
            return
        policy = state.policy(labels)
        report = state.tracker.check(cluster, dict(body), policy, state.inventory())
        _publish_drift(state.tracker)
        if report is None or not report.new:
            return
        repair = policy.drift_repair and report.repair_patch is not None
        message = report.message(repairing=repair)
        kopf.warn(kopf.Body(cast("kopf.RawBody", cluster)), reason="ParityDrift", message=message)
        logger.warning(message)
        if repair:
            await asyncio.to_thread(_repair, report)
            kopf.info(
                kopf.Body(cast("kopf.RawBody", cluster)),
                reason="ParityRepaired",
                message="Scheduler Deployment patched",
            )

    return scheduler_deployment


def _publish_drift(tracker: drift.Tracker) -> None:
    metrics.DRIFT.clear()
    for ns, count in tracker.counts().items():
        metrics.DRIFT.labels(ns).set(count)


def _repair(report: drift.Report) -> None:
    """Patch the scheduler Deployment (this restarts the scheduler)."""
    if report.repair_patch:
        kube.patch_deployment(report.namespace, report.deployment, report.repair_patch)


def run(options: Options, *, json_logs: bool = False, verbose: bool = False) -> None:
    """Run the operator until it is stopped (SIGINT/SIGTERM)."""
    kopf.configure(
        verbose=verbose, log_format=kopf.LogFormat.JSON if json_logs else kopf.LogFormat.FULL
    )
    if not verbose:
        # aiohttp's access log (a line per admission request) and kopf's per-object INFO lines
        # (one per watch event) cost CPU at high rates; warnings and errors still show.
        logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
        logging.getLogger("kopf.objects").setLevel(logging.WARNING)
    # Standalone: kopf peering would pause a standby replica's watches, and with them the
    # indices its webhooks answer from. The chart runs the drift watch in one replica of its own.
    kopf.run(
        registry=registry(OperatorState(options)),
        clusterwide=True,
        standalone=True,
        liveness_endpoint=f"http://{options.addr}:{options.health_port}/healthz",
    )
