"""Kubernetes Events on DaskClusters, posted in the background by a few workers.

A first drift pass over a large fleet may have thousands to say at once; the queue takes them
without blocking the checks, and at most ``WORKERS`` POSTs are in flight, so the API server is
not flooded. A failed post is logged and dropped (an Event is a notice, the metric stays).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import socket
from collections.abc import Mapping
from typing import Any

from dask_gpu_parity.names import DISTRIBUTION

from .apiserver import ApiServer, ApiStatusError, ApiUnavailableError

__all__ = ["EventPoster"]

log = logging.getLogger("dask_gpu_parity")
WORKERS = 4
_MAX_MESSAGE = 1024  # what kubectl and the Events API are comfortable with


class EventPoster:
    """Queue Events; :meth:`run` posts them until cancelled."""

    def __init__(self, api: ApiServer) -> None:
        self.api = api
        self._queue: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
        self._instance = socket.gethostname()
        self.posted = 0
        self.failed = 0

    def post(self, ref: Mapping[str, Any], type_: str, reason: str, message: str) -> None:
        """Queue an Event about ``ref`` (an object with apiVersion, kind and metadata)."""
        meta = ref.get("metadata", {})
        if len(message) > _MAX_MESSAGE:
            message = message[: _MAX_MESSAGE - 3] + "..."
        now = dt.datetime.now(dt.UTC).isoformat()
        self._queue.put_nowait(
            {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {
                    "generateName": f"{meta.get('name', 'dask')}.",
                    "namespace": meta.get("namespace"),
                },
                "involvedObject": {
                    "apiVersion": ref.get("apiVersion"),
                    "kind": ref.get("kind"),
                    "name": meta.get("name"),
                    "namespace": meta.get("namespace"),
                    "uid": meta.get("uid"),
                },
                "type": type_,
                "reason": reason,
                "message": message,
                "source": {"component": DISTRIBUTION},
                "reportingComponent": DISTRIBUTION,
                "reportingInstance": self._instance,
                "firstTimestamp": now,
                "lastTimestamp": now,
                "count": 1,
            }
        )

    async def run(self) -> None:
        """Post queued Events with ``WORKERS`` workers."""
        workers = [asyncio.create_task(self._work()) for _ in range(WORKERS)]
        try:
            await asyncio.gather(*workers)
        finally:
            for worker in workers:
                worker.cancel()
            for worker in workers:
                with contextlib.suppress(asyncio.CancelledError):
                    await worker

    async def _work(self) -> None:
        while True:
            event = await self._queue.get()
            namespace = event["metadata"]["namespace"]
            try:
                await self.api.post(f"/api/v1/namespaces/{namespace}/events", event)
                self.posted += 1
            except (ApiStatusError, ApiUnavailableError) as exc:
                self.failed += 1
                log.warning(
                    f"Posting Event {event['reason']} on {event['involvedObject']['kind']} "
                    f"{namespace}/{event['involvedObject']['name']} failed: {exc}"
                )
