"""The operator: kopf webhooks, indices and the drift watch (the only module importing kopf).

It runs beside the dask-kubernetes operator (also kopf) on the same resources, so it never uses
kopf's defaults for what it writes (reference/kopf.md §7): its own finalizer and annotation
prefix, no change handlers, timers or daemons on Dask resources (webhooks, indices and
``on.event`` only), nothing written to Dask resources, its own peering (or none).
"""

from __future__ import annotations

import asyncio
import copy
import json
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, cast

import aiohttp.web
import kopf
from kubernetes import client, config

from . import decisions, drift, metrics, webhooks
from .gpu import as_map
from .placement import GpuNode, Inventory
from .policy import POLICY_API_VERSION, Policy, PolicyError, load, select
from .resources import SKIP_ANNOTATION

__all__ = ["PREFIX", "Options", "run"]

PREFIX = "gpuparity.dask.org"
DASK = ("kubernetes.dask.org", "v1")
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
    peering: str | None = None  # None: standalone (one replica runs the drift watch)
    drift: bool = True


_OPTIONS: Options | None = None
_INDICES: dict[str, Any] = {}
TRACKER = drift.Tracker()


@kopf.on.startup()
def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
    """Fix kopf's identity and servers in code, so no flag can be forgotten."""
    assert _OPTIONS is not None  # run() sets it before kopf starts
    settings.persistence.finalizer = f"{PREFIX}/finalizer"
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=PREFIX)
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
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


# Indices: what admission needs to know about the cluster, kept small.


@kopf.index(_GROUP, _VERSION, "daskgpupolicies")
def policies(*, name: str, body: kopf.Body, logger: kopf.Logger, **_: Any) -> Any:
    """Valid DaskGPUPolicies by name; an invalid one is logged and ignored."""
    try:
        return {name: load(dict(body))}
    except PolicyError as exc:
        logger.error(f"DaskGPUPolicy {name} is invalid and ignored: {exc}")
        return None


@kopf.index("", "v1", "namespaces")
def namespaces(
    *, name: str, labels: Mapping[str, str], annotations: Mapping[str, str], **_: Any
) -> Any:
    """Labels of every namespace, and whether it opted out."""
    flag = annotations.get(SKIP_ANNOTATION, labels.get(SKIP_ANNOTATION, ""))
    return {name: (dict(labels), str(flag).lower() == "true")}


@kopf.index("", "v1", "nodes")
def gpu_nodes(*, name: str, body: kopf.Body, **_: Any) -> Any:
    """GPU nodes only, reduced to what placement needs; CPU-only nodes cost nothing."""
    node = GpuNode.from_node(body)
    return {name: node} if node is not None else None


@kopf.index(*DASK, "daskclusters")
def dask_clusters(*, namespace: str | None, name: str, body: kopf.Body, **_: Any) -> Any:
    """DaskCluster specs, for worker-group validation and the drift watch."""
    meta = as_map(body.get("metadata"))
    kept = {k: copy.deepcopy(meta[k]) for k in ("name", "namespace", "uid") if k in meta}
    minimal = {
        "apiVersion": body.get("apiVersion"),
        "kind": body.get("kind"),
        "metadata": kept,
        "spec": copy.deepcopy(dict(as_map(body.get("spec")))),
    }
    return {(namespace or "", name): minimal}


def _inventory(nodes: kopf.Index[str, GpuNode]) -> Inventory | None:
    found = tuple(node for key in nodes for node in nodes[key])
    return Inventory(tuple(sorted(found, key=lambda n: n.name))) if found else None


class _Indices:
    """Typed access to the indices kopf passes to handlers as keyword arguments."""

    def __init__(self, kwargs: Mapping[str, Any]) -> None:
        self._policies: kopf.Index[str, Policy] = kwargs["policies"]
        self._namespaces: kopf.Index[str, Any] = kwargs["namespaces"]
        self._nodes: kopf.Index[str, GpuNode] = kwargs["gpu_nodes"]
        self._clusters: kopf.Index[tuple[str, str], Any] = kwargs["dask_clusters"]
        _INDICES["gpu_nodes"] = self._nodes

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
        """A DaskCluster as indexed, if it is."""
        return next(iter(self._clusters.get((namespace, name), [])), None)


# Webhooks: CREATE only (the dask operator reads the scheduler spec once, at creation).


def _answer(
    webhook: str,
    decision: decisions.Decision,
    *,
    started: float,
    warnings: list[str],
    patch: kopf.Patch | None = None,
) -> None:
    """Turn a decision into kopf's patch, warnings or AdmissionError, and count it."""
    warnings.extend(decision.warnings)
    if decision.patched is not None and patch is not None:
        fixed = decision.patched

        def replace(raw: kopf.RawBody) -> None:
            raw.clear()  # type: ignore[attr-defined]  # a plain dict at run time
            raw.update(copy.deepcopy(fixed))

        patch.fns.append(replace)
        for finding in decision.findings:
            if finding.fixable:
                metrics.FIXES.labels(finding.code).inc()
    if decision.skipped:
        result = "skipped"
    elif decision.denial:
        result = "denied"
    elif decision.patched is not None:
        result = "patched"
    else:
        result = "warned" if decision.warnings else "allowed"
    kind = webhook.split("-", 1)[1]
    metrics.ADMISSIONS.labels(kind, "CREATE", webhook, result).inc()
    metrics.ADMISSION_SECONDS.labels(webhook).observe(time.perf_counter() - started)
    if decision.denial:
        for finding in decision.findings:
            metrics.DENIALS.labels(finding.code).inc()
        raise kopf.AdmissionError(decision.denial, code=422)


