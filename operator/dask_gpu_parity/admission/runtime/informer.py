"""List, then watch: one resource kept current in the operator, as client-go's informers do.

An :class:`Informer` LISTs its resource in pages (``limit``/``continue``), hands every object to
its :class:`Sink`, then WATCHes from the list's ``resourceVersion`` with bookmarks. A broken
stream resumes from the last version seen; ``410 Gone`` (the version was compacted away) starts
a new LIST, after which the objects that were not listed again are deleted from the sink. While
a relist runs, the sink keeps the previous complete view: nothing is answered from half a list.

``synced`` is set once the first LIST has been applied in full. kopf's own indexing was not used
for this: its per-object workers all waited on one condition, which made the initial listing
superlinear (docs/performance.md); here a page is applied in one pass.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from dask_gpu_parity.core.plain import as_map

from .apiserver import ApiClient, ApiError, Forbidden, Gone, NotFound, error

__all__ = ["Callbacks", "Informer", "InformerStatus", "Resource", "Sink", "object_key"]

log = logging.getLogger("dask_gpu_parity")
PAGE_SIZE = 500
WATCH_SECONDS = 300  # the server ends a watch after this; it is resumed at once
BACKOFF = (0.5, 1, 2, 4, 8, 16, 30)  # seconds before the 1st, 2nd, ... retry in a row
_ABSENT_RETRY = 30.0  # a resource whose CRD is not installed is listed again after this


@dataclass(frozen=True)
class Resource:
    """What to list and watch: an API path and an optional server-side label selector."""

    kind: str  # for logs and metrics, e.g. "nodes"
    path: str  # e.g. "/api/v1/nodes", "/apis/apps/v1/deployments"
    label_selector: str = ""
    page_size: int = PAGE_SIZE  # objects per LIST page: what one page holds in memory at once


class Sink(Protocol):
    """Where an informer's objects go (called on the event loop, one object at a time)."""

    def upsert(self, obj: Mapping[str, Any]) -> None:
        """An object was listed, added or modified."""

    def delete(self, key: str, obj: Mapping[str, Any] | None) -> None:
        """An object is gone (``obj`` is ``None`` when a relist found it missing)."""

    def listed(self) -> None:
        """A complete LIST has been applied (the first one, or a relist after 410 Gone)."""


def _nothing() -> None:
    pass


@dataclass(frozen=True)
class Callbacks:
    """A :class:`Sink` made of three functions (a store's own methods)."""

    upsert: Callable[[Mapping[str, Any]], None]
    delete: Callable[[str, Mapping[str, Any] | None], None]
    listed: Callable[[], None] = _nothing


@dataclass(frozen=True)
class InformerStatus:
    """What ``/metrics`` and ``/readyz`` say about one informer (a snapshot)."""

    kind: str
    synced: bool
    objects: int
    lists: int
    events: int
    last_error: str


def object_key(obj: Mapping[str, Any]) -> str:
    """``namespace/name``, or ``name`` for cluster-scoped objects."""
    meta = as_map(obj.get("metadata"))
    namespace, name = meta.get("namespace"), str(meta.get("name", ""))
    return f"{namespace}/{name}" if namespace else name


