"""PolicyReports written in the background against a scripted API server.

What must hold: a report only when what it says changed (also across a restart), one write for
many changes queued for one cluster, deletes that tolerate the garbage collector, a retry for a
write the API server did not take, nothing at all where the CRD is not installed. The real API
server with the real CRD is the e2e's (``tests/e2e/admission/test_policyreports.py``).
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import aiohttp.web
import pytest
from aiohttp.test_utils import TestServer

from dask_gpu_parity.admission.runtime import reports
from dask_gpu_parity.admission.runtime.apiserver import ApiClient
from dask_gpu_parity.admission.runtime.kube import Connection
from dask_gpu_parity.core.policyreport import (
    DIGEST_ANNOTATION,
    Subject,
    passed,
    policy_report,
    report_name,
)

API = "/apis/wgpolicyk8s.io/v1alpha2"


def subject(name: str, uid: str | None = None) -> Subject:
    return Subject("kubernetes.dask.org/v1", "DaskCluster", "team", name, uid or f"uid-{name}")


class FakeApi:
    """Serves discovery (when ``served``), the LIST of our reports, apply and delete."""

    def __init__(self, *, served: bool = True) -> None:
        self.served = served
        self.stored: dict[str, dict[str, Any]] = {}  # namespace/name -> report
        self.requests: list[tuple[str, str, dict[str, str]]] = []
        self.fail_next: list[int] = []  # statuses to answer the next writes with
        self.discovered = 0
        self.delete_delay = 0.0  # seconds a DELETE takes

    def app(self) -> aiohttp.web.Application:
        app = aiohttp.web.Application()
        app.router.add_get(API, self.discovery)
        app.router.add_get(f"{API}/policyreports", self.list)
        app.router.add_patch(f"{API}/namespaces/{{ns}}/policyreports/{{name}}", self.apply)
        app.router.add_delete(f"{API}/namespaces/{{ns}}/policyreports/{{name}}", self.delete)
        return app

    def writes(self) -> list[tuple[str, str]]:
        return [(m, p.rsplit("/", 1)[1]) for m, p, _ in self.requests if m in ("PATCH", "DELETE")]

    async def discovery(self, request: aiohttp.web.Request) -> aiohttp.web.Response:
        self.discovered += 1
        if not self.served:
            return aiohttp.web.json_response({"kind": "Status", "code": 404}, status=404)
        return aiohttp.web.json_response({"resources": [{"name": "policyreports"}]})

    async def list(self, request: aiohttp.web.Request) -> aiohttp.web.Response:
        self.requests.append(("GET", request.path, dict(request.query)))
        assert request.query["labelSelector"] == "app.kubernetes.io/managed-by=dask-gpu-parity"
        return aiohttp.web.json_response({"metadata": {}, "items": list(self.stored.values())})

    async def apply(self, request: aiohttp.web.Request) -> aiohttp.web.Response:
        self.requests.append(("PATCH", request.path, dict(request.query)))
        if self.fail_next:
            return aiohttp.web.json_response({"message": "busy"}, status=self.fail_next.pop(0))
        assert request.content_type == "application/apply-patch+yaml"
        assert request.query == {"fieldManager": "dask-gpu-parity", "force": "true"}
        body = json.loads(await request.read())
        self.stored[f"{request.match_info['ns']}/{request.match_info['name']}"] = body
        return aiohttp.web.json_response(body)

    async def delete(self, request: aiohttp.web.Request) -> aiohttp.web.Response:
        self.requests.append(("DELETE", request.path, {}))
        await asyncio.sleep(self.delete_delay)
        key = f"{request.match_info['ns']}/{request.match_info['name']}"
        if self.stored.pop(key, None) is None:
            return aiohttp.web.json_response({"kind": "Status", "code": 404}, status=404)
        return aiohttp.web.json_response({"kind": "Status", "status": "Success"})


async def running(
    fake: FakeApi,
    script: Callable[[reports.PolicyReports], Any],
    done: Callable[[reports.PolicyReports], bool],
) -> reports.PolicyReports:
    """Run a writer against ``fake``; ``script`` feeds it, until ``done`` (10 s at most)."""
    server = TestServer(fake.app())
    await server.start_server()
    api = ApiClient(Connection(str(server.make_url("")).rstrip("/")))
    writer = reports.PolicyReports(api, rate=1000, burst=1000, clock=lambda: 1_700_000_000)
    task = asyncio.create_task(writer.run())
    try:
        async with asyncio.timeout(10):
            result = script(writer)
            if asyncio.iscoroutine(result):
                await result
            while not done(writer):
                await asyncio.sleep(0.01)
            await asyncio.sleep(0.05)  # anything more it would write, it writes now
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
        await api.close()
        await server.close()
    return writer


def test_a_report_is_written_once_for_many_changes_queued_for_one_cluster() -> None:
    fake = FakeApi()

    def script(writer: reports.PolicyReports) -> None:
        for n in range(5):
            writer.update(subject("a"), [passed(f"verdict {n}")])

    writer = asyncio.run(running(fake, script, lambda w: w.written >= 1))
    assert fake.writes() == [("PATCH", "dask-gpu-parity-uid-a")]
    stored = fake.stored["team/dask-gpu-parity-uid-a"]
    assert stored["results"][0]["message"] == "verdict 4"
    assert stored["scope"]["name"] == "a"
    assert stored["metadata"]["ownerReferences"][0]["uid"] == "uid-a"
    assert writer.counts().reports == 1


def test_an_unchanged_verdict_is_not_written_again_even_after_a_restart() -> None:
    fake = FakeApi()
    before = policy_report(subject("a"), [passed("ok")], 1)
    fake.stored[f"team/{before['metadata']['name']}"] = before

    def script(writer: reports.PolicyReports) -> None:
        writer.update(subject("a"), [passed("ok")])
        writer.update(subject("b"), [passed("ok")])

    asyncio.run(running(fake, script, lambda w: w.written >= 1))
    assert fake.writes() == [("PATCH", "dask-gpu-parity-uid-b")]


def test_a_changed_verdict_is_written_with_its_new_digest() -> None:
    fake = FakeApi()
    before = policy_report(subject("a"), [passed("ok")], 1)
    fake.stored[f"team/{before['metadata']['name']}"] = before

    def script(writer: reports.PolicyReports) -> None:
        writer.update(subject("a"), [passed("still ok, said differently")])

    asyncio.run(running(fake, script, lambda w: w.written >= 1))
    after = fake.stored["team/dask-gpu-parity-uid-a"]
    assert (
        after["metadata"]["annotations"][DIGEST_ANNOTATION]
        != (before["metadata"]["annotations"][DIGEST_ANNOTATION])
    )


def test_removing_deletes_and_a_report_the_garbage_collector_took_is_no_failure() -> None:
    fake = FakeApi()

    async def script(writer: reports.PolicyReports) -> None:
        writer.update(subject("a"), [passed("ok")])
        writer.update(subject("b"), [passed("ok")])
        while writer.written < 2:
            await asyncio.sleep(0.01)
        fake.stored.pop("team/dask-gpu-parity-uid-b")  # the garbage collector was first
        writer.remove(("team", "a"))
        writer.remove(("team", "b"))

    writer = asyncio.run(running(fake, script, lambda w: w.deleted >= 2))
    assert fake.stored == {}
    assert writer.failed == 0
    assert writer.counts().reports == 0


def test_an_update_that_arrives_while_its_report_is_being_deleted_writes_it_again() -> None:
    """A restarted operator may say "no report" for a cluster and then, a moment later, what
    its report (read back, unchanged) says: the report must be there in the end."""
    fake = FakeApi()
    before = policy_report(subject("a"), [passed("ok")], 1)
    fake.stored[f"team/{before['metadata']['name']}"] = before
    fake.delete_delay = 0.2

    async def script(writer: reports.PolicyReports) -> None:
        while not fake.discovered or not writer.served:
            await asyncio.sleep(0.01)
        writer.remove(("team", "a"))
        while not any(m == "DELETE" for m, _, _ in fake.requests):
            await asyncio.sleep(0.01)
        writer.update(subject("a"), [passed("ok")])  # the DELETE is in flight

    asyncio.run(running(fake, script, lambda w: w.written >= 1))
    assert list(fake.stored) == ["team/dask-gpu-parity-uid-a"]


def test_a_removal_said_before_the_reports_are_read_back_still_deletes() -> None:
    """The drift watch may report a cluster gone while the writer still lists what is stored:
    the report found by that LIST must go, without waiting for the first pass's sweep."""
    fake = FakeApi()
    before = policy_report(subject("a"), [passed("ok")], 1)
    fake.stored[f"team/{before['metadata']['name']}"] = before

    def script(writer: reports.PolicyReports) -> None:
        writer.remove(("team", "a"))  # before the writer has run at all
        writer.remove(("team", "never-reported"))  # nothing stored: nothing to delete

    writer = asyncio.run(running(fake, script, lambda w: w.deleted >= 1))
    assert fake.stored == {}
    assert fake.writes() == [("DELETE", "dask-gpu-parity-uid-a")]
    assert writer.counts().pending == 0


