"""The informer against a scripted API server: pages, watch, bookmarks, 410 relist, 404, 403."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from typing import Any

import aiohttp.web
import pytest
from aiohttp.test_utils import TestServer

from dask_gpu_parity.admission.runtime.apiserver import ApiClient
from dask_gpu_parity.admission.runtime.informer import BACKOFF, Informer, Resource
from dask_gpu_parity.admission.runtime.kube import Connection


def obj(name: str, rv: int, **labels: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "resourceVersion": str(rv), "labels": labels}}


class FakeApi:
    """Lists ``objects`` in pages; each watch plays the next script (a list of lines)."""

    def __init__(self, objects: list[dict[str, Any]], scripts: list[list[Any]]) -> None:
        self.objects = objects
        self.scripts = scripts
        self.requests: list[dict[str, str]] = []
        self.list_status = 200

    async def handle(self, request: aiohttp.web.Request) -> aiohttp.web.StreamResponse:
        params = dict(request.query)
        self.requests.append(params)
        if params.get("watch") == "1":
            return await self.watch(request)
        if self.list_status != 200:
            return aiohttp.web.json_response(
                {"kind": "Status", "message": "nope"}, status=self.list_status
            )
        start = int(params.get("continue") or 0)
        limit = int(params["limit"])
        page = self.objects[start : start + limit]
        more = start + limit < len(self.objects)
        meta = {"resourceVersion": "100", **({"continue": str(start + limit)} if more else {})}
        return aiohttp.web.json_response({"kind": "List", "metadata": meta, "items": page})

    async def watch(self, request: aiohttp.web.Request) -> aiohttp.web.StreamResponse:
        script = self.scripts.pop(0) if self.scripts else ["hang"]
        if script and isinstance(script[0], int):
            return aiohttp.web.json_response({"message": "watch refused"}, status=script[0])
        response = aiohttp.web.StreamResponse()
        await response.prepare(request)
        for line in script:
            if callable(line):  # a change on the server side, at this point of the stream
                line()
                continue
            if line == "hang":
                await asyncio.sleep(3600)
            payload = json.dumps(line).encode() + b"\n"
            # Split each line in two writes: the informer must reassemble lines.
            await response.write(payload[:7])
            await response.write(payload[7:])
        await response.write_eof()
        return response


class Sink:
    def __init__(self) -> None:
        self.items: dict[str, Mapping[str, Any]] = {}
        self.calls: list[tuple[str, str]] = []
        self.lists = 0

    def upsert(self, o: Mapping[str, Any]) -> None:
        name = o["metadata"]["name"]
        if name == "poison":
            raise ValueError("a bad object")
        self.items[name] = o
        self.calls.append(("upsert", name))

    def delete(self, key: str, o: Mapping[str, Any] | None) -> None:
        self.items.pop(key, None)
        self.calls.append(("delete", key))

    def listed(self) -> None:
        self.lists += 1


async def run_until(
    fake: FakeApi, done: Any, *, page_size: int = 2, backoff: tuple[float, ...] = BACKOFF
) -> tuple[Sink, Informer]:
    app = aiohttp.web.Application()
    app.router.add_get("/api/v1/nodes", fake.handle)
    server = TestServer(app)
    await server.start_server()
    api = ApiClient(Connection(str(server.make_url("")).rstrip("/")))
    sink = Sink()
    informer = Informer(
        api, Resource("nodes", "/api/v1/nodes"), sink, page_size=page_size, backoff=backoff
    )
    task = asyncio.create_task(informer.run())
    try:
        async with asyncio.timeout(10):
            while not done(sink, informer):
                await asyncio.sleep(0.01)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await api.close()
        await server.close()
    return sink, informer


def test_lists_in_pages_then_watches_from_the_list_version() -> None:
    objects = [obj(f"n{i}", i) for i in range(5)]
    watch = [
        {"type": "ADDED", "object": obj("n5", 101)},
        {"type": "MODIFIED", "object": obj("n1", 102, pool="a")},
        {"type": "DELETED", "object": obj("n0", 103)},
        {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "150"}}},
    ]
    fake = FakeApi(objects, [watch])

    def done(sink: Sink, informer: Informer) -> bool:
        return len(fake.requests) >= 5  # 3 pages, the scripted watch, the resumed watch

    sink, informer = asyncio.run(run_until(fake, done))
    pages = [r for r in fake.requests if "watch" not in r]
    assert [p.get("continue") for p in pages] == [None, "2", "4"]
    watches = [r for r in fake.requests if r.get("watch") == "1"]
    assert watches[0]["resourceVersion"] == "100"
    assert watches[0]["allowWatchBookmarks"] == "true"
    assert watches[1]["resourceVersion"] == "150"  # resumed from the bookmark
    assert sorted(sink.items) == ["n1", "n2", "n3", "n4", "n5"]
    assert sink.items["n1"]["metadata"]["labels"] == {"pool": "a"}
    assert sink.lists == 1
    status = informer.status()
    assert (status.synced, status.objects, status.lists, status.events) == (True, 5, 1, 3)


def test_gone_relists_and_deletes_what_was_not_listed_again() -> None:
    fake = FakeApi([obj("a", 1), obj("b", 2), obj("c", 3)], [])

    def compacted() -> None:
        fake.objects = [obj("a", 1), obj("c", 4, changed="yes")]  # b went while we were away

    gone = {"type": "ERROR", "object": {"kind": "Status", "code": 410, "message": "too old"}}
    fake.scripts = [[compacted, gone]]

    def done(sink: Sink, informer: Informer) -> bool:
        return sink.lists >= 2

    sink, informer = asyncio.run(run_until(fake, done, page_size=10))
    assert ("delete", "b") in sink.calls
    assert sorted(sink.items) == ["a", "c"]
    assert informer.status().lists == 2


def test_refused_watch_with_410_relists() -> None:
    fake = FakeApi([obj("a", 1)], [[410]])

    def done(sink: Sink, informer: Informer) -> bool:
        return sink.lists >= 2

    sink, _ = asyncio.run(run_until(fake, done))
    assert sorted(sink.items) == ["a"]


def test_a_failing_object_does_not_stop_the_others() -> None:
    fake = FakeApi([obj("a", 1), obj("poison", 2), obj("b", 3)], [])

    def done(sink: Sink, informer: Informer) -> bool:
        return informer.synced.is_set()

    sink, _ = asyncio.run(run_until(fake, done))
    assert sorted(sink.items) == ["a", "b"]


def test_a_missing_resource_is_synced_empty(monkeypatch: pytest.MonkeyPatch) -> None:
    fake = FakeApi([obj("a", 1)], [])
    fake.list_status = 404  # e.g. the CRD is not installed

    def done(sink: Sink, informer: Informer) -> bool:
        return informer.synced.is_set()

    sink, _ = asyncio.run(run_until(fake, done))
    assert sink.items == {}
    assert sink.lists == 1


def test_forbidden_is_not_synced_and_retried() -> None:
    fake = FakeApi([obj("a", 1)], [])
    fake.list_status = 403

    def done(sink: Sink, informer: Informer) -> bool:
        return len(fake.requests) >= 3

    _, informer = asyncio.run(run_until(fake, done, backoff=(0.01,)))
    assert not informer.synced.is_set()
    assert "403" in informer.status().last_error


def test_a_watch_that_delivered_events_is_resumed_with_the_backoff_reset() -> None:
    # Three refused watches reach the long step; a watch that then works and breaks is retried
    # at the first step, not after the long one.
    backoff = (0.01, 0.01, 0.01, 3600.0)
    broken = {"type": "ERROR", "object": {"kind": "Status", "code": 500, "message": "broken"}}
    fake = FakeApi(
        [obj("a", 1)],
        [[500], [500], [500], [{"type": "ADDED", "object": obj("b", 101)}, broken]],
    )

    def done(sink: Sink, informer: Informer) -> bool:
        return sum(r.get("watch") == "1" for r in fake.requests) >= 5

    sink, _ = asyncio.run(run_until(fake, done, backoff=backoff))
    assert sorted(sink.items) == ["a", "b"]
    assert fake.requests[-1]["resourceVersion"] == "101"


def test_listed_objects_come_without_managed_fields_and_watched_ones_as_sent() -> None:
    managed = [{"manager": "kubelet", "operation": "Update", "fieldsV1": {"f:status": {}}}]
    listed = obj("n0", 1, pool="a")
    listed["metadata"]["managedFields"] = managed
    watched = obj("n1", 101)
    watched["metadata"]["managedFields"] = managed
    fake = FakeApi([listed], [[{"type": "ADDED", "object": watched}]])

    def done(sink: Sink, informer: Informer) -> bool:
        return "n1" in sink.items

    sink, _ = asyncio.run(run_until(fake, done))
    assert sink.items["n0"] == obj("n0", 1, pool="a")
    assert sink.items["n1"] == watched


def test_an_answer_that_is_no_list_page_is_retried_and_said() -> None:
    fake = FakeApi([obj("n0", 1)], [])

    async def html(request: aiohttp.web.Request) -> aiohttp.web.StreamResponse:
        fake.requests.append(dict(request.query))
        return aiohttp.web.Response(text="<html>proxy</html>", content_type="text/html")

    fake.handle = html  # type: ignore[method-assign]  # every answer from a misconfigured proxy

    def done(sink: Sink, informer: Informer) -> bool:
        return len(fake.requests) >= 2

    sink, informer = asyncio.run(run_until(fake, done, backoff=(0.01,)))
    assert not informer.synced.is_set()
    assert not sink.items
    assert "no LIST page" in informer.status().last_error
