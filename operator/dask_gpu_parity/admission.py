"""The operator: webhooks, indices and the drift watch (the only module importing kopf).

It runs beside the dask-kubernetes operator (also kopf) on the same resources, so it never uses
kopf's defaults for what it writes (reference/kopf.md §7): its own finalizer and annotation
prefix, no change handlers, timers or daemons on Dask resources (indices and ``on.event`` only),
nothing written to Dask resources, no peering (standalone). kopf watches, keeps the indices
and serves HTTPS (reloading renewed certificates); the AdmissionReviews themselves are answered
by ``_WebhookServer`` from those indices, at the paths ``webhooks.py`` names. The webhooks do
not watch Dask resources: a GPU DaskWorkerGroup's DaskCluster is read when the group is admitted.
"""

from __future__ import annotations

import asyncio
import copy
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

import aiohttp.web
import kopf

from . import decisions, drift, kube, metrics, reviews, webhooks
from .gpu import as_map
from .placement import GpuNode, Inventory
from .policy import POLICY_API_VERSION, Policy, PolicyError, load, select
from .resources import SKIP_ANNOTATION

__all__ = ["PREFIX", "Options", "run"]

PREFIX = "gpuparity.dask.org"
DASK = (webhooks.DASK_GROUP, webhooks.DASK_VERSION)
_GROUP, _VERSION = POLICY_API_VERSION.split("/")
log = logging.getLogger("dask_gpu_parity")


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


class _NoEssenceDiffBase(kopf.AnnotationsDiffBaseStorage):
    """Our own diff-base annotation, without the per-event essence.

    On every watch event kopf builds the object's "essence" (a deep copy of it) for
    change-detecting handlers. This operator has none, by design (``on.event`` and indices only,
    reference/kopf.md §7.3), so the copy is never read; under a stream of DaskCluster creates it
    was the largest CPU item of the watch. An empty essence is the truth for an operator that
    detects no changes: adding an ``on.create``/``on.update`` handler needs kopf's storage back.
    """

    def build(self, **_: Any) -> kopf.BodyEssence:
        return cast("kopf.BodyEssence", {})


_OPTIONS: Options | None = None
_INDEX_NAMES = ("policies", "namespaces", "gpu_nodes")  # the functions below; what webhooks read
_INDICES: dict[str, Any] = {}
TRACKER = drift.Tracker()


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **kwargs: Any) -> None:
    """Fix kopf's identity and servers in code, so no flag can be forgotten."""
    assert _OPTIONS is not None  # run() sets it before kopf starts
    # kopf passes its indices (empty now, filled as it watches) to startup handlers too: the
    # webhook server answers from them.
    _INDICES.update({name: kwargs[name] for name in _INDEX_NAMES})
    settings.persistence.finalizer = f"{PREFIX}/finalizer"
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=PREFIX)
    settings.persistence.diffbase_storage = _NoEssenceDiffBase(
        prefix=PREFIX, key="last-handled-configuration"
    )
    settings.admission.server = _WebhookServer(
        addr=_OPTIONS.addr,
        port=_OPTIONS.port,
        certfile=_OPTIONS.certfile,
        pkeyfile=_OPTIONS.keyfile,
        file_check_interval=30,  # reload renewed certificates
    )
    settings.admission.managed = None  # the chart (or the test harness) owns the configurations
    settings.posting.loggers = False
    settings.watching.server_timeout = 300
    settings.networking.request_timeout = 30
    metrics.serve(_OPTIONS.metrics_port, _OPTIONS.addr)

    def classes() -> dict[tuple[str, str], int]:
        nodes = _INDICES.get("gpu_nodes")
        inventory = _inventory(nodes) if nodes is not None else None
        grouped = inventory.classes() if inventory else {}
        return {(dc.driver, dc.cuda): len(members) for dc, members in grouped.items()}

    metrics.GPU_NODES.set_function_source(classes)


# Indices: what admission needs to know about the cluster, kept small. ``async`` although they
# never await: they run inline, not through kopf's thread pool (a thread hop per watch event).


