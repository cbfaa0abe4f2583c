"""Events: posted by a few workers at a bounded rate; a full queue drops, a failure is counted.

An Event with a name of its own that is already there (409) counts as there, not as failed.
"""

from __future__ import annotations

import asyncio
from typing import Any

from dask_gpu_parity.admission.runtime import events as events_module
from dask_gpu_parity.admission.runtime.apiserver import Conflict, Forbidden
from dask_gpu_parity.admission.runtime.events import EventCounts, EventPoster

REF = {
    "apiVersion": "kubernetes.dask.org/v1",
    "kind": "DaskCluster",
    "metadata": {"name": "c", "namespace": "team", "uid": "u"},
}


class Api:
    def __init__(self, fail: bool = False) -> None:
        self.bodies: list[tuple[str, dict[str, Any]]] = []
        self.fail = fail
        self.names: set[str] = set()

    async def post(self, path: str, body: dict[str, Any]) -> None:
        if self.fail:
            raise Forbidden(403, "Forbidden")
        name = body["metadata"].get("name")
        if name in self.names:
            raise Conflict(409, "Conflict", f'events "{name}" already exists')
        if name:
            self.names.add(name)
        self.bodies.append((path, body))


def _done(counts: EventCounts) -> int:
    return counts.posted + counts.existing + counts.failed


async def _drain(poster: EventPoster, expected: int, seconds: float = 10) -> None:
    task = asyncio.create_task(poster.run())
    try:
        async with asyncio.timeout(seconds):
            while _done(poster.counts()) < expected:
                await asyncio.sleep(0.01)
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)


def test_the_bucket_lets_a_burst_through_then_waits() -> None:
    now = [100.0]
    bucket = events_module.TokenBucket(rate=4, burst=3, clock=lambda: now[0])
    assert [bucket.delay() for _ in range(3)] == [0, 0, 0]  # the burst
    assert bucket.delay() == 0.25  # then one every 1/rate seconds
    now[0] += 0.25
    assert bucket.delay() == 0
    now[0] += 60
    assert [bucket.delay() for _ in range(4)] == [0, 0, 0, 0.25]  # never more than the burst


def test_events_are_posted_as_core_v1_events() -> None:
    api = Api()
    poster = EventPoster(api, rate=100, burst=5)  # type: ignore[arg-type]
    for i in range(25):
        poster.post(REF, "Warning", "ParityDrift", f"message {i} " + "x" * 2000)
    asyncio.run(_drain(poster, 25))
    path, body = api.bodies[0]
    assert path == "/api/v1/namespaces/team/events"
    assert body["involvedObject"] == {
        "apiVersion": "kubernetes.dask.org/v1",
        "kind": "DaskCluster",
        "name": "c",
        "namespace": "team",
        "uid": "u",
    }
    assert (body["type"], body["reason"]) == ("Warning", "ParityDrift")
    assert len(body["message"]) == 1024
    assert body["metadata"] == {"generateName": "c.", "namespace": "team"}
    assert poster.counts() == EventCounts(posted=25)


def test_a_full_queue_drops_and_failures_are_counted(monkeypatch) -> None:
    monkeypatch.setattr(events_module, "QUEUE", 3)
    poster = EventPoster(Api(fail=True))  # type: ignore[arg-type]
    for _ in range(5):
        poster.post(REF, "Normal", "ParityRepaired", "done")
    assert poster.counts() == EventCounts(dropped=2, pending=3)
    asyncio.run(_drain(poster, 3))
    assert poster.counts() == EventCounts(failed=3, dropped=2)


def test_a_named_event_on_a_part_of_a_pod_is_posted_once() -> None:
    api = Api()
    poster = EventPoster(api, rate=100, burst=5)  # type: ignore[arg-type]
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "team"}}
    pod["metadata"]["uid"] = "pu"
    for _ in range(3):  # the same failure, posted again (as after a restart of the operator)
        poster.post(
            pod,
            "Warning",
            "GPUParityCheckFailed",
            "why",
            name="p.0123456789abcdef",
            field_path="spec.initContainers{gpu-parity-check}",
        )
    poster.post(pod, "Warning", "GPUParityCheckFailed", "why again")  # unnamed: generated
    asyncio.run(_drain(poster, 4))
    (named,) = [body for _, body in api.bodies if "name" in body["metadata"]]
    (generated,) = [body for _, body in api.bodies if "name" not in body["metadata"]]
    assert named["metadata"] == {"name": "p.0123456789abcdef", "namespace": "team"}
    assert named["involvedObject"] == {
        "apiVersion": "v1",
        "kind": "Pod",
        "name": "p",
        "namespace": "team",
        "uid": "pu",
        "fieldPath": "spec.initContainers{gpu-parity-check}",
    }
    assert generated["metadata"] == {"generateName": "p.", "namespace": "team"}
    assert poster.counts() == EventCounts(posted=2, existing=2)  # none failed


def test_a_message_naming_its_object_is_posted_whole_and_its_rest_shared() -> None:
    poster = EventPoster(Api())  # type: ignore[arg-type]
    refs = [{**REF, "metadata": {**REF["metadata"], "name": f"cl-{i}"}} for i in range(3)]
    rest = " lacks GPU parity (ucx-env): set UCX_TLS"
    for ref in refs:
        name = ref["metadata"]["name"]
        poster.post(ref, "Warning", "ParityDrift", f"Scheduler Deployment {name}-scheduler{rest}")
    poster.post(refs[0], "Normal", "Other", "no name in it")
    queued = list(poster._queue._queue)  # type: ignore[attr-defined]
    assert queued[0].message[1] is queued[2].message[1]  # one copy of what follows the name
    api = Api()
    poster.api = api  # type: ignore[assignment]
    asyncio.run(_drain(poster, 4))
    messages = [body["message"] for _, body in api.bodies]
    assert messages == [
        *(f"Scheduler Deployment cl-{i}-scheduler{rest}" for i in range(3)),
        "no name in it",
    ]
    assert [body["involvedObject"]["name"] for _, body in api.bodies] == [
        "cl-0",
        "cl-1",
        "cl-2",
        "cl-0",
    ]
