"""Bad input straight to the webhook's HTTPS endpoint (loopback): always a valid AdmissionReview.

Never an HTTP error (the API server would report an opaque "failed calling webhook"), never a
hang: malformed bodies are denied with a message saying what is malformed, kinds we do not
check are allowed with a warning, and odd Dask objects get an answer from the parity rules.
"""

from __future__ import annotations

import base64
import copy
import json
import uuid
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from provingground.parity import example

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]
V1 = "admission.k8s.io/v1"
DASK_PATHS = (
    "/mutate-daskcluster",
    "/mutate-daskjob",
    "/validate-daskcluster",
    "/validate-daskjob",
    "/validate-daskworkergroup",
)
PLURALS = {
    "DaskCluster": "daskclusters",
    "DaskJob": "daskjobs",
    "DaskWorkerGroup": "daskworkergroups",
}


def review(
    obj: Any,
    *,
    plural: str = "daskclusters",
    group: str = "kubernetes.dask.org",
    operation: str = "CREATE",
    **request: Any,
) -> dict[str, Any]:
    """An AdmissionReview request as the API server sends it."""
    return {
        "apiVersion": V1,
        "kind": "AdmissionReview",
        "request": {
            "uid": str(uuid.uuid4()),
            "kind": {"group": group, "version": "v1", "kind": "Whatever"},
            "resource": {"group": group, "version": "v1", "resource": plural},
            "operation": operation,
            "userInfo": {"username": "e2e"},
            "namespace": "default",
            "object": obj,
            "dryRun": False,
            **request,
        },
    }


def check_answer(status: int, raw: bytes, sent: Any) -> dict[str, Any]:
    """Assert ``raw`` is a valid AdmissionReview answering ``sent``; return its response."""
    assert status == 200, (status, raw[:300])
    answer = json.loads(raw)
    assert answer["kind"] == "AdmissionReview"
    assert answer["apiVersion"] in (V1, "admission.k8s.io/v1beta1")
    response = answer["response"]
    assert isinstance(response["allowed"], bool)
    request = sent.get("request") if isinstance(sent, dict) else None
    uid = request.get("uid") if isinstance(request, dict) else None
    assert response["uid"] == (uid if isinstance(uid, str) else ""), response
    if not response["allowed"]:
        message = response["status"]["message"]
        assert isinstance(message, str), response
        assert message.strip(), response
        assert response["status"]["code"] != 500, response  # 500 = we failed, not the input
    for warning in response.get("warnings", []):
        assert isinstance(warning, str)
        assert warning.strip()
    if "patch" in response:
        assert response["patchType"] == "JSONPatch"
        assert isinstance(json.loads(base64.b64decode(response["patch"])), list)
    return response


def post(parity, path: str, body: Any) -> dict[str, Any]:
    raw = body if isinstance(body, bytes) else json.dumps(body).encode()
    status, answer = parity.post(path, raw)
    return check_answer(status, answer, body)


NO_WORKER = example("cpu-cluster.yaml", namespace="default", name="no-worker")
del NO_WORKER["spec"]["worker"]
MALFORMED = [
    pytest.param(b"", id="empty"),
    pytest.param(b"{not json", id="not-json"),
    pytest.param(b"\xff\xfe\x00garbage", id="not-utf8"),
    pytest.param(b"NaN", id="nan"),
    pytest.param(b"[" * 100_000 + b"]" * 100_000, id="deeply-nested"),
    pytest.param(b"[]", id="json-list"),
    pytest.param(b"{}", id="empty-object"),
    pytest.param(
        json.dumps({"apiVersion": V1, "kind": "AdmissionReview"}).encode(), id="no-request"
    ),
    pytest.param(
        json.dumps({"apiVersion": "v1", "kind": "Pod", "request": {}}).encode(), id="not-a-review"
    ),
]


@pytest.mark.parametrize("body", MALFORMED)
@pytest.mark.parametrize("path", ["/mutate-daskcluster", "/validate-daskworkergroup"])
def test_malformed_body_denied_with_message(parity, path, body):
    response = post(parity, path, body)
    assert not response["allowed"]
    assert response["status"]["code"] == 400
    assert response["status"]["message"].startswith("Malformed AdmissionReview: ")


