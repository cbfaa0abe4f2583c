"""Reading a worker group's DaskCluster at admission: every answer of a faked API server."""

from __future__ import annotations

import asyncio
import http.server
import json
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from dask_gpu_parity.admission import kube
from dask_gpu_parity.admission import server as webhook_server
from provingground.cluster import free_port

CLUSTER = {"apiVersion": "kubernetes.dask.org/v1", "kind": "DaskCluster", "metadata": {}}
PATH = "/apis/kubernetes.dask.org/v1/namespaces/team/daskclusters/"


class _Handler(http.server.BaseHTTPRequestHandler):
    """``name`` answers: ``found`` 200, ``forbidden`` 403, ``slow`` never (1 s), else 404."""

    def do_GET(self) -> None:
        name = self.path.removeprefix(PATH)
        if name == "slow":
            time.sleep(1)  # the client has given up by then
            return
        status = {"found": 200, "forbidden": 403}.get(name, 404)
        body = json.dumps(CLUSTER if status == 200 else {"kind": "Status", "code": status})
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *_: Any) -> None:
        pass


def _client(host: str) -> client.ApiClient:
    configuration = client.Configuration()
    configuration.host = host
    configuration.retries = 0
    return client.ApiClient(configuration)


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    """The faked API server's URL."""
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}"
    httpd.shutdown()
    httpd.server_close()


@pytest.fixture
def api(server: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    api_client = _client(server)
    monkeypatch.setattr(kube, "_api", lambda: api_client)
    yield
    api_client.close()


def test_found_and_not_found(api: None) -> None:
    assert kube.read_dask_cluster("team", "found", timeout=5) == CLUSTER
    assert kube.read_dask_cluster("team", "absent", timeout=5) is None


def test_refusal_says_what_the_api_server_answered(api: None) -> None:
    with pytest.raises(kube.ApiError, match="answered 403"):
        kube.read_dask_cluster("team", "forbidden", timeout=5)


def test_unreachable_api_server(monkeypatch: pytest.MonkeyPatch) -> None:
    api_client = _client(f"http://127.0.0.1:{free_port()}")
    monkeypatch.setattr(kube, "_api", lambda: api_client)
    with pytest.raises(kube.ApiError, match="did not answer"):
        kube.read_dask_cluster("team", "found", timeout=5)
    api_client.close()


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
    api: None, monkeypatch: pytest.MonkeyPatch, name: str, found: Any, error: str | None
) -> None:
    # The slow server answers after 1 s: with a 0.3 s bound the lookup gives up ("did not
    # answer") instead of waiting for it. The others answer at once, given time on a busy machine.
    monkeypatch.setattr(webhook_server, "_READ_SECONDS", 0.3 if name == "slow" else 10)
    lookup = asyncio.run(webhook_server._read_cluster("team", name))
    assert (lookup.name, lookup.found) == (name, found)
    assert (lookup.error or "").startswith(error or "")
    assert (lookup.error is None) == (error is None)