def test_a_cluster_recreated_under_its_name_gets_a_new_report_and_loses_the_old() -> None:
    fake = FakeApi()

    async def script(writer: reports.PolicyReports) -> None:
        writer.update(subject("a", "uid-1"), [passed("ok")])
        while writer.written < 1:
            await asyncio.sleep(0.01)
        writer.update(subject("a", "uid-2"), [passed("ok")])

    asyncio.run(running(fake, script, lambda w: w.written >= 2))
    assert list(fake.stored) == ["team/dask-gpu-parity-uid-2"]


def test_after_the_first_pass_reports_of_clusters_no_longer_reported_go() -> None:
    fake = FakeApi()
    for name in ("kept", "opted-out-meanwhile"):
        old = policy_report(subject(name), [passed("ok")], 1)
        fake.stored[f"team/{old['metadata']['name']}"] = old

    def script(writer: reports.PolicyReports) -> None:
        writer.update(subject("kept"), [passed("ok")])
        writer.first_pass_done()

    asyncio.run(running(fake, script, lambda w: w.deleted >= 1))
    assert list(fake.stored) == ["team/dask-gpu-parity-uid-kept"]
    assert fake.writes() == [("DELETE", "dask-gpu-parity-uid-opted-out-meanwhile")]


def test_a_write_the_api_server_did_not_take_is_tried_again(monkeypatch) -> None:
    monkeypatch.setattr(reports, "RETRY_SECONDS", 0.05)
    fake = FakeApi()
    fake.fail_next = [503, 429]

    def script(writer: reports.PolicyReports) -> None:
        writer.update(subject("a"), [passed("ok")])

    writer = asyncio.run(running(fake, script, lambda w: w.written >= 1))
    assert writer.failed == 2
    assert "team/dask-gpu-parity-uid-a" in fake.stored


