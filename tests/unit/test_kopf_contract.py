"""The private kopf API that ``admission/server.py`` overrides still has the shape it expects.

kopf is pinned to one minor version (pyproject.toml); this test fails first when a new kopf
changes what the override relies on, before any e2e test would.
"""

from __future__ import annotations

import inspect

import kopf

from dask_gpu_parity.admission.server import WebhookServer


def test_kopf_calls_serve_on_the_instance_with_fn_and_request() -> None:
    source = inspect.getsource(kopf.WebhookServer.__call__)
    assert "self._serve(fn, request)" in source


def test_kopf_serve_takes_fn_and_request() -> None:
    signature = inspect.signature(kopf.WebhookServer._serve)
    assert list(signature.parameters) == ["fn", "request"]
    ours = inspect.signature(WebhookServer._serve)
    assert list(ours.parameters) == ["self", "fn", "request"]


def test_kopf_server_takes_the_settings_we_pass() -> None:
    parameters = inspect.signature(kopf.WebhookServer.__init__).parameters
    for name in ("addr", "port", "certfile", "pkeyfile", "file_check_interval"):
        assert name in parameters
