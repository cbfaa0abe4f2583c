"""Kubernetes Events on DaskClusters and Pods, posted in the background at a bounded rate.

A first drift pass over a large fleet may have thousands of Events to post at once. They are
queued (the checks never wait for the API server) and posted by ``WORKERS`` workers at most
``RATE`` a second after a burst of ``BURST``, as client-go's event recorder limits itself: the
API server is not flooded, and posting does not take the CPU the first pass needs. A queue that
is full drops new Events (counted); a failed post is logged and dropped: an Event is a notice,
the metrics stay right either way. An Event posted with a ``name`` of its own that the API
server already has (409 AlreadyExists: posted before the operator restarted) counts as there.

A queued Event is kept small, as a first pass may queue ``QUEUE`` of them: the object it is about
as a tuple of the strings its reference already holds, the time as a number, and the message
without the object's own name, whose rest is shared by every object with the same message (a
drift verdict shared by thousands of clusters stamped from one template). The Event's body is
built when it is posted.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from dask_gpu_parity.names import DISTRIBUTION

from .apiserver import ApiClient, ApiError, Conflict

__all__ = ["MAX_MESSAGE", "EventCounts", "EventPoster", "Events", "TokenBucket"]

log = logging.getLogger("dask_gpu_parity")
WORKERS = 4
RATE, BURST = 50.0, 100  # Events a second, and how many may go at once
QUEUE = 20_000  # Events waiting at most (about 300 bytes each, and the message's shared rest)
_SHARED = 4096  # message rests kept for sharing (forgotten all at once when there are more)
MAX_MESSAGE = 1024  # what kubectl and the Events API are comfortable with


class TokenBucket:
    """A token bucket: ``take()`` waits until an Event may be posted."""

    def __init__(
        self, rate: float, burst: int, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.rate, self.burst, self.clock = rate, burst, clock
        self.tokens = float(burst)
        self.stamp = clock()

    def delay(self) -> float:
        """Take a token and return 0, or return how long until there is one."""
        now = self.clock()
        self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now
        if self.tokens >= 1:
            self.tokens -= 1
            return 0.0
        return (1 - self.tokens) / self.rate

    async def take(self) -> None:
        """Wait until an Event may be posted, and take its token."""
        while (wait := self.delay()) > 0:
            await asyncio.sleep(wait)


@dataclass(frozen=True, slots=True)
class EventCounts:
    """What became of the Events so far (``dgp_events`` and ``dgp_events_pending``)."""

    posted: int = 0
    existing: int = 0  # a named Event the API server had already (409): posted before a restart
    failed: int = 0
    dropped: int = 0  # the queue was full
    pending: int = 0  # queued, not posted yet


class Events(Protocol):
    """Where the drift watch's Events go (:class:`EventPoster`): queued, then sent by ``run``."""

    def post(
        self,
        ref: Mapping[str, Any],
        type_: str,
        reason: str,
        message: str,
        *,
        name: str | None = None,
        field_path: str | None = None,
    ) -> None:
        """Queue an Event on ``ref``."""

    async def run(self) -> None:
        """Send queued Events until cancelled."""

    def counts(self) -> EventCounts:
        """What became of the Events so far."""


@dataclass(frozen=True, slots=True)
class _Queued:
    involved: tuple[Any, Any, Any, Any, Any]  # apiVersion, kind, name, namespace, uid
    type_: str
    reason: str
    message: tuple[str, str] | str  # (before, after) the object's name, or the whole message
    now: float  # time.time() when queued
    name: str | None
    field_path: str | None

    def text(self) -> str:
        """The message."""
        if isinstance(self.message, str):
            return self.message
        before, after = self.message
        return f"{before}{self.involved[2]}{after}"


