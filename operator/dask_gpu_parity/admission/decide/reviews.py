"""AdmissionReviews in and out: which requests the parity rules must see, and every answer.

Pure, like ``decisions.py`` beside it: no kopf, no HTTP server. The server (``server.py``)
finds the request's :class:`Route` in the one route table (:data:`ROUTES`), reads the body, asks
:func:`triage` whether the rules must see it, and sends what this module builds, so the API
server gets a valid AdmissionReview back whatever it sent: bad input is denied with what is
wrong (fail-closed, like ``failurePolicy: Fail``), never an HTTP error. Every :class:`Answer`
carries the labels ``/metrics`` counts it under (``metrics.count``).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from dask_gpu_parity.core.patch import Operation
from dask_gpu_parity.core.plain import MAX_DEPTH, as_map, deeper_than, truncate
from dask_gpu_parity.names import DASK_GROUP, DASK_VERSION

from . import configurations
from .decisions import Decision

__all__ = [
    "MAX_BODY",
    "ROUTES",
    "UNKNOWN",
    "Answer",
    "Route",
    "answered",
    "decided",
    "dumps",
    "failed",
    "loads",
    "malformed",
    "review",
    "route",
    "ruled",
    "too_large",
    "triage",
]

UNKNOWN = "unknown"  # the webhook label of every path without a route: label values stay bounded


@dataclass(frozen=True)
class Route:
    """One webhook path: what it checks, and the labels its answers are counted under."""

    path: str  # the handler id, e.g. "mutate-daskcluster"; as requested when unknown
    plural: str = ""  # the resource it checks, e.g. "daskclusters"; "" when there is no webhook
    kind: str = "-"  # the kind label, e.g. "daskcluster", "gateway-daskcluster"
    mutating: bool = False
    group: str = DASK_GROUP  # the resource's API group and version
    version: str = DASK_VERSION

    @property
    def resource(self) -> str:
        """The resource for messages: its plural, with its group when not the dask operator's."""
        return _named(self.group, self.plural)

    @property
    def label(self) -> str:
        """The webhook label: the path, or :data:`UNKNOWN` for a path with no webhook."""
        return self.path if self.plural else UNKNOWN


def _named(group: str, plural: str) -> str:
    return plural if group == DASK_GROUP else f"{plural}.{group}"


def _table() -> dict[str, Route]:
    routes = {}
    for handlers, mutating in ((configurations.MUTATING, True), (configurations.VALIDATING, False)):
        for path, resource in handlers:
            group, version, plural = configurations.api_of(resource)
            kind = path.split("-", 1)[1]  # mutate-gateway-daskcluster: gateway-daskcluster
            routes[path] = Route(path, plural, kind, mutating, group, version)
    return routes


ROUTES = _table()  # the one route table: handler id (the path) -> Route


def route(path: str) -> Route:
    """The route of a request path (without its leading ``/``); one with no webhook if none."""
    return ROUTES.get(path) or Route(path)


@dataclass(frozen=True)
class Answer:
    """An AdmissionReview to send, with the labels ``/metrics`` counts it under."""

    review: dict[str, Any]
    webhook: str  # the route's label
    result: (
        str | None
    )  # allowed, warned, patched, denied, skipped, malformed, error; None: uncounted
    kind: str = "-"  # "-" when answered before the rules ran
    operation: str = "-"
    decision: Decision | None = None  # the rules' decision (its findings are counted by code)


MAX_BODY = 16 << 20  # the API server accepts requests up to 3 MiB
_REVIEW_VERSIONS = ("admission.k8s.io/v1", "admission.k8s.io/v1beta1")
_OPERATIONS = ("CREATE", "UPDATE", "DELETE", "CONNECT")  # admission.k8s.io/v1 Operation
_MAX_MESSAGE = 400
# The ``result`` label of answers made before the rules ran, by their status code.
_CHECKED = frozenset((r.group, r.version, r.plural) for r in ROUTES.values())
_EDGE_RESULTS = {400: "malformed", 404: "malformed", 413: "malformed", 500: "error"}


def loads(body: bytes) -> Any:
    """The request body's JSON.

    Raises:
        ValueError: the body is not JSON; ``NaN`` and ``Infinity`` are not JSON either.
        RecursionError: the body nests too deep to read.
    """
    return json.loads(body, parse_constant=_no_constants)


def _no_constants(name: str) -> Any:
    raise ValueError(f"{name} is not valid JSON")


def dumps(value: Any) -> bytes:
    """Compact JSON (no spaces after separators): what the server sends and the patch it holds."""
    return json.dumps(value, separators=(",", ":")).encode()


def review(
    data: Any,
    *,
    allowed: bool,
    message: str = "",
    code: int = 200,
    warnings: Sequence[str] = (),
    patch: Sequence[Operation] = (),
) -> dict[str, Any]:
    """The AdmissionReview answering ``data`` (echoing its uid and API version when valid).

    A non-empty ``patch`` (a mutating webhook's JSON Patch) goes in base64, as the API
    server expects it.
    """
    asked = as_map(data)
    uid = as_map(asked.get("request")).get("uid")
    version = asked.get("apiVersion")
    response: dict[str, Any] = {"uid": uid if isinstance(uid, str) else "", "allowed": allowed}
    if message:
        response["status"] = {"code": code, "message": message}
    if warnings:
        response["warnings"] = list(warnings)
    if patch:
        response["patch"] = base64.b64encode(dumps(list(patch))).decode()
        response["patchType"] = "JSONPatch"
    return {
        "apiVersion": version if version in _REVIEW_VERSIONS else _REVIEW_VERSIONS[0],
        "kind": "AdmissionReview",
        "response": response,
    }