@kopf.on.mutate(*DASK, "daskclusters", id="mutate-daskcluster", operations=["CREATE"])
@kopf.on.mutate(*DASK, "daskjobs", id="mutate-daskjob", operations=["CREATE"])
def mutate(
    *,
    body: kopf.Body,
    namespace: str | None,
    patch: kopf.Patch,
    warnings: list[str],
    **kwargs: Any,
) -> None:
    """Give the scheduler parity at creation; one warning per change says what and why."""
    started = time.perf_counter()
    indices = _Indices(kwargs)
    labels, skip = indices.namespace(namespace or "")
    decision = decisions.mutate(
        dict(body), indices.policy(labels), indices.inventory(), namespace_skip=skip
    )
    webhook = f"mutate-{str(body.get('kind', '')).lower()}"
    _answer(webhook, decision, started=started, warnings=warnings, patch=patch)


@kopf.on.validate(*DASK, "daskclusters", id="validate-daskcluster", operations=["CREATE"])
@kopf.on.validate(*DASK, "daskjobs", id="validate-daskjob", operations=["CREATE"])
@kopf.on.validate(*DASK, "daskworkergroups", id="validate-daskworkergroup", operations=["CREATE"])
def validate(
    *,
    body: kopf.Body,
    namespace: str | None,
    warnings: list[str],
    **kwargs: Any,
) -> None:
    """Deny (enforce) or warn about errors left after mutation."""
    started = time.perf_counter()
    indices = _Indices(kwargs)
    labels, skip = indices.namespace(namespace or "")
    resource = dict(body)
    cluster = None
    if resource.get("kind") == "DaskWorkerGroup":
        name = as_map(resource.get("spec")).get("cluster")
        cluster = indices.cluster(namespace or "", name) if isinstance(name, str) else None
    decision = decisions.validate(
        resource,
        indices.policy(labels),
        indices.inventory(),
        cluster=cluster,
        namespace_skip=skip,
    )
    webhook = f"validate-{str(resource.get('kind', '')).lower()}"
    _answer(webhook, decision, started=started, warnings=warnings)


# Drift watch: existing clusters whose scheduler Deployment lacks parity.


@kopf.on.event("apps", "v1", "deployments", labels={"dask.org/component": "scheduler"})
async def scheduler_deployment(
    *,
    event: kopf.RawEvent,
    body: kopf.Body,
    namespace: str | None,
    logger: kopf.Logger,
    **kwargs: Any,
) -> None:
    """Report (and, if the policy allows, repair) a drifted scheduler within seconds."""
    if _OPTIONS is None or not _OPTIONS.drift:
        return
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
    if not report.repair_patch:
        return
    try:
        config.load_incluster_config()  # type: ignore[no-untyped-call]
    except config.ConfigException:
        config.load_kube_config()  # type: ignore[no-untyped-call]
    client.AppsV1Api().patch_namespaced_deployment(
        report.deployment,
        report.namespace,
        report.repair_patch,
        _content_type="application/json-patch+json",
    )


# The HTTP edge: every POST is answered with an AdmissionReview, never an HTTP error.

_REVIEW_VERSIONS = ("admission.k8s.io/v1", "admission.k8s.io/v1beta1")
_ROUTES = dict((*webhooks.MUTATING, *webhooks.VALIDATING))  # handler id (path) -> plural
_MAX_MESSAGE = 400
_EDGE_RESULTS = {400: "malformed", 404: "malformed", 500: "error"}


def _review(
    data: Any, *, allowed: bool, message: str = "", code: int = 200, warning: str = ""
) -> dict[str, Any]:
    """An AdmissionReview answer built here, for a request kopf is not given or failed on."""
    review = as_map(data)
    uid = as_map(review.get("request")).get("uid")
    version = review.get("apiVersion")
    response: dict[str, Any] = {"uid": uid if isinstance(uid, str) else "", "allowed": allowed}
    if message:
        text = message if len(message) <= _MAX_MESSAGE else message[: _MAX_MESSAGE - 1] + "…"
        response["status"] = {"code": code, "message": text}
    if warning:
        response["warnings"] = [warning]
    return {
        "apiVersion": version if version in _REVIEW_VERSIONS else _REVIEW_VERSIONS[0],
        "kind": "AdmissionReview",
        "response": response,
    }


def _malformed(data: Any, what: str) -> dict[str, Any]:
    return _review(data, allowed=False, code=400, message=f"Malformed AdmissionReview: {what}")