class EventPoster:
    """Queue Events; :meth:`run` posts them until cancelled."""

    def __init__(self, api: ApiClient, *, rate: float = RATE, burst: int = BURST) -> None:
        self.api = api
        self._queue: asyncio.Queue[_Queued] = asyncio.Queue(QUEUE)
        self._bucket = TokenBucket(rate, burst)
        self._instance = socket.gethostname()
        self._shared: dict[str, str] = {}  # message parts, one copy each
        self.posted = 0
        self.existing = 0
        self.failed = 0
        self.dropped = 0

    def post(
        self,
        ref: Mapping[str, Any],
        type_: str,
        reason: str,
        message: str,
        *,
        name: str | None = None,
        field_path: str | None = None,
    ) -> None:
        """Queue an Event about ``ref`` (an object with apiVersion, kind and metadata).

        Args:
            ref: the object the Event is about.
            type_: ``Normal`` or ``Warning``.
            reason: a CamelCase word, e.g. ``ParityDrift``.
            message: what happened and what to do (cut to 1,024 characters).
            name: the Event's own name; without one the API server generates it. A name that
                is taken (409) counts as posted before, not as a failure.
            field_path: the part of the object, e.g. ``spec.initContainers{gpu-parity-check}``.
        """
        if self._queue.full():
            self.dropped += 1
            return
        meta = ref.get("metadata", {})
        involved = (
            ref.get("apiVersion"),
            ref.get("kind"),
            meta.get("name"),
            meta.get("namespace"),
            meta.get("uid"),
        )
        queued = _Queued(
            involved,
            type_,
            reason,
            self._parts(message, involved[2]),
            time.time(),
            name,
            field_path,
        )
        self._queue.put_nowait(queued)

    def _parts(self, message: str, name: Any) -> tuple[str, str] | str:
        """The message as what comes before and after the object's name, each part shared."""
        if not isinstance(name, str) or not name or name not in message:
            return message
        before, _, after = message.partition(name)
        if len(self._shared) >= _SHARED:
            self._shared.clear()
        before = self._shared.setdefault(before, before)
        return before, self._shared.setdefault(after, after)

    def counts(self) -> EventCounts:
        """What became of the Events so far."""
        return EventCounts(
            self.posted, self.existing, self.failed, self.dropped, self._queue.qsize()
        )

    def _body(self, queued: _Queued) -> dict[str, Any]:
        message = queued.text()
        if len(message) > MAX_MESSAGE:
            message = message[: MAX_MESSAGE - 3] + "..."
        api_version, kind, name, namespace, uid = queued.involved
        named = (
            {"name": queued.name}
            if queued.name
            else {"generateName": f"{'dask' if name is None else name}."}
        )
        involved = {
            "apiVersion": api_version,
            "kind": kind,
            "name": name,
            "namespace": namespace,
            "uid": uid,
        }
        if queued.field_path:
            involved["fieldPath"] = queued.field_path
        now = dt.datetime.fromtimestamp(queued.now, dt.UTC).isoformat()
        return {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {**named, "namespace": namespace},
            "involvedObject": involved,
            "type": queued.type_,
            "reason": queued.reason,
            "message": message,
            "source": {"component": DISTRIBUTION},
            "reportingComponent": DISTRIBUTION,
            "reportingInstance": self._instance,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "count": 1,
        }

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
            event = self._body(await self._queue.get())
            await self._bucket.take()
            namespace = event["metadata"]["namespace"]
            try:
                await self.api.post(f"/api/v1/namespaces/{namespace}/events", event)
                self.posted += 1
            except Conflict as exc:
                if "name" not in event["metadata"]:
                    self._failed(event, exc)
                    continue
                self.existing += 1  # the same Event, posted before a restart
            except ApiError as exc:
                self._failed(event, exc)

    def _failed(self, event: Mapping[str, Any], exc: Exception) -> None:
        self.failed += 1
        involved = event["involvedObject"]
        log.warning(
            f"Posting Event {event['reason']} on {involved['kind']} "
            f"{involved['namespace']}/{involved['name']} failed: {exc}"
        )