class Informer:
    """One resource, listed then watched, for as long as :meth:`run` runs."""

    def __init__(
        self,
        api: ApiClient,
        resource: Resource,
        sink: Sink,
        *,
        page_size: int = PAGE_SIZE,
        backoff: tuple[float, ...] = BACKOFF,
    ) -> None:
        self.api = api
        self.backoff = backoff
        self.resource = resource
        self.sink = sink
        self.page_size = page_size
        self.synced = asyncio.Event()
        self.synced_at: float | None = None  # time.monotonic() of the first complete LIST
        self._keys: set[str] = set()
        self._version = ""
        self._lists = 0
        self._events = 0
        self._error = ""
        self._failures = 0  # consecutive failures: the next retry waits backoff[_failures]

    def status(self) -> InformerStatus:
        """Counters for metrics (read on the event loop, published as a snapshot)."""
        return InformerStatus(
            self.resource.kind,
            self.synced.is_set(),
            len(self._keys),
            self._lists,
            self._events,
            self._error,
        )

    async def run(self) -> None:
        """List, watch, resume, relist; forever (until cancelled).

        The backoff starts again from its first step once a LIST completes or a watch delivers
        an event: one break after hours of watching is retried at once, not after as long as
        the failures of earlier outages added up to.
        """
        need_list = True
        while True:
            try:
                if need_list:
                    if not await self._list():
                        await asyncio.sleep(_ABSENT_RETRY)
                        continue
                    need_list = False
                    self._failures = 0
                await self._watch()
                self._failures = 0
            except Gone as exc:
                log.info(f"Watch of {self.resource.kind}: {exc}; listing again")
                need_list = True
            except ApiError as exc:
                await self._failed(exc)
                need_list = need_list or isinstance(exc, NotFound)

    async def _failed(self, exc: Exception) -> None:
        self._error = str(exc)
        failures = self._failures
        self._failures += 1
        delay = self.backoff[min(failures, len(self.backoff) - 1)]
        hint = ""
        if isinstance(exc, Forbidden):
            hint = f" (RBAC: the operator needs list and watch on {self.resource.kind})"
        log.warning(
            f"{'Listing' if not self.synced.is_set() else 'Watching'} {self.resource.kind} "
            f"failed: {exc}{hint}; retrying in {delay:g} s"
        )
        await asyncio.sleep(delay)

    async def _list(self) -> bool:
        """One complete LIST applied to the sink; ``False`` when the resource does not exist."""
        seen: set[str] = set()
        token = ""
        started = time.monotonic()
        while True:
            params = {"limit": str(self.page_size)}
            if token:
                params["continue"] = token
            if self.resource.label_selector:
                params["labelSelector"] = self.resource.label_selector
            try:
                page = await self.api.list_page(self.resource.path, params)
            except Gone:
                if not token:
                    raise
                seen, token = set(), ""  # the continue token expired: start over
                continue
            except NotFound:
                log.warning(
                    f"No {self.resource.kind} in the API (is its CRD installed?): "
                    f"listing again every {_ABSENT_RETRY:g} s"
                )
                self._apply_list(set())
                return False
            for obj in page.items:
                seen.add(object_key(obj))
                self._deliver(self.sink.upsert, obj)
            token = page.continue_token
            if not token:
                self._version = page.resource_version
                break
        self._apply_list(seen)
        log.info(f"Listed {len(seen)} {self.resource.kind} in {time.monotonic() - started:.2f} s")
        return True

    def _apply_list(self, seen: set[str]) -> None:
        for key in self._keys - seen:
            self._deliver(self.sink.delete, key, None)
        self._keys = seen
        self._lists += 1
        self._error = ""
        self._deliver(self.sink.listed)
        if not self.synced.is_set():
            self.synced_at = time.monotonic()
            self.synced.set()

    async def _watch(self) -> None:
        params = {
            "watch": "1",
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(WATCH_SECONDS),
        }
        if self._version:
            params["resourceVersion"] = self._version
        if self.resource.label_selector:
            params["labelSelector"] = self.resource.label_selector
        async for event in self.api.watch(self.resource.path, params, WATCH_SECONDS + 60):
            kind, obj = event.get("type"), as_map(event.get("object"))
            if kind == "ERROR":
                code = int(obj.get("code") or 500)
                raise error(code, str(obj.get("reason", "")), str(obj.get("message", "")))
            self._failures = 0  # the stream works: a break later is retried at once
            version = as_map(obj.get("metadata")).get("resourceVersion")
            if version:
                self._version = str(version)
            if kind == "BOOKMARK":
                continue
            self._events += 1
            key = object_key(obj)
            if kind == "DELETED":
                self._keys.discard(key)
                self._deliver(self.sink.delete, key, obj)
            else:
                self._keys.add(key)
                self._deliver(self.sink.upsert, obj)

    def _deliver(self, call: Callable[..., None], *args: Any) -> None:
        """One sink call; a failure is logged and the stream goes on (one object, not all)."""
        try:
            call(*args)
        except Exception:
            what = next((a for a in args if isinstance(a, str)), None) or (
                object_key(args[0]) if args and isinstance(args[0], Mapping) else ""
            )
            log.exception(f"Handling {self.resource.kind} {what} failed")
