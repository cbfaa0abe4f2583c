"""AdmissionReview triage and answers without a server (e2e: admission/test_bad_input.py)."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest

from dask_gpu_parity.admission.decide import reviews

V1 = "admission.k8s.io/v1"
DEEP: dict[str, Any] = {}
_node = DEEP
for _ in range(150):
    _node["a"] = {}
    _node = _node["a"]


def _request(**changes: Any) -> dict[str, Any]:
    request = {
        "uid": "u-1",
        "resource": {"group": "kubernetes.dask.org", "version": "v1", "resource": "daskclusters"},
        "operation": "CREATE",
        "userInfo": {"username": "unit"},
        "object": {"metadata": {"name": "c"}},
    }
    return {"apiVersion": V1, "kind": "AdmissionReview", "request": {**request, **changes}}


def _without(key: str) -> dict[str, Any]:
    data = _request()
    del data["request"][key]
    return data


@pytest.mark.parametrize(
    ("data", "webhook", "allowed", "code", "text"),
    [
        pytest.param([], "mutate-daskcluster", False, 400, "found list", id="not-an-object"),
        pytest.param({"kind": "Pod"}, "mutate-daskcluster", False, 400, "kind", id="not-a-review"),
        pytest.param(
            {"apiVersion": V1, "kind": "AdmissionReview"},
            "mutate-daskcluster",
            False,
            400,
            "request is missing",
            id="no-request",
        ),
        pytest.param(_request(), "mutate-pods", False, 404, "/mutate-pods", id="unknown-path"),
        pytest.param(_request(uid=""), "mutate-daskcluster", False, 400, "uid", id="empty-uid"),
        pytest.param(
            _request(resource={"group": "apps"}),
            "mutate-daskcluster",
            False,
            400,
            "request.resource",
            id="partial-resource",
        ),
        pytest.param(
            _request(resource={"group": "", "version": "v1", "resource": "pods"}),
            "mutate-daskcluster",
            True,
            None,
            "does not check pods.core/v1",
            id="not-ours",
        ),
        pytest.param(
            _request(),
            "validate-daskjob",
            False,
            400,
            "checks daskjobs, not daskclusters",
            id="path",
        ),
        pytest.param(
            _request(operation="UPDATE"), "mutate-daskcluster", True, None, "", id="update"
        ),
        pytest.param(_without("userInfo"), "mutate-daskcluster", False, 400, "userInfo", id="user"),
        pytest.param(
            _request(object={"metadata": []}), "mutate-daskcluster", False, 400, "object", id="meta"
        ),
        pytest.param(_without("operation"), "mutate-daskcluster", False, 400, "operation", id="op"),
        pytest.param(
            _request(operation=["CREATE"]), "mutate-daskcluster", False, 400, "one of", id="op-list"
        ),
        pytest.param(
            _request(operation="create"), "mutate-daskcluster", False, 400, "CREATE", id="op-case"
        ),
        pytest.param(
            _request(object={"metadata": {}, "spec": DEEP}),
            "mutate-daskcluster",
            False,
            400,
            "deeper than 100",
            id="deep",
        ),
    ],
)
def test_triage_answers_what_the_rules_need_not_see(
    data: Any, webhook: str, allowed: bool, code: int | None, text: str
) -> None:
    answer = reviews.triage(data, reviews.route(webhook))
    assert answer is not None
    assert answer["kind"] == "AdmissionReview"
    response = answer["response"]
    assert response["allowed"] is allowed
    assert response.get("status", {}).get("code") == code
    shown = response.get("status", {}).get("message", "") + " ".join(response.get("warnings", []))
    assert text in shown


@pytest.mark.parametrize("webhook", sorted(reviews.ROUTES))
def test_triage_passes_a_create_of_the_paths_kind(webhook: str) -> None:
    route = reviews.ROUTES[webhook]
    resource = {"group": route.group, "version": route.version, "resource": route.plural}
    assert reviews.triage(_request(resource=resource), reviews.route(webhook)) is None


@pytest.mark.parametrize(
    ("path", "label", "kind", "mutating"),
    [
        pytest.param("mutate-daskcluster", "mutate-daskcluster", "daskcluster", True, id="mutate"),
        pytest.param(
            "validate-daskworkergroup",
            "validate-daskworkergroup",
            "daskworkergroup",
            False,
            id="validate",
        ),
        pytest.param("mutate-pods", "unknown", "-", False, id="unknown-path-bounded-label"),
        pytest.param("x" * 5000, "unknown", "-", False, id="long-path-bounded-label"),
    ],
)
def test_the_route_table_gives_each_path_its_labels(
    path: str, label: str, kind: str, mutating: bool
) -> None:
    route = reviews.route(path)
    assert (route.label, route.kind, route.mutating) == (label, kind, mutating)
    answer = reviews.answered(reviews.malformed(None, "bad"), route)
    assert (answer.webhook, answer.kind, answer.operation, answer.result) == (
        label,
        "-",
        "-",
        "malformed",
    )


def test_review_echoes_uid_and_version_and_encodes_the_patch() -> None:
    data = {**_request(), "apiVersion": "admission.k8s.io/v1beta1"}
    ops = [{"op": "add", "path": "/metadata/labels", "value": {"a": "b"}}]
    answer = reviews.review(data, allowed=True, warnings=["w"], patch=ops)
    assert answer["apiVersion"] == "admission.k8s.io/v1beta1"
    response = answer["response"]
    assert (response["uid"], response["warnings"], response["patchType"]) == (
        "u-1",
        ["w"],
        "JSONPatch",
    )
    assert json.loads(base64.b64decode(response["patch"])) == ops
    assert "patch" not in reviews.review(data, allowed=True)["response"]
    assert reviews.review(None, allowed=False)["apiVersion"] == V1


def test_failures_and_edge_results() -> None:
    failed = reviews.failed(_request(), RuntimeError("x" * 1000))
    message = failed["response"]["status"]["message"]
    assert message.startswith("dask-gpu-parity failed on this request (RuntimeError: xxx")
    assert "…); see the operator log" in message
    assert len(message) < 500
    route = reviews.route("mutate-daskcluster")

    def result(review: dict[str, Any]) -> str | None:
        return reviews.answered(review, route).result

    assert result(failed) == "error"
    assert result(reviews.too_large()) == "malformed"
    assert result(reviews.malformed(None, "bad")) == "malformed"
    assert result(reviews.review(_request(), allowed=False, code=422, message="no")) is None
    assert result(reviews.review(_request(), allowed=True)) is None


@pytest.mark.parametrize("body", [b"NaN", b"[Infinity]", b"{not json", b"\xff\xfe"])
def test_loads_rejects_what_is_not_json(body: bytes) -> None:
    with pytest.raises(ValueError):  # noqa: PT011  # every reason is a ValueError
        reviews.loads(body)