def _triage(data: Any, webhook: str) -> dict[str, Any] | None:
    """The answer to a request kopf must not see, or ``None`` to let kopf answer it.

    kopf answers bad bodies with HTTP 400/404/500 (the API server then reports an opaque
    "failed calling webhook"), answers a path without a handler id with ``allowed: true``
    (fail-open, reference/kopf.md §1.4), and keeps a memo per object for UPDATE and DELETE.
    """
    if not isinstance(data, Mapping):
        return _malformed(data, f"expected a JSON object, found {type(data).__name__}")
    if data.get("kind") != "AdmissionReview" or data.get("apiVersion") not in _REVIEW_VERSIONS:
        return _malformed(data, "expected apiVersion admission.k8s.io/v1 and kind AdmissionReview")
    request = data.get("request")
    if not isinstance(request, Mapping):
        return _malformed(data, "request is missing or not an object")
    if webhook not in _ROUTES:
        known = ", ".join(f"/{handler}" for handler in _ROUTES)
        return _review(
            data,
            allowed=False,
            code=404,
            message=f"dask-gpu-parity has no webhook at path /{webhook}: point the webhook "
            f"configuration's clientConfig at one of {known}",
        )
    uid, resource = request.get("uid"), as_map(request.get("resource"))
    if not isinstance(uid, str) or not uid:
        return _malformed(data, "request.uid must be a non-empty string")
    group, version, plural = (resource.get(k) for k in ("group", "version", "resource"))
    if not all(isinstance(v, str) for v in (group, version, plural)):
        return _malformed(data, "request.resource needs group, version and resource strings")
    if (group, version) != DASK or plural not in _ROUTES.values():
        return _review(
            data,
            allowed=True,
            warning=f"dask-gpu-parity does not check {plural}.{group or 'core'}/{version}: "
            "allowed unchecked; limit the webhook configuration's rules to Dask resources",
        )
    if plural != _ROUTES[webhook]:
        return _review(
            data,
            allowed=False,
            code=400,
            message=f"Webhook /{webhook} checks {_ROUTES[webhook]}, not {plural}: fix the rules "
            "of the webhook configuration (dask-gpu-parity webhook-config prints them)",
        )
    if request.get("operation") != "CREATE":
        return _review(data, allowed=True)  # the dask operator reads the spec at creation only
    if not isinstance(request.get("userInfo"), Mapping):
        return _malformed(data, "request.userInfo is missing or not an object")
    body = request.get("object")
    if not isinstance(body, Mapping) or not isinstance(body.get("metadata", {}), Mapping):
        return _malformed(data, "request.object must be an object with metadata an object")
    return None


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


class _WebhookServer(kopf.WebhookServer):
    """kopf's HTTPS server (certificate reloading included), robust to any request body."""

    @staticmethod
    async def _serve(fn: kopf.WebhookFn, request: aiohttp.web.Request) -> aiohttp.web.Response:
        webhook = request.match_info.get("id", "")
        data: Any = None
        try:
            data = json.loads(await request.read(), parse_constant=_no_constants)
        except aiohttp.web.HTTPRequestEntityTooLarge:
            answer = _malformed(None, "the body is larger than the server accepts")
        except (ValueError, RecursionError) as exc:
            answer = _malformed(None, f"the body is not JSON ({exc})")
        else:
            answer = _triage(data, webhook) or await _delegate(fn, data, webhook, request)
        code = as_map(answer["response"].get("status")).get("code")
        if code in _EDGE_RESULTS:  # kopf's own answers are counted by the handlers
            route = webhook if webhook in _ROUTES else "unknown"  # bounded label values
            metrics.ADMISSIONS.labels("-", "-", route, _EDGE_RESULTS[code]).inc()
        return aiohttp.web.json_response(answer)


async def _delegate(
    fn: kopf.WebhookFn, data: Any, webhook: str, request: aiohttp.web.Request
) -> dict[str, Any]:
    """The answer of kopf; an unexpected failure becomes a denial that says so."""
    sslpeer = request.transport.get_extra_info("peercert") if request.transport else None
    try:
        answer = await fn(data, webhook=webhook, headers=dict(request.headers), sslpeer=sslpeer)
    except Exception as exc:
        log.exception(f"Webhook /{webhook} failed on request {_review(data, allowed=False)}")
        return _review(
            data,
            allowed=False,
            code=500,
            message=f"dask-gpu-parity failed on this request ({type(exc).__name__}: {exc}); "
            "see the operator log",
        )
    return dict(answer)


def run(options: Options, *, json_logs: bool = False, verbose: bool = False) -> None:
    """Run the operator until it is stopped (SIGINT/SIGTERM)."""
    global _OPTIONS  # noqa: PLW0603  # kopf's startup handler reads it
    _OPTIONS = options
    kopf.configure(
        verbose=verbose, log_format=kopf.LogFormat.JSON if json_logs else kopf.LogFormat.FULL
    )
    kopf.run(
        clusterwide=True,
        standalone=options.peering is None,
        peering_name=options.peering,
        liveness_endpoint=f"http://{options.addr}:{options.health_port}/healthz",
    )
