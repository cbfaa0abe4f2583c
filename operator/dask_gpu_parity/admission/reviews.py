"""AdmissionReviews in and out: which requests the parity rules must see, and every answer.

Pure, like ``decisions.py`` beside it: no kopf, no HTTP server. The webhook server (``server.py``)
reads the body, asks :func:`triage` whether the rules must see it, and sends what this module
builds, so the API server gets a valid AdmissionReview back whatever it sent: bad input is
denied with what is wrong (fail-closed, like ``failurePolicy: Fail``), never an HTTP error.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from typing import Any

from dask_gpu_parity.core.patch import Operation
from dask_gpu_parity.core.plain import MAX_DEPTH, as_map, deeper_than, truncate
from dask_gpu_parity.names import DASK_GROUP, DASK_VERSION

from . import configurations
from .decisions import Decision

__all__ = [
    "MAX_BODY",
    "ROUTES",
    "decided",
    "edge_result",
    "failed",
    "loads",
    "malformed",
    "review",
    "too_large",
    "triage",
]

ROUTES = dict((*configurations.MUTATING, *configurations.VALIDATING))  # handler id (path) -> plural
MAX_BODY = 16 << 20  # the API server accepts requests up to 3 MiB
_DASK = (DASK_GROUP, DASK_VERSION)
_REVIEW_VERSIONS = ("admission.k8s.io/v1", "admission.k8s.io/v1beta1")
_OPERATIONS = ("CREATE", "UPDATE", "DELETE", "CONNECT")  # admission.k8s.io/v1 Operation
_MAX_MESSAGE = 400
# The ``result`` label of answers made before the rules ran, by their status code.
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
        response["patch"] = base64.b64encode(json.dumps(list(patch)).encode()).decode()
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


def edge_result(answer: Mapping[str, Any]) -> str | None:
    """``malformed`` or ``error`` for an answer made before the rules ran, else ``None``.

    The rules' own answers are counted where they are made, with their kind and webhook.
    """
    code = as_map(as_map(answer.get("response")).get("status")).get("code")
    return _EDGE_RESULTS.get(code) if isinstance(code, int) else None


def triage(data: Any, webhook: str) -> dict[str, Any] | None:
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
    if webhook not in ROUTES:
        known = ", ".join(f"/{handler}" for handler in ROUTES)
        return review(
            data,
            allowed=False,
            code=404,
            message=f"dask-gpu-parity has no webhook at path /{webhook[:100]}: point the webhook "
            f"configuration's clientConfig at one of {known}",
        )
    uid, resource = request.get("uid"), as_map(request.get("resource"))
    if not isinstance(uid, str) or not uid:
        return malformed(data, "request.uid must be a non-empty string")
    group, version, plural = (resource.get(k) for k in ("group", "version", "resource"))
    if not all(isinstance(v, str) for v in (group, version, plural)):
        return malformed(data, "request.resource needs group, version and resource strings")
    if (group, version) != _DASK or plural not in ROUTES.values():
        return review(
            data,
            allowed=True,
            warnings=[
                f"dask-gpu-parity does not check {plural}.{group or 'core'}/{version}: allowed "
                "unchecked; limit the webhook configuration's rules to Dask resources"
            ],
        )
    if plural != ROUTES[webhook]:
        return review(
            data,
            allowed=False,
            code=400,
            message=f"Webhook /{webhook} checks {ROUTES[webhook]}, not {plural}: fix the rules "
            "of the webhook configuration (dask-gpu-parity webhook-config prints them)",
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
