"""The webhook server: every POST answered with an AdmissionReview, from the operator's state.

kopf runs it (``settings.admission.server`` takes any callable that yields the webhooks' client
configuration); the HTTPS server, its TLS and the answers are ours. kopf's own server is not
used: it reloads a renewed certificate by closing its port and connections (requests in that
gap fail, ``tls.py``); and kopf's admission engine deep-copies the whole object and re-diffs it
with ``jsonpatch`` on every request (more CPU than the parity rules), answers bad input with
HTTP 400/404/500, allows a path without a handler id unchecked and keeps a memo per object.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Mapping
from typing import Any

import aiohttp.web
import kopf

from dask_gpu_parity.admission.decide import decisions, reviews
from dask_gpu_parity.core.plain import as_map
from dask_gpu_parity.names import DASK_GROUP, DASK_VERSION

from . import metrics
from .apiserver import ApiClient, ApiError, NotFound
from .state import OperatorState
from .tls import RELOAD_SECONDS, ServingTLS

__all__ = ["READ_SECONDS", "WebhookServer", "read_cluster"]

log = logging.getLogger("dask_gpu_parity")
# A request's body must arrive within this, below the webhooks' default timeoutSeconds (5): the
# API server has given up on the request by then anyway.
BODY_SECONDS = 4.0
READ_SECONDS = 2.0  # inside the webhooks' default timeoutSeconds (5), with room for the rules
_JSON = "application/json"
_LOADING = (
    "dask-gpu-parity is still listing nodes, namespaces and policies: this resource was not "
    "checked. Recreate it to have it checked"
)


class _TooLargeError(Exception):
    """A request body over ``reviews.MAX_BODY``."""


class WebhookServer:
    """HTTPS on one port for the operator's life, answering with the parity rules.

    Webhooks act on CREATE only (the dask operator reads the scheduler spec once, at creation).
    Every POST gets a valid AdmissionReview back, whatever the body. A renewed certificate is
    served to new connections within ``reload_seconds``, with the port left open (``tls.py``).
    """

    def __init__(
        self,
        state: OperatorState,
        api: ApiClient,
        *,
        addr: str,
        port: int,
        certfile: str,
        keyfile: str,
        reload_seconds: float = RELOAD_SECONDS,
    ) -> None:
        self.state = state
        self.api = api
        self.addr, self.port = addr, port
        self.certfile, self.keyfile = certfile, keyfile
        self.reload_seconds = reload_seconds
        self.tls: ServingTLS | None = None

    async def __call__(self, fn: kopf.WebhookFn) -> AsyncIterator[kopf.WebhookClientConfig]:
        """Listen once nodes, namespaces and policies are listed in full; serve until cancelled.

        Until then the port is closed, so the readiness probe (a TCP connect) fails, the
        Service sends requests to other replicas, and nothing is admitted, denied or pinned
        from a partial inventory or without a policy that exists. kopf's admission function
        ``fn`` is not called: the answers are this class's.
        """
        await self.state.ready.wait()
        self.tls = tls = ServingTLS(self.certfile, self.keyfile)
        app = aiohttp.web.Application()
        app.add_routes([aiohttp.web.post("/{id:.*}", self._serve)])
        runner = aiohttp.web.AppRunner(app, handle_signals=False)
        await runner.setup()
        reload = asyncio.create_task(tls.watch(self.reload_seconds), name="tls reload")
        try:
            site = aiohttp.web.TCPSite(
                runner, self.addr, self.port, ssl_context=tls.context, reuse_address=True
            )
            await site.start()
            # kopf's managed webhook configurations are off: nothing reads this but its logs.
            yield kopf.WebhookClientConfig(url=f"https://{self.addr}:{self.port}")
            await asyncio.Event().wait()  # serve until kopf cancels this at shutdown
        finally:
            reload.cancel()
            await runner.cleanup()

    async def _serve(self, request: aiohttp.web.Request) -> aiohttp.web.Response:
        route = reviews.route(request.match_info.get("id", ""))
        data: Any = None
        started = 0.0
        try:
            data = reviews.loads(await asyncio.wait_for(_read(request), BODY_SECONDS))
        except _TooLargeError:
            answer = reviews.answered(reviews.too_large(), route)
        except TimeoutError:  # a slow or half-sent body holds no connection for long
            answer = reviews.answered(
                reviews.malformed(None, f"the body did not arrive within {BODY_SECONDS:g} s"),
                route,
            )
        except (ValueError, RecursionError) as exc:
            answer = reviews.answered(
                reviews.malformed(None, f"the body is not JSON ({exc})"), route
            )
        else:
            triaged = reviews.triage(data, route)
            if triaged is not None:
                answer = reviews.answered(triaged, route)
            else:
                started = time.perf_counter()
                answer = await self._admit_or_explain(route, data)
        metrics.count(answer, seconds=time.perf_counter() - started)
        return aiohttp.web.Response(body=reviews.dumps(answer.review), content_type=_JSON)

    async def _admit_or_explain(
        self, route: reviews.Route, data: Mapping[str, Any]
    ) -> reviews.Answer:
        """``_admit``; an unexpected failure becomes a denial that says so (and is logged)."""
        try:
            return await self._admit(route, data)
        except Exception as exc:
            log.exception(
                f"Webhook /{route.path} failed on request {reviews.review(data, allowed=False)}"
            )
            return reviews.answered(reviews.failed(data, exc), route)

    async def _admit(self, route: reviews.Route, data: Mapping[str, Any]) -> reviews.Answer:
        """The answer to a well-formed CREATE of a Dask resource sent to one of our webhooks.

        ``mutate-*`` gives the scheduler parity and says what changed and why, one warning per
        change; ``validate-*`` denies (enforce) or warns about errors left after mutation.
        """
        request = data["request"]
        obj = dict(request["object"])
        meta_namespace = as_map(obj.get("metadata")).get("namespace")
        namespace = str(request.get("namespace") or meta_namespace or "")
        state = self.state
        if not state.ready.is_set():  # never, as it does not listen before; but never a verdict
            return reviews.answered(reviews.review(data, allowed=True, warnings=(_LOADING,)), route)
        labels, skip = state.namespace(namespace)
        policy, inventory = state.policy(labels), state.inventory()
        classes = state.device_classes()
        if route.mutating:
            decision = decisions.mutate(
                obj, policy, inventory, namespace_skip=skip, classes=classes, kube=state.kube
            )
        else:
            name = decisions.cluster_to_read(obj, policy, namespace_skip=skip, classes=classes)
            cluster = await read_cluster(self.api, namespace, name) if name else None
            decision = decisions.validate(
                obj, policy, inventory, cluster=cluster, namespace_skip=skip, classes=classes
            )
        return reviews.ruled(data, route, decision)


async def _read(request: aiohttp.web.Request) -> bytes:
    """The body, up to ``reviews.MAX_BODY`` (aiohttp's own 1 MiB limit would lose the uid)."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.content.iter_chunked(1 << 16):
        size += len(chunk)
        if size > reviews.MAX_BODY:
            raise _TooLargeError
        chunks.append(chunk)
    return b"".join(chunks)


async def read_cluster(
    api: ApiClient, namespace: str, name: str, *, timeout: float = READ_SECONDS
) -> decisions.ClusterLookup:
    """The DaskCluster a GPU worker group joins, read from the API server now.

    A read, not an index: consistent with the create that just returned (a group created right
    after its cluster is checked against it), and no watch of every DaskCluster in every
    webhook replica. Bounded by ``timeout``, so the API server always gets an answer.
    """
    path = f"/apis/{DASK_GROUP}/{DASK_VERSION}/namespaces/{namespace}/daskclusters/{name}"
    try:
        found = await api.get(path, timeout=timeout)
    except NotFound:
        return decisions.ClusterLookup(name, found=None)
    except ApiError as exc:
        if exc.status:
            error = f"the API server answered {exc.status} {exc.reason}"
        else:
            error = f"the API server did not answer ({exc.reason})"
        log.warning(f"Reading DaskCluster {namespace}/{name} for DGP015 failed: {error}")
        return decisions.ClusterLookup(name, error=error)
    return decisions.ClusterLookup(name, found=found)