def test_a_refused_write_is_counted_and_not_retried_forever(monkeypatch) -> None:
    monkeypatch.setattr(reports, "RETRY_SECONDS", 0.05)
    fake = FakeApi()
    fake.fail_next = [403]

    def script(writer: reports.PolicyReports) -> None:
        writer.update(subject("a"), [passed("ok")])

    writer = asyncio.run(running(fake, script, lambda w: w.failed >= 1))
    assert writer.written == 0
    assert fake.writes() == [("PATCH", "dask-gpu-parity-uid-a")]


def test_without_the_crd_nothing_is_written_and_the_verdicts_wait() -> None:
    fake = FakeApi(served=False)

    def script(writer: reports.PolicyReports) -> None:
        writer.update(subject("a"), [passed("ok")])

    writer = asyncio.run(running(fake, script, lambda w: fake.discovered >= 1))
    assert fake.requests == []
    assert writer.counts() == reports.ReportCounts(served=False, pending=1)


@pytest.mark.parametrize("uid", ["", "0b9e"])
def test_report_names_follow_the_uid_or_kind_and_name(uid: str) -> None:
    name = report_name(subject("a", uid) if uid else Subject("v", "DaskJob", "ns", "j"))
    assert name == ("dask-gpu-parity-0b9e" if uid else "dask-gpu-parity-daskjob-j")
