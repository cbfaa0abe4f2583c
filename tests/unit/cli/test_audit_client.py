"""audit against an HTTP API server that answers as Kubernetes does (recorded answers): paging,
resource types not served, 401/403, an unreachable server, no kubeconfig. The CLI runs in
process (main), exit codes and stderr as a user sees them.

Answers follow the API conventions: a List's metadata.continue for the next page
(https://kubernetes.io/docs/reference/using-api/api-concepts/#retrieving-large-results-sets-in-chunks)
and a Status object with reason Forbidden for a verb RBAC does not grant
(https://kubernetes.io/docs/reference/using-api/api-concepts/#resource-errors).
"""

from __future__ import annotations

import io
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest
import yaml

from dask_gpu_parity.cli import main
from tests.unit.helpers import example, nodes

FORBIDDEN = {
    "kind": "Status",
    "apiVersion": "v1",
    "status": "Failure",
    "message": 'nodes is forbidden: User "system:serviceaccount:audit:nobody" cannot list '
    'resource "nodes" in API group "" at the cluster scope',
    "reason": "Forbidden",
    "code": 403,
}


class Api:
    """Answers by path; a list of pages answers page by page (continue tokens)."""

    def __init__(self) -> None:
        self.answers: dict[str, Any] = {}
        self.requests: list[tuple[str, dict[str, list[str]]]] = []
        self.headers: list[str] = []
        self.arrived: dict[str, threading.Event] = {}  # set when the path is first requested
        self.held: dict[str, tuple[str, list[bool]]] = {}  # path: (wait for this path, waited?)


def _list(items: list[dict[str, Any]], token: str = "") -> dict[str, Any]:
    return {"kind": "List", "apiVersion": "v1", "metadata": {"continue": token}, "items": items}


@pytest.fixture
def api(tmp_path: Path) -> Iterator[tuple[Api, Path]]:
    state = Api()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            url = urlparse(self.path)
            query = parse_qs(url.query)
            state.requests.append((url.path, query))
            state.headers.append(self.headers.get("Authorization", ""))
            if url.path in state.arrived:
                state.arrived[url.path].set()
            if url.path in state.held:
                other, seen = state.held[url.path]
                seen.append(state.arrived[other].wait(timeout=5))
            answer = state.answers.get(url.path)
            status = 404
            body: Any = {"kind": "Status", "code": 404, "reason": "NotFound"}
            if isinstance(answer, tuple):
                status, body = answer
            elif isinstance(answer, list):  # pages
                page = int(query.get("continue", ["0"])[0])
                last = page == len(answer) - 1
                status, body = 200, _list(answer[page], "" if last else str(page + 1))
            elif answer is not None:
                status, body = 200, answer
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {"name": "c", "cluster": {"server": f"http://127.0.0.1:{server.server_port}"}}
                ],
                "users": [{"name": "u", "user": {"token": "t0ken"}}],
                "contexts": [
                    {"name": "ctx", "context": {"cluster": "c", "user": "u", "namespace": "team-a"}}
                ],
                "current-context": "ctx",
            }
        )
    )
    yield state, kubeconfig
    server.shutdown()
    server.server_close()


def _run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["audit", *argv], out=out, err=err)
    return code, out.getvalue(), err.getvalue()


def _cluster(name: str) -> dict[str, Any]:
    cluster = example("gpu-cluster-tcp.yaml")
    cluster["metadata"] = {"name": name, "namespace": "team-a"}
    return cluster


def _serve_minimal(api: Api, clusters: list[list[dict[str, Any]]]) -> None:
    api.answers["/apis/kubernetes.dask.org/v1/namespaces/team-a/daskclusters"] = clusters
    api.answers["/api/v1/nodes"] = [nodes()]
    api.answers["/api/v1/namespaces/team-a"] = {"metadata": {"name": "team-a"}}
    api.answers["/api/v1/namespaces/team-a/pods"] = [[]]