def decided(data: Any, decision: Decision) -> dict[str, Any]:
    """The AdmissionReview for a decision of the parity rules: a denial is code 422."""
    return review(
        data,
        allowed=decision.denial is None,
        code=422,
        message=decision.denial or "",
        warnings=decision.warnings,
        patch=decision.patch,
    )


def malformed(data: Any, what: str) -> dict[str, Any]:
    """The denial of a request that is not a valid AdmissionReview, saying ``what`` is wrong."""
    return review(data, allowed=False, code=400, message=f"Malformed AdmissionReview: {what}")


def too_large() -> dict[str, Any]:
    """The denial of a body over :data:`MAX_BODY` (unread, so no uid to echo)."""
    return review(
        None,
        allowed=False,
        code=413,
        message=f"Request body over {MAX_BODY >> 20} MiB: no API server sends such an "
        "AdmissionReview",
    )


def failed(data: Any, exc: Exception) -> dict[str, Any]:
    """The denial of a request the rules failed on unexpectedly (the log has the traceback)."""
    text = truncate(f"{type(exc).__name__}: {exc}", _MAX_MESSAGE)
    return review(
        data,
        allowed=False,
        code=500,
        message=f"dask-gpu-parity failed on this request ({text}); see the operator log",
    )


def answered(review: dict[str, Any], route: Route) -> Answer:
    """An answer made before the rules ran: counted ``malformed`` or ``error``, else not at all.

    The rules' own answers (:func:`ruled`) are counted with their kind and result.
    """
    code = as_map(as_map(review.get("response")).get("status")).get("code")
    result = _EDGE_RESULTS.get(code) if isinstance(code, int) else None
    return Answer(review, route.label, result)


def ruled(data: Any, route: Route, decision: Decision) -> Answer:
    """The answer of the parity rules to a CREATE sent to ``route``."""
    if decision.skipped:
        result = "skipped"
    elif decision.denial:
        result = "denied"
    elif decision.patched is not None:
        result = "patched"
    else:
        result = "warned" if decision.warnings else "allowed"
    return Answer(decided(data, decision), route.label, result, route.kind, "CREATE", decision)


def triage(data: Any, route: Route) -> dict[str, Any] | None:
    """The answer to a request the parity rules need not see, or ``None`` if they must.

    A malformed body, an unknown path or a resource sent to another kind's path is denied with
    what is wrong (fail-closed, like ``failurePolicy: Fail``); a resource that is not ours, and
    any operation but CREATE, is allowed unchecked.
    """
    if not isinstance(data, Mapping):
        return malformed(data, f"expected a JSON object, found {type(data).__name__}")
    if data.get("kind") != "AdmissionReview" or data.get("apiVersion") not in _REVIEW_VERSIONS:
        return malformed(data, "expected apiVersion admission.k8s.io/v1 and kind AdmissionReview")
    request = data.get("request")
    if not isinstance(request, Mapping):
        return malformed(data, "request is missing or not an object")
    if not route.plural:
        known = ", ".join(f"/{handler}" for handler in ROUTES)
        return review(
            data,
            allowed=False,
            code=404,
            message=f"dask-gpu-parity has no webhook at path /{route.path[:100]}: point the "
            f"webhook configuration's clientConfig at one of {known}",
        )
    uid, resource = request.get("uid"), as_map(request.get("resource"))
    if not isinstance(uid, str) or not uid:
        return malformed(data, "request.uid must be a non-empty string")
    group, version, plural = (resource.get(k) for k in ("group", "version", "resource"))
    if not all(isinstance(v, str) for v in (group, version, plural)):
        return malformed(data, "request.resource needs group, version and resource strings")
    if (group, version, plural) not in _CHECKED:
        return review(
            data,
            allowed=True,
            warnings=[
                f"dask-gpu-parity does not check {plural}.{group or 'core'}/{version}: allowed "
                "unchecked; limit the webhook configuration's rules to Dask resources"
            ],
        )
    if (group, plural) != (route.group, route.plural):
        return review(
            data,
            allowed=False,
            code=400,
            message=f"Webhook /{route.path} checks {route.resource}, not "
            f"{_named(str(group), str(plural))}: fix the rules of the webhook configuration "
            "(dask-gpu-parity webhook-config prints them)",
        )
    operation = request.get("operation")
    if operation not in _OPERATIONS:
        return malformed(data, f"request.operation must be one of {', '.join(_OPERATIONS)}")
    if operation != "CREATE":
        return review(data, allowed=True)  # the dask operator reads the spec at creation only
    if not isinstance(request.get("userInfo"), Mapping):
        return malformed(data, "request.userInfo is missing or not an object")
    body = request.get("object")
    if not isinstance(body, Mapping) or not isinstance(body.get("metadata", {}), Mapping):
        return malformed(data, "request.object must be an object with metadata an object")
    if deeper_than(body):
        return malformed(data, f"request.object nests deeper than {MAX_DEPTH} levels")
    return None