@kopf.index(_GROUP, _VERSION, "daskgpupolicies")
async def policies(*, name: str, body: kopf.Body, logger: kopf.Logger, **_: Any) -> Any:
    """Valid DaskGPUPolicies by name; an invalid one is logged and ignored."""
    try:
        return {name: load(dict(body))}
    except PolicyError as exc:
        logger.error(f"DaskGPUPolicy {name} is invalid and ignored: {exc}")
        return None


@kopf.index("", "v1", "namespaces")
async def namespaces(
    *, name: str, labels: Mapping[str, str], annotations: Mapping[str, str], **_: Any
) -> Any:
    """Labels of every namespace, and whether it opted out."""
    flag = annotations.get(SKIP_ANNOTATION, labels.get(SKIP_ANNOTATION, ""))
    return {name: (dict(labels), str(flag).lower() == "true")}


@kopf.index("", "v1", "nodes")
async def gpu_nodes(*, name: str, body: kopf.Body, **_: Any) -> Any:
    """GPU nodes only, reduced to what placement needs; CPU-only nodes cost nothing."""
    node = GpuNode.from_node(body)
    return {name: node} if node is not None else None


async def dask_clusters(*, namespace: str | None, name: str, body: kopf.Body, **_: Any) -> Any:
    """DaskCluster specs, for the drift watch.

    Registered by :func:`run` only when the drift watch is on. The webhooks do not use it: a
    watch of every DaskCluster cost each webhook replica 2.3 to 2.9 ms of CPU per DaskCluster
    created (docs/performance.md), and an index lags the API server, so a worker group created
    right after its cluster could miss DGP015. Admission reads the one cluster it needs instead.
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


def _build_inventory(nodes: kopf.Index[str, GpuNode]) -> Inventory | None:
    found = tuple(node for key in nodes for node in nodes[key])
    return Inventory(tuple(sorted(found, key=lambda n: n.name))) if found else None


class _InventoryCache:
    """The inventory, rebuilt at most once per ``ttl`` seconds instead of per request.

    Building it walks and sorts every GPU node (milliseconds with thousands of nodes); node
    labels and capacity change rarely, and the index itself lags the cluster by about as much.
    """

    def __init__(self, ttl: float = 1.0) -> None:
        self.ttl = ttl
        self._built = -float("inf")
        self._inventory: Inventory | None = None

    def get(self, nodes: kopf.Index[str, GpuNode]) -> Inventory | None:
        now = time.monotonic()
        if now - self._built > self.ttl:
            self._inventory, self._built = _build_inventory(nodes), now
        return self._inventory


_INVENTORY = _InventoryCache()


def _inventory(nodes: kopf.Index[str, GpuNode]) -> Inventory | None:
    return _INVENTORY.get(nodes)


class _Indices:
    """Typed access to kopf's indices (handler keyword arguments, or ``_INDICES``)."""

    def __init__(self, kwargs: Mapping[str, Any]) -> None:
        self._policies: kopf.Index[str, Policy] = kwargs["policies"]
        self._namespaces: kopf.Index[str, Any] = kwargs["namespaces"]
        self._nodes: kopf.Index[str, GpuNode] = kwargs["gpu_nodes"]
        self._clusters: kopf.Index[tuple[str, str], Any] | None = kwargs.get("dask_clusters")

    def namespace(self, name: str) -> tuple[dict[str, str], bool]:
        """The namespace's labels and whether it opted out."""
        for labels, skip in self._namespaces.get(name, []):
            return labels, skip
        return {"kubernetes.io/metadata.name": name}, False

    def policy(self, labels: Mapping[str, str]) -> Policy:
        """The policy in force for a namespace with these labels."""
        return select((p for key in self._policies for p in self._policies[key]), labels)

    def inventory(self) -> Inventory | None:
        """The GPU nodes, or ``None`` before any was seen (placement rules off)."""
        return _inventory(self._nodes)

    def cluster(self, namespace: str, name: str) -> dict[str, Any] | None:
        """A DaskCluster as indexed (drift watch only), if it is."""
        if self._clusters is None:
            return None
        return next(iter(self._clusters.get((namespace, name), [])), None)


# Webhooks: CREATE only (the dask operator reads the scheduler spec once, at creation).
#
# Our server (``_WebhookServer`` below) answers them itself, with the indices kopf keeps. kopf's
# own admission engine deep-copies the whole object and re-diffs it with ``jsonpatch`` on every
# request, which cost more CPU than the parity rules; and it answers bad input with HTTP errors.


