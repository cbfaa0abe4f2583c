"""The kopf API that ``admission/runtime/server.py`` relies on still has the shape it expects.

The webhook server is ours; kopf only runs it as ``settings.admission.server``: a callable that
takes kopf's admission function and yields the webhooks' client configuration. kopf is pinned
to one minor version (pyproject.toml); this test fails first when a new kopf changes that.
"""

from __future__ import annotations

import inspect

import kopf
from kopf._core.engines import admission

from dask_gpu_parity.admission.runtime.server import WebhookServer


def test_kopf_calls_the_configured_server_with_its_admission_function() -> None:
    source = inspect.getsource(admission.admission_webhook_server)
    assert "settings.admission.server(webhookfn)" in source


def test_our_server_is_an_async_generator_of_client_configs() -> None:
    assert inspect.isasyncgenfunction(WebhookServer.__call__)
    assert list(inspect.signature(WebhookServer.__call__).parameters) == ["self", "fn"]
    assert kopf.WebhookClientConfig(url="https://127.0.0.1:9443")["url"].startswith("https://")