@pytest.mark.parametrize(
    ("change", "what"),
    [
        ({"uid": None}, "request.uid"),
        ({"uid": 7}, "request.uid"),
        ({"resource": "daskclusters"}, "request.resource"),
        ({"userInfo": None}, "request.userInfo"),
        ({"object": None}, "request.object"),
        ({"object": ["a", "list"]}, "request.object"),
        ({"object": {"metadata": "text"}}, "request.object"),
    ],
    ids=[
        "no-uid",
        "uid-number",
        "resource-string",
        "no-userinfo",
        "no-object",
        "object-list",
        "metadata-string",
    ],
)
def test_review_with_missing_or_wrong_fields_denied(parity, change, what):
    body = review(example("gpu-cluster-tcp.yaml", namespace="default"))
    body["request"].update(change)
    body["request"] = {k: v for k, v in body["request"].items() if v is not None}
    response = post(parity, "/mutate-daskcluster", body)
    assert not response["allowed"]
    assert what in response["status"]["message"], response


def test_large_object_answered_oversized_body_denied(parity):
    obj = example("gpu-cluster-tcp.yaml", namespace="default")
    obj["metadata"]["annotations"] = {"padding": "x" * (3 << 20)}  # the API server's limit
    response = post(parity, "/mutate-daskcluster", review(obj))
    assert response["allowed"]
    assert response["warnings"]
    status, raw = parity.post("/mutate-daskcluster", b"[" + b" " * (20 << 20) + b"]")
    response = check_answer(status, raw, None)
    assert not response["allowed"]
    assert response["status"]["code"] == 413


@pytest.mark.parametrize(
    ("group", "plural"),
    [
        ("", "pods"),
        ("apps", "deployments"),
        ("example.com", "widgets"),
        ("kubernetes.dask.org", "daskautoscalers"),
    ],
)
def test_unknown_kind_allowed_with_warning(parity, group, plural):
    body = review(
        {"apiVersion": "v1", "kind": "Thing", "metadata": {"name": "x"}}, group=group, plural=plural
    )
    response = post(parity, "/mutate-daskcluster", body)
    assert response["allowed"]
    assert "patch" not in response
    (warning,) = response["warnings"]
    assert warning.startswith(f"dask-gpu-parity does not check {plural}.")


@pytest.mark.parametrize("path", ["/", "/mutate", "/mutate-daskcluster/extra", "/validate-pods"])
def test_unknown_path_denied_not_fail_open(parity, path):
    response = post(parity, path, review(example("gpu-cluster-tcp.yaml", namespace="default")))
    assert not response["allowed"]
    assert response["status"]["code"] == 404
    assert "has no webhook at path" in response["status"]["message"]
    assert "/mutate-daskcluster" in response["status"]["message"]


def test_resource_sent_to_another_kinds_webhook_denied(parity):
    group = example("gpu-workergroup.yaml", namespace="default")
    response = post(parity, "/validate-daskcluster", review(group, plural="daskworkergroups"))
    assert not response["allowed"]
    assert "checks daskclusters, not daskworkergroups" in response["status"]["message"]


@pytest.mark.parametrize("operation", ["UPDATE", "DELETE", "CONNECT"])
def test_other_operations_allowed_unchecked(parity, operation):
    body = review(example("gpu-cluster-tcp.yaml", namespace="default"), operation=operation)
    response = post(parity, "/validate-daskcluster", body)
    assert response == {"uid": body["request"]["uid"], "allowed": True}


def test_v1beta1_review_answered_in_kind(parity):
    body = review(example("gpu-cluster-tcp.yaml", namespace="default"))
    body["apiVersion"] = "admission.k8s.io/v1beta1"
    status, raw = parity.post("/mutate-daskcluster", json.dumps(body).encode())
    assert json.loads(raw)["apiVersion"] == "admission.k8s.io/v1beta1"
    assert check_answer(status, raw, body)["allowed"]


def test_daskcluster_missing_worker_answered(parity, kubectl, namespace):
    mutated = post(parity, "/mutate-daskcluster", review(NO_WORKER))
    assert mutated["allowed"]  # nothing to do for parity: no GPU workers
    # The validating webhook leaves the CRD schema to the API server, which checks it first.
    validated = post(parity, "/validate-daskcluster", review(NO_WORKER))
    assert validated == {"uid": validated["uid"], "allowed": True}
    # Through the API server: a clear error from the schema, not "failed calling webhook".
    doc = copy.deepcopy(NO_WORKER)
    doc["metadata"]["namespace"] = namespace
    result = kubectl("apply", "-f", "-", input=json.dumps(doc))
    assert result.rc != 0
    assert "spec.worker: Required value" in result.stderr, result.stderr
    assert "failed calling webhook" not in result.stderr