async def _admit(webhook: str, data: Mapping[str, Any]) -> dict[str, Any]:
    """The answer to a well-formed CREATE of a Dask resource sent to one of our webhooks.

    ``mutate-*`` gives the scheduler parity and says what changed and why, one warning per
    change; ``validate-*`` denies (enforce) or warns about errors left after mutation.
    """
    started = time.perf_counter()
    request = data["request"]
    obj = dict(request["object"])
    namespace = str(request.get("namespace") or as_map(obj.get("metadata")).get("namespace") or "")
    indices = _Indices(_INDICES)
    labels, skip = indices.namespace(namespace)
    policy, inventory = indices.policy(labels), indices.inventory()
    action, _, kind = webhook.partition("-")
    if action == "mutate":
        decision = decisions.mutate(obj, policy, inventory, namespace_skip=skip)
    else:
        name = decisions.cluster_to_read(obj, policy, namespace_skip=skip)
        cluster = await _read_cluster(namespace, name) if name else None
        decision = decisions.validate(obj, policy, inventory, cluster=cluster, namespace_skip=skip)
    answer = reviews.review(
        data,
        allowed=decision.denial is None,
        code=422,
        message=decision.denial or "",
        warnings=decision.warnings,
        patch=decision.patch,
    )
    _count(webhook, kind, decision, started)
    return answer


_READ_SECONDS = 2.0  # inside the webhooks' default timeoutSeconds (5), with room for the rules


async def _read_cluster(namespace: str, name: str) -> decisions.ClusterLookup:
    """The DaskCluster a GPU worker group joins, read from the API server now.

    A read, not an index: consistent with the create that just returned (a group created right
    after its cluster is checked against it), and no watch of every DaskCluster in every
    webhook replica. Bounded by ``_READ_SECONDS``, so the API server always gets an answer.
    """
    read = asyncio.to_thread(kube.read_dask_cluster, namespace, name, timeout=_READ_SECONDS)
    try:
        found = await asyncio.wait_for(read, _READ_SECONDS + 0.5)  # the thread's own limit failed
    except (TimeoutError, kube.ApiError) as exc:
        error = str(exc) or f"no answer within {_READ_SECONDS:.0f} s"
        log.warning(f"Reading DaskCluster {namespace}/{name} for DGP015 failed: {error}")
        return decisions.ClusterLookup(name, error=error)
    return decisions.ClusterLookup(name, found=found)


def _count(webhook: str, kind: str, decision: decisions.Decision, started: float) -> None:
    if decision.skipped:
        result = "skipped"
    elif decision.denial:
        result = "denied"
        for finding in decision.findings:
            metrics.DENIALS.labels(finding.code).inc()
    elif decision.patched is not None:
        result = "patched"
        for finding in decision.findings:
            if finding.fixable:
                metrics.FIXES.labels(finding.code).inc()
    else:
        result = "warned" if decision.warnings else "allowed"
    metrics.ADMISSIONS.labels(kind, "CREATE", webhook, result).inc()
    metrics.ADMISSION_SECONDS.labels(webhook).observe(time.perf_counter() - started)


# Drift watch: existing clusters whose scheduler Deployment lacks parity.


async def scheduler_deployment(
    *,
    event: kopf.RawEvent,
    body: kopf.Body,
    namespace: str | None,
    logger: kopf.Logger,
    **kwargs: Any,
) -> None:
    """Report (and, if the policy allows, repair) a drifted scheduler within seconds.

    Registered by :func:`run` only when the drift watch is on, so webhook-only replicas
    (``--no-drift``) do not stream the cluster's Deployments at all.
    """
    indices = _Indices(kwargs)
    ns = namespace or ""
    name = as_map(as_map(body.get("metadata")).get("labels")).get("dask.org/cluster-name")
    if event.get("type") == "DELETED" or not isinstance(name, str):
        TRACKER.forget(ns, str(name))
        _publish_drift()
        return
    cluster = indices.cluster(ns, name)
    if cluster is None:
        await asyncio.sleep(1)  # the index may lag the Deployment by a moment
        cluster = indices.cluster(ns, name)
    labels, skip = indices.namespace(ns)
    if cluster is None or skip:
        return
    policy = indices.policy(labels)
    report = TRACKER.check(cluster, dict(body), policy, indices.inventory())
    _publish_drift()
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


