"""The operator's API client against a faked API server over real HTTP: reads, patches, errors.

The answers follow the API conventions: an error is a ``Status`` object with ``code`` and
``message`` (https://kubernetes.io/docs/reference/using-api/api-concepts/#resource-errors), a
JSON Patch is sent as ``application/json-patch+json``
(https://kubernetes.io/docs/tasks/manage-kubernetes-objects/update-api-object-kubectl-patch/).
"""

from __future__ import annotations

import asyncio
import http.server
import json
import threading
import time
from collections.abc import Iterator
from itertools import count
from typing import Any

import pytest

from dask_gpu_parity.admission.runtime import apiserver
from dask_gpu_parity.admission.runtime import server as webhook_server
from dask_gpu_parity.admission.runtime.apiserver import ApiClient
from dask_gpu_parity.admission.runtime.kube import Connection
from provingground.cluster import free_port

CLUSTER = {"apiVersion": "kubernetes.dask.org/v1", "kind": "DaskCluster", "metadata": {}}
PATH = "/apis/kubernetes.dask.org/v1/namespaces/team/daskclusters/"
DEPLOYMENT = "/apis/apps/v1/namespaces/team/deployments/"
SEEN: list[tuple[str, str, str, str, bytes]] = []  # method, path, content type, authorization, body


class _Handler(http.server.BaseHTTPRequestHandler):
    """By name: ``found`` 200, ``forbidden`` 403, ``taken`` 409, ``slow`` never, else 404."""

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        SEEN.append(
            (
                self.command,
                self.path,
                self.headers.get("Content-Type", ""),
                self.headers.get("Authorization", ""),
                body,
            )
        )
        name = self.path.rsplit("/", 1)[1]
        if name == "slow":
            time.sleep(1)  # the client has given up by then
            return
        status = {"found": 200, "forbidden": 403, "taken": 409}.get(name, 404)
        if status == 200:
            answer: dict[str, Any] = CLUSTER
        else:
            answer = {"kind": "Status", "code": status}
            if name == "taken":
                answer["message"] = 'deployments.apps "taken" was modified: try again'
        data = json.dumps(answer).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_PATCH = do_POST = _answer

    def log_message(self, *_: Any) -> None:
        pass


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    """The faked API server's URL."""
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


def _run(connection: Connection, call: Any) -> Any:
    """``call(client)`` on a fresh event loop, with the session closed after."""

    async def main() -> Any:
        api = ApiClient(connection)
        try:
            return await call(api)
        finally:
            await api.close()

    return asyncio.run(main())


def test_reads_one_object(server: str) -> None:
    assert _run(Connection(server), lambda api: api.get(PATH + "found")) == CLUSTER


@pytest.mark.parametrize(
    ("name", "error", "status", "text"),
    [
        pytest.param("absent", apiserver.NotFound, 404, "404 Not Found", id="absent"),
        pytest.param("forbidden", apiserver.Forbidden, 403, "403 Forbidden", id="forbidden"),
        pytest.param(
            "taken",
            apiserver.Conflict,
            409,
            '409 deployments.apps "taken" was modified: try again',
            id="conflict-says-the-status-message",
        ),
    ],
)
def test_a_refusal_is_an_api_error_of_its_status(
    server: str, name: str, error: type[apiserver.ApiError], status: int, text: str
) -> None:
    with pytest.raises(error) as caught:
        _run(Connection(server), lambda api: api.get(PATH + name))
    assert (caught.value.status, str(caught.value)) == (status, text)


def test_no_answer_is_unreachable_with_status_zero() -> None:
    gone = Connection(f"http://127.0.0.1:{free_port()}")
    with pytest.raises(apiserver.Unreachable, match="ClientConnectorError") as caught:
        _run(gone, lambda api: api.get(PATH + "found"))
    assert caught.value.status == 0


def test_a_slow_answer_is_unreachable_after_the_timeout(server: str) -> None:
    started = time.monotonic()
    with pytest.raises(apiserver.Unreachable, match=r"no answer within 0\.2 s"):
        _run(Connection(server), lambda api: api.get(PATH + "slow", timeout=0.2))
    assert time.monotonic() - started < 0.9


def test_patch_sends_a_json_patch(server: str) -> None:
    ops = [{"op": "replace", "path": "/spec/replicas", "value": 1}]
    SEEN.clear()
    _run(Connection(server), lambda api: api.patch(DEPLOYMENT + "found", ops))
    sent = ("PATCH", DEPLOYMENT + "found", "application/json-patch+json", "", json.dumps(ops))
    assert [(*seen[:4], seen[4].decode()) for seen in SEEN] == [sent]
    with pytest.raises(apiserver.Conflict):
        _run(Connection(server), lambda api: api.patch(DEPLOYMENT + "taken", ops))


def test_every_request_asks_for_the_authorization_again(server: str) -> None:
    # An in-cluster token is refreshed by the loader: each request must send the current one.
    tokens = count()
    connection = Connection(server, authorization=lambda: f"Bearer t{next(tokens)}")

    async def two(api: ApiClient) -> None:
        await api.get(PATH + "found")
        await api.post("/api/v1/namespaces/team/events/found", {"kind": "Event"})

    SEEN.clear()
    _run(connection, two)
    assert [(method, auth) for method, _, _, auth, _ in SEEN] == [
        ("GET", "Bearer t0"),
        ("POST", "Bearer t1"),
    ]


@pytest.mark.parametrize(
    ("name", "found", "error"),
    [
        pytest.param("found", CLUSTER, None, id="found"),
        pytest.param("absent", None, None, id="absent"),
        pytest.param("forbidden", None, "the API server answered 403 Forbidden", id="forbidden"),
        pytest.param("slow", None, "the API server did not answer (", id="slow"),
    ],
)
def test_admission_always_gets_a_lookup_in_bounded_time(
    server: str, name: str, found: Any, error: str | None
) -> None:
    # The slow server answers after 1 s: with a 0.3 s bound the lookup gives up ("did not
    # answer") instead of waiting for it. The others answer at once, given time on a busy machine.
    timeout = 0.3 if name == "slow" else 10

    async def lookup(api: ApiClient) -> Any:
        return await webhook_server.read_cluster(api, "team", name, timeout=timeout)

    found_lookup = _run(Connection(server), lookup)
    assert (found_lookup.name, found_lookup.found) == (name, found)
    assert (found_lookup.error or "").startswith(error or "")
    assert (found_lookup.error is None) == (error is None)