# Fuzzing: generated bodies, bounded and seeded (derandomize), loopback only.

_leaves = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.text(max_size=20)
    | st.floats(allow_nan=False, allow_infinity=False)
)
JSON = st.recursive(
    _leaves,
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4)
    ),
    max_leaves=20,
)
EXAMPLE_DOCS = [
    example(f, namespace="default")
    for f in (
        "gpu-cluster-tcp.yaml",
        "gpu-cluster-ucx.yaml",
        "gpu-daskjob.yaml",
        "gpu-workergroup.yaml",
        "cpu-cluster.yaml",
    )
]
_DELETE = object()


def _paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(node, dict):
        for key, value in node.items():
            out += _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            out += _paths(value, (*prefix, index))
    return out


def _mutate(doc: dict, edits: list[tuple[tuple, Any]]) -> Any:
    doc = copy.deepcopy(doc)
    for path, value in edits:
        if not path:
            return value if value is not _DELETE else {}
        parent: Any = doc
        for step in path[:-1]:
            try:
                parent = parent[step]
            except (KeyError, IndexError, TypeError):
                break
        else:
            try:
                if value is _DELETE:
                    del parent[path[-1]]
                else:
                    parent[path[-1]] = value
            except (KeyError, IndexError, TypeError):
                pass
    return doc


@st.composite
def dask_objects(draw) -> Any:
    """An example manifest with a few subtrees replaced by random JSON or deleted."""
    doc = draw(st.sampled_from(EXAMPLE_DOCS))
    paths = _paths(doc)
    edits = draw(st.lists(st.tuples(st.sampled_from(paths), JSON | st.just(_DELETE)), max_size=4))
    return _mutate(doc, edits)


@st.composite
def reviews(draw) -> Any:
    obj = draw(dask_objects() | JSON)
    kind = obj.get("kind") if isinstance(obj, dict) else None
    plural = PLURALS.get(kind, "daskclusters") if isinstance(kind, str) else "daskclusters"
    body = review(
        obj,
        plural=draw(st.just(plural) | st.sampled_from([*PLURALS.values(), "pods"])),
        operation=draw(st.sampled_from(["CREATE", "CREATE", "CREATE", "UPDATE", "DELETE"])),
        dryRun=draw(st.booleans()),
    )
    for key in draw(st.lists(st.sampled_from(["uid", "userInfo", "resource", "kind"]), max_size=1)):
        body["request"][key] = draw(JSON)  # now and then a field of the wrong type
    return body


BODIES = st.one_of(
    reviews().map(lambda b: json.dumps(b).encode()),
    reviews().map(lambda b: json.dumps(b).encode()),
    JSON.map(lambda b: json.dumps(b).encode()),
    st.binary(max_size=256),
)
PATHS = st.sampled_from(DASK_PATHS) | st.from_regex(r"/[a-z0-9./-]{0,24}", fullmatch=True)


@settings(
    max_examples=400,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(path=PATHS, body=BODIES)
def test_fuzz_always_valid_admission_review(parity, path, body):
    status, raw = parity.post(path, body)
    try:
        sent = json.loads(body)
    except ValueError:
        sent = None
    check_answer(status, raw, sent)


def test_operator_healthy_after_bad_input(parity):
    parity.check_alive()
    fixed, warnings = parity.create(
        example("gpu-cluster-tcp.yaml", namespace="default"), dry_run=True
    )
    assert warnings
    assert fixed["spec"]["scheduler"]["spec"]["initContainers"]
    assert parity.metric("dgp_admission_requests_total", result="malformed") > 0


def test_half_sent_body_answered_not_held_open(parity):
    """A body announced but never sent ends in an AdmissionReview, not a connection held open."""
    conn = parity.connection(timeout=30)  # a bound for the client, far above the server's limit
    try:
        conn.putrequest("POST", "/mutate-daskcluster")
        conn.putheader("Content-Type", "application/json")
        conn.putheader("Content-Length", "100000")
        conn.endheaders(b'{"apiVersion": "admission.k8s.io/v1", "kind": "Adm')
        response = conn.getresponse()
        answer = check_answer(response.status, response.read(), None)
    finally:
        conn.close()
    assert answer["allowed"] is False
    assert "the body did not arrive within" in answer["status"]["message"]