def _publish_drift() -> None:
    metrics.DRIFT.clear()
    for ns, count in TRACKER.counts().items():
        metrics.DRIFT.labels(ns).set(count)


def _repair(report: drift.Report) -> None:
    """Patch the scheduler Deployment (this restarts the scheduler)."""
    if report.repair_patch:
        kube.patch_deployment(report.namespace, report.deployment, report.repair_patch)


# The HTTP edge: every POST is answered with an AdmissionReview (``reviews.py`` builds them all),
# never an HTTP error.


class _TooLargeError(Exception):
    """A request body over ``reviews.MAX_BODY``."""


async def _read(request: aiohttp.web.Request) -> bytes:
    """The body, up to ``reviews.MAX_BODY`` (aiohttp's own 1 MiB limit would lose the uid)."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.content.iter_chunked(1 << 16):
        size += len(chunk)
        if size > reviews.MAX_BODY:
            raise _TooLargeError
        chunks.append(chunk)
    return b"".join(chunks)


class _WebhookServer(kopf.WebhookServer):
    """kopf's HTTPS server (certificate reloading included) answering with the parity rules.

    Every POST gets a valid AdmissionReview back, whatever the body. kopf's admission engine
    (``fn``) is not used: it answers bad input with HTTP 400/404/500, allows a path without a
    handler id unchecked (reference/kopf.md §1.4), keeps a memo per object on UPDATE and DELETE,
    and rebuilds every patch from deep copies.
    """

    @staticmethod
    async def _serve(fn: kopf.WebhookFn, request: aiohttp.web.Request) -> aiohttp.web.Response:
        webhook = request.match_info.get("id", "")
        data: Any = None
        try:
            data = reviews.loads(await _read(request))
        except _TooLargeError:
            answer = reviews.too_large()
        except (ValueError, RecursionError) as exc:
            answer = reviews.malformed(None, f"the body is not JSON ({exc})")
        else:
            answer = reviews.triage(data, webhook) or await _admit_or_explain(webhook, data)
        result = reviews.edge_result(answer)
        if result is not None:  # the parity rules' answers are counted by _admit
            route = webhook if webhook in reviews.ROUTES else "unknown"  # bounded label values
            metrics.ADMISSIONS.labels("-", "-", route, result).inc()
        return aiohttp.web.json_response(answer)


async def _admit_or_explain(webhook: str, data: Mapping[str, Any]) -> dict[str, Any]:
    """``_admit``; an unexpected failure becomes a denial that says so (and is logged)."""
    try:
        return await _admit(webhook, data)
    except Exception as exc:
        log.exception(f"Webhook /{webhook} failed on request {reviews.review(data, allowed=False)}")
        return reviews.failed(data, exc)


def run(options: Options, *, json_logs: bool = False, verbose: bool = False) -> None:
    """Run the operator until it is stopped (SIGINT/SIGTERM)."""
    global _OPTIONS  # noqa: PLW0603  # kopf's startup handler reads it
    _OPTIONS = options
    kopf.configure(
        verbose=verbose, log_format=kopf.LogFormat.JSON if json_logs else kopf.LogFormat.FULL
    )
    if not verbose:
        # aiohttp's access log (a line per admission request) and kopf's per-object INFO lines
        # (one per watch event) cost CPU at high rates; warnings and errors still show.
        logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
        logging.getLogger("kopf.objects").setLevel(logging.WARNING)
    if options.drift:
        kopf.index(*DASK, "daskclusters")(dask_clusters)
        kopf.on.event("apps", "v1", "deployments", labels={"dask.org/component": "scheduler"})(
            scheduler_deployment
        )
    # Standalone: kopf peering would pause a standby replica's watches, and with them the
    # indices its webhooks answer from. The chart runs the drift watch in one replica of its own.
    kopf.run(
        clusterwide=True,
        standalone=True,
        liveness_endpoint=f"http://{options.addr}:{options.health_port}/healthz",
    )