def test_lists_page_by_page_in_the_contexts_namespace_with_its_token(api):
    state, kubeconfig = api
    _serve_minimal(state, [[_cluster("a")], [_cluster("b")], [_cluster("c")]])
    code, out, err = _run("--kubeconfig", str(kubeconfig), "-o", "json")
    assert code == 1, err  # the example's scheduler lacks a GPU: error findings
    assert [r["name"] for r in json.loads(out)["resources"]] == ["a", "b", "c"]
    pages = [q for p, q in state.requests if p.endswith("/daskclusters")]
    assert [q.get("continue") for q in pages] == [None, ["1"], ["2"]]
    assert {q["limit"][0] for q in pages} == {"500"}
    pods = next(q for p, q in state.requests if p.endswith("/pods"))
    assert pods["labelSelector"] == ["dask.org/cluster-name"]
    assert set(state.headers) == {"Bearer t0ken"}
    # DaskJobs, DaskWorkerGroups, DRA and DaskGPUPolicies are not served here (404): none read.
    assert "No DaskClusters" not in err


def test_forbidden_names_the_verb_and_resource(api):
    state, kubeconfig = api
    _serve_minimal(state, [[]])
    state.answers["/api/v1/nodes"] = (403, FORBIDDEN)
    code, out, err = _run("--kubeconfig", str(kubeconfig), "-n", "team-a")
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1
    assert err.startswith("error: Forbidden: cannot list nodes cluster-wide (nodes is forbidden:")
    assert "docs/operator.md#audit" in err


def test_refused_credentials_are_one_line(api):
    state, kubeconfig = api
    state.answers["/apis/kubernetes.dask.org/v1/daskclusters"] = (
        401,
        {"kind": "Status", "code": 401, "reason": "Unauthorized", "message": "Unauthorized"},
    )
    code, _, err = _run("--kubeconfig", str(kubeconfig), "-A")
    assert code == 2
    assert err == (
        "error: Unauthorized: the API server refused the kubeconfig's credentials (Unauthorized)\n"
    )


def test_no_dask_crd_is_a_usage_error(api):
    _, kubeconfig = api
    code, _, err = _run("--kubeconfig", str(kubeconfig), "-A")
    assert code == 2
    assert "serves no daskclusters.kubernetes.dask.org" in err


def test_unreachable_server_and_missing_kubeconfig_are_one_line(tmp_path):
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": "http://127.0.0.1:9"}}],
                "users": [{"name": "u", "user": {}}],
                "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "ctx",
            }
        )
    )
    code, _, err = _run("--kubeconfig", str(kubeconfig), "-A", "--request-timeout", "2")
    assert code == 2
    assert err.startswith("error: cannot reach the API server at http://127.0.0.1:9: ")
    assert err.count("\n") == 1
    code, _, err = _run("--kubeconfig", str(tmp_path / "missing"))
    assert code == 2
    assert err.startswith(f"error: no usable kubeconfig ({tmp_path / 'missing'}): ")
    assert err.count("\n") == 1
    code, _, err = _run("--kubeconfig", str(kubeconfig), "--context", "nope")
    assert code == 2
    assert err.startswith("error: no usable kubeconfig")


def test_collections_are_listed_at_the_same_time(api):
    # The DaskCluster list is answered only once the nodes are asked for: listed one after
    # the other, the nodes would be asked for only after the 5 s wait ran out.
    state, kubeconfig = api
    _serve_minimal(state, [[_cluster("a")], [_cluster("b")]])
    clusters = "/apis/kubernetes.dask.org/v1/namespaces/team-a/daskclusters"
    state.arrived["/api/v1/nodes"] = threading.Event()
    state.held[clusters] = ("/api/v1/nodes", waited := [])
    code, out, err = _run("--kubeconfig", str(kubeconfig), "-o", "json")
    assert code == 1, err
    assert waited == [True, True]
    assert [r["name"] for r in json.loads(out)["resources"]] == ["a", "b"]


def test_the_json_report_is_one_resource_a_line(api):
    state, kubeconfig = api
    _serve_minimal(state, [[_cluster("a"), _cluster("b")]])
    _, out, _ = _run("--kubeconfig", str(kubeconfig), "-o", "json")
    lines = out.splitlines()
    assert lines[0] == '{"resources": ['
    assert [json.loads(line.rstrip(","))["name"] for line in lines[1:3]] == ["a", "b"]
    assert json.loads(out)["summary"]["resources"] == 2
