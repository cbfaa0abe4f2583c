"""``provingground.sdist``: a pinned sdist from a PEP 691 index, over real HTTP (a local index)."""

from __future__ import annotations

import hashlib
import http.server
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from provingground.sdist import FetchError, fetch_sdist

BODY = b"not really a tarball, but bytes with a known sha256"
SHA = hashlib.sha256(BODY).hexdigest()


@dataclass
class Served:
    """What the local index lists and serves; tests change it."""

    listed_sha: str | None = SHA
    body: bytes = BODY
    requests: int = 0


@pytest.fixture
def index(monkeypatch: pytest.MonkeyPatch) -> Iterator[Served]:
    """A local index serving ``demo-pkg`` 1.0's sdist."""
    served = Served()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # the stdlib's name
            served.requests += 1
            if self.path == "/simple/demo-pkg/":
                files = [
                    {"filename": "demo_pkg-1.0-py3-none-any.whl", "url": "../../f/w"},
                    {
                        "filename": "demo_pkg-1.0.tar.gz",
                        "url": "../../f/demo_pkg-1.0.tar.gz",
                        "hashes": {"sha256": served.listed_sha},
                    },
                ]
                self._send(json.dumps({"files": files}).encode(), "application/json")
            elif self.path == "/f/demo_pkg-1.0.tar.gz":
                self._send(served.body, "application/octet-stream")
            else:
                self.send_error(404)

        def _send(self, body: bytes, kind: str) -> None:
            self.send_response(200)
            self.send_header("Content-Type", kind)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("PIP_INDEX_URL", f"http://127.0.0.1:{server.server_address[1]}/simple")
    yield served
    server.shutdown()
    server.server_close()


def test_the_pinned_sdist_is_fetched_once_and_kept(index: Served, tmp_path: Path) -> None:
    archive = fetch_sdist("Demo.Pkg", "1.0", SHA, tmp_path)
    assert archive == tmp_path / "demo_pkg-1.0.tar.gz"
    assert archive.read_bytes() == BODY
    asked = index.requests
    assert fetch_sdist("demo-pkg", "1.0", SHA, tmp_path) == archive
    assert index.requests == asked  # the kept file is checked, not fetched again


def test_an_index_listing_another_sha256_is_refused_before_downloading(
    index: Served, tmp_path: Path
) -> None:
    index.listed_sha = "0" * 64
    with pytest.raises(FetchError, match="not the pinned"):
        fetch_sdist("demo-pkg", "1.0", SHA, tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_served_bytes_of_another_sha256_leave_no_file(index: Served, tmp_path: Path) -> None:
    index.listed_sha = None
    index.body = b"tampered"
    with pytest.raises(FetchError, match="served sha256"):
        fetch_sdist("demo-pkg", "1.0", SHA, tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_a_version_the_index_does_not_list_is_named(index: Served, tmp_path: Path) -> None:
    with pytest.raises(FetchError, match=r"lists no demo_pkg-2\.0\.tar\.gz"):
        fetch_sdist("demo-pkg", "2.0", SHA, tmp_path)


def test_an_unreachable_index_is_one_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")
    with pytest.raises(FetchError, match=r"Cannot read http://127\.0\.0\.1:9/simple/demo-pkg/"):
        fetch_sdist("demo-pkg", "1.0", SHA, tmp_path)
