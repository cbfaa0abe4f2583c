"""The kopf wiring: settings, startup and cleanup, and ``run`` (the only kopf entry).

kopf runs the webhook server (``server.py``: our HTTPS server and answers) and serves the
liveness endpoint; it watches nothing and posts no Events (``events.py`` does). What the
operator knows of the cluster comes from our own informers (``informer.py``, owned by
``state.py``): kopf's per-object indexing was superlinear in the number of objects, and it
served webhooks before its indices were filled. Every call to the API server goes through one
client (``apiserver.py``) on kopf's event loop; kopf logs in with the same connection.

It runs beside the dask-kubernetes operator (also kopf) on the same resources, so it never uses
kopf's defaults for what it writes (docs/operator.md, "Beside the dask operator"): its own
finalizer and annotation prefix, no handlers on Dask resources, nothing written to Dask
resources but Events, no peering (standalone). Handlers are registered on a registry of their
own by :func:`run`, with the state they share, so importing this module registers nothing.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

import kopf

from dask_gpu_parity.names import PREFIX

from . import collector, kube, metrics
from .apiserver import ApiClient
from .driftwatch import DriftWatch
from .events import EventPoster
from .reports import PolicyReports
from .server import WebhookServer
from .state import OperatorState, Options

__all__ = ["Options", "registry", "run"]


def _deployment_patcher(
    api: ApiClient,
) -> Callable[[str, str, list[dict[str, Any]]], Awaitable[None]]:
    """Patch a scheduler Deployment with a JSON Patch (this restarts the scheduler)."""

    async def patch(namespace: str, name: str, ops: list[dict[str, Any]]) -> None:
        await api.patch(f"/apis/apps/v1/namespaces/{namespace}/deployments/{name}", ops)

    return patch


def registry(state: OperatorState) -> kopf.OperatorRegistry:
    """A kopf registry with this operator's activities, bound to ``state``."""
    reg = kopf.OperatorRegistry()
    options = state.options
    api: list[ApiClient] = []

    @kopf.on.startup(registry=reg)
    async def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
        """Fix kopf's identity and servers in code, so no flag can be forgotten; start watching."""
        settings.persistence.finalizer = f"{PREFIX}/finalizer"
        settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=PREFIX)
        settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(
            prefix=PREFIX, key="last-handled-configuration"
        )
        api.append(ApiClient(kube.connection()))
        settings.admission.server = WebhookServer(
            state,
            api[0],
            addr=options.addr,
            port=options.port,
            certfile=options.certfile,
            keyfile=options.keyfile,
        )
        settings.admission.managed = None  # the chart (or the test harness) owns them
        settings.posting.enabled = False  # our Events go through events.py
        settings.networking.request_timeout = 30
        metrics.serve(options.metrics_port, options.addr)
        if options.drift:
            reports = PolicyReports(api[0]) if options.policy_reports else None
            state.drift = DriftWatch(
                state, EventPoster(api[0]), _deployment_patcher(api[0]), reports
            )
        state.start(api[0])

    @kopf.on.login(registry=reg)
    def login(**_: Any) -> kopf.ConnectionInfo:
        """Credentials for kopf's own calls (API discovery): the operator's connection."""
        found = kube.connection()
        scheme, token = (found.authorization() or "").partition(" ")[::2]
        if not token:  # a bare token, with no scheme (RFC 7235)
            scheme, token = "", scheme
        return kopf.ConnectionInfo(
            server=found.server,
            ca_path=found.ca_file,
            insecure=not found.verify,
            scheme=scheme or None,
            token=token or None,
            certificate_path=found.cert_file,
            private_key_path=found.key_file,
        )

    @kopf.on.cleanup(registry=reg)
    async def stop(**_: Any) -> None:
        """Stop the informers and the drift watch; close the API session."""
        await state.stop()
        for server in api:
            await server.close()

    return reg


def run(options: Options, *, json_logs: bool = False, verbose: bool = False) -> None:
    """Run the operator until it is stopped (SIGINT/SIGTERM)."""
    started = time.monotonic()
    collector.configure()
    kopf.configure(
        verbose=verbose, log_format=kopf.LogFormat.JSON if json_logs else kopf.LogFormat.FULL
    )
    if not verbose:
        # aiohttp's access log (a line per admission request) costs CPU at high rates;
        # warnings and errors still show.
        logging.getLogger("aiohttp.access").setLevel(logging.WARNING)
        logging.getLogger("kopf.objects").setLevel(logging.WARNING)
    # Standalone: kopf peering would pause a standby replica. The chart runs the drift watch in
    # one replica of its own, the webhooks with --no-drift.
    kopf.run(
        registry=registry(OperatorState(options, started=started)),
        clusterwide=True,
        standalone=True,
        liveness_endpoint=f"http://{options.addr}:{options.health_port}/healthz",
    )
