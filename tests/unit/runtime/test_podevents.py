"""A scheduler's failed GPU check as an Event: found in the pod's status, worded, posted once.

The pure part (``podevents``) is table-driven; the drift watch's part feeds pod statuses to its
pod sink as the informer would, in the order kubelet writes them.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

import pytest

from dask_gpu_parity.admission.decide import podevents
from dask_gpu_parity.admission.runtime import events
from tests.unit.driftharness import Harness, dask_cluster, run

NOW = dt.datetime(2026, 7, 1, 12, 0, tzinfo=dt.UTC)
REASON_LINE = (
    'Expected CUDA_VISIBLE_DEVICES unset or naming a GPU, found "", which hides every GPU from '
    "CUDA while NVML and nvidia-smi still show them: remove it from the scheduler container's env"
)
DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def ended(
    code: int = 1,
    *,
    at: dt.datetime = NOW,
    run_id: str = "run1",
    message: str = REASON_LINE + "\n",
    reason: str = "Error",
) -> dict[str, Any]:
    """A ``terminated`` state as kubelet writes it."""
    return {
        "terminated": {
            "exitCode": code,
            "reason": reason,
            "message": message,
            "startedAt": (at - dt.timedelta(seconds=1)).isoformat().replace("+00:00", "Z"),
            "finishedAt": at.isoformat().replace("+00:00", "Z"),
            "containerID": f"containerd://{run_id}",
        }
    }


WAITING = {"waiting": {"reason": "CrashLoopBackOff"}}
RUNNING = {"running": {"startedAt": "2026-07-01T12:00:05Z"}}


def scheduler_pod(
    state: dict[str, Any] | None,
    last: dict[str, Any] | None = None,
    *,
    restarts: int = 0,
    name: str = "c-scheduler-x",
    uid: str = "uid-x",
    component: str = "scheduler",
    container: str = "gpu-parity-check",
    ns: str = "team",
) -> dict[str, Any]:
    """A scheduler pod whose ``container`` init container is in ``state`` (``last`` before)."""
    status: dict[str, Any] = {"name": container, "restartCount": restarts, "ready": False}
    if state is not None:
        status["state"] = state
    if last is not None:
        status["lastState"] = last
    labels = {"dask.org/cluster-name": "c", "dask.org/component": component}
    return {
        "metadata": {"name": name, "namespace": ns, "uid": uid, "labels": labels},
        "spec": {"nodeName": "h0"},
        "status": {
            "phase": "Pending",
            "initContainerStatuses": [
                {"name": "gpu-parity-probe", "restartCount": 0, "state": ended(0)},
                status,
            ],
        },
    }


def failed(pod: dict[str, Any]) -> podevents.ProbeFailure:
    """The failure in ``pod``, which has one."""
    found = podevents.failure(pod)
    assert found is not None
    return found


# -- finding the failure ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("pod", "run_id"),
    [
        pytest.param(scheduler_pod(ended(1)), "run1", id="terminated"),
        pytest.param(scheduler_pod(WAITING, ended(1), restarts=1), "run1", id="back-off"),
        pytest.param(scheduler_pod(RUNNING, ended(1), restarts=1), "run1", id="restarted"),
        pytest.param(
            scheduler_pod(ended(1, run_id="run2"), ended(1), restarts=1), "run2", id="newest-first"
        ),
        pytest.param(
            scheduler_pod(ended(0, run_id="run2"), ended(2), restarts=1), "run1", id="passed-after"
        ),
        pytest.param(scheduler_pod(ended(137, reason="OOMKilled")), "run1", id="oom-killed"),
    ],
)
def test_the_latest_failed_run_is_found(pod: dict[str, Any], run_id: str) -> None:
    found = failed(pod)
    assert found.container_id == f"containerd://{run_id}"
    assert (found.namespace, found.pod, found.uid, found.cluster) == (
        "team",
        "c-scheduler-x",
        "uid-x",
        "c",
    )


@pytest.mark.parametrize(
    "pod",
    [
        pytest.param(scheduler_pod(ended(0)), id="passed"),
        pytest.param(scheduler_pod(RUNNING), id="running"),
        pytest.param(scheduler_pod(None), id="no-state"),
        pytest.param(scheduler_pod(ended(1), container="gpu-parity-probe"), id="copy-step"),
        pytest.param(scheduler_pod(ended(1), container="other"), id="another-init-container"),
        pytest.param(scheduler_pod(ended(1), component="worker"), id="worker-pod"),
        pytest.param({"metadata": {"labels": {"dask.org/component": "scheduler"}}}, id="no-status"),
        pytest.param(
            {
                "metadata": {"labels": {"dask.org/component": "scheduler"}},
                "status": {"initContainerStatuses": {"name": "gpu-parity-check"}},
            },
            id="statuses-not-a-list",
        ),
        pytest.param(scheduler_pod({"terminated": {"exitCode": "1"}}), id="exit-code-not-a-number"),
        pytest.param(scheduler_pod({"terminated": {"exitCode": True}}), id="exit-code-a-bool"),
        pytest.param(scheduler_pod({"terminated": "no"}), id="terminated-not-a-map"),
    ],
)
def test_no_failure(pod: dict[str, Any]) -> None:
    assert podevents.failure(pod) is None


def test_one_run_keeps_its_id_through_kubelets_reports() -> None:
    """Seen as state (restart count 0), then as lastState (restart count 1): one failure."""
    first = failed(scheduler_pod(ended(1)))
    backing_off = failed(scheduler_pod(WAITING, ended(1), restarts=1))
    rerun = failed(scheduler_pod(RUNNING, ended(1), restarts=1))
    assert first.id == backing_off.id == rerun.id
    second = failed(
        scheduler_pod(ended(1, run_id="run2", at=NOW + dt.timedelta(seconds=10)), ended(1))
    )
    assert second.id != first.id
    assert failed(scheduler_pod(ended(1), uid="uid-y")).id != first.id


# -- the message --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("state", "restarts", "expected"),
    [
        pytest.param(
            ended(1),
            2,
            "Init container gpu-parity-check failed its GPU check (exit code 1, restart count 2): "
            + REASON_LINE,
            id="check-failed",
        ),
        pytest.param(
            ended(2, message="Expected GPU_PARITY_TIMEOUT_S to be a number, found 'x'"),
            0,
            "Init container gpu-parity-check could not run the GPU probe (exit code 2, restart "
            "count 0): Expected GPU_PARITY_TIMEOUT_S to be a number, found 'x'",
            id="probe-error",
        ),
        pytest.param(
            ended(137, reason="OOMKilled", message=""),
            1,
            "Init container gpu-parity-check exited with code 137 (OOMKilled, restart count 1): "
            "no termination message; see kubectl logs c-scheduler-x -c gpu-parity-check "
            "--previous",
            id="oom-killed",
        ),
        pytest.param(
            ended(127, message="exec: python: not found"),
            0,
            "Init container gpu-parity-check exited with code 127 (restart count 0): "
            "exec: python: not found",
            id="other-exit-code",
        ),
        pytest.param(
            ended(1, message="line one\nline two\x1b[31m red\u202e\t\x00\n"),
            0,
            "Init container gpu-parity-check failed its GPU check (exit code 1, restart count 0): "
            "line one\\nline two\\x1b[31m red\\u202e\\t\\x00",
            id="control-characters-escaped",
        ),
    ],
)
def test_the_message_says_what_failed_and_why(
    state: dict[str, Any], restarts: int, expected: str
) -> None:
    found = failed(scheduler_pod(state, restarts=restarts))
    assert found.text() == expected
    cluster_text = found.cluster_text()
    assert cluster_text == "Scheduler pod c-scheduler-x: init" + expected.removeprefix("Init")


def test_a_long_message_is_cut_to_the_event_limit_keeping_what_failed() -> None:
    found = podevents.failure(scheduler_pod(ended(1, message="\x07" * 4096)))  # kubelet's cap
    assert found is not None
    text, cluster_text = found.text(), found.cluster_text()
    assert podevents.MESSAGE_LIMIT == events.MAX_MESSAGE  # the poster never cuts it again
    assert len(text) <= podevents.MESSAGE_LIMIT
    assert len(cluster_text) <= podevents.MESSAGE_LIMIT
    assert text.startswith("Init container gpu-parity-check failed its GPU check (exit code 1")
    assert text.endswith("\\x07...")  # whole escapes only
    assert cluster_text.endswith("\\x07...")


@pytest.mark.parametrize(
    ("text", "limit", "expected"),
    [
        ("plain", 10, "plain"),
        ("a\nb", 10, "a\\nb"),
        ("abcdefghij", 10, "abcdefghij"),
        ("abcdefghijk", 10, "abcdefg..."),
        ("ab\x1bcdefgh", 8, "ab..."),  # \x1b (4 characters) would not fit beside "..."
        ("\U000e0001x", 20, "\\U000e0001x"),  # a format character outside the BMP
        ("\u2028", 10, "\\u2028"),  # line separator
        ("é ü 日本", 20, "é ü 日本"),  # printable text stays as it is
        ("abcd", 2, ""),
    ],
)
def test_escape(text: str, limit: int, expected: str) -> None:
    assert podevents.escape(text, limit) == expected
    assert len(podevents.escape(text, limit)) <= limit


# -- the Events ---------------------------------------------------------------------------------


def test_notices_on_the_pod_and_its_cluster() -> None:
    found = failed(scheduler_pod(ended(1), restarts=1))
    pod_notice, cluster_notice = podevents.notices(found, "uid-c")
    assert pod_notice.ref == {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"namespace": "team", "name": "c-scheduler-x", "uid": "uid-x"},
    }
    assert pod_notice.field_path == "spec.initContainers{gpu-parity-check}"
    assert pod_notice.reason == cluster_notice.reason == "GPUParityCheckFailed"
    assert pod_notice.message == found.text()
    assert pod_notice.name == f"c-scheduler-x.{found.id}"
    assert cluster_notice.ref["kind"] == "DaskCluster"
    assert cluster_notice.ref["metadata"] == {"namespace": "team", "name": "c", "uid": "uid-c"}
    assert cluster_notice.field_path is None
    assert cluster_notice.name.startswith("c.")
    assert cluster_notice.name != pod_notice.name
    # Names are the same for every report of the failure, so a second post is a 409.
    again = failed(scheduler_pod(WAITING, ended(1), restarts=2))
    assert [n.name for n in podevents.notices(again, "uid-c")] == [
        pod_notice.name,
        cluster_notice.name,
    ]
    # Without the cluster's uid (not listed yet, or a bare pod), the pod's Event alone.
    assert [n.ref["kind"] for n in podevents.notices(found, None)] == ["Pod"]


@pytest.mark.parametrize("name", ["p" * 253, "a" * 235 + "-" + "b" * 17, "x"])
def test_event_names_are_dns_subdomains(name: str) -> None:
    found = failed(scheduler_pod(ended(1), name=name))
    for notice in podevents.notices(found, "uid-c"):
        assert len(notice.name) <= 253
        assert DNS_SUBDOMAIN.match(notice.name), notice.name


@pytest.mark.parametrize(
    ("finished", "expected"),
    [
        ("2026-07-01T11:50:00Z", True),
        ("2026-07-01T11:00:00Z", True),  # exactly the horizon
        ("2026-07-01T10:59:59Z", False),
        ("2026-07-01T11:50:00", True),  # no zone: read as UTC
        ("", True),  # unknown: posted
        ("yesterday", True),
    ],
)
def test_recent(finished: str, expected: bool) -> None:
    state = ended(1)
    state["terminated"]["finishedAt"] = finished
    found = failed(scheduler_pod(state))
    assert podevents.recent(found, NOW) is expected


def test_seen_remembers_the_last_failure_per_pod() -> None:
    seen = podevents.Seen()
    first = failed(scheduler_pod(ended(1)))
    second = failed(scheduler_pod(ended(1, run_id="run2")))
    assert seen.new("team/p", first)
    assert not seen.new("team/p", first)
    assert seen.new("team/p", second)
    assert seen.new("team/q", second)
    assert len(seen) == 2
    seen.forget("team/p")
    assert seen.new("team/p", second)


# -- through the drift watch ------------------------------------------------------------------


def now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def probe_events(h: Harness) -> list[tuple[str, str, str, str]]:
    return [e for e in h.events.posted if e[2] == "GPUParityCheckFailed"]


def test_each_failure_is_posted_once_on_the_pod_and_its_cluster() -> None:
    async def test(h: Harness) -> None:
        await h.settle()
        h.watch.stores.put_cluster(dask_cluster("c"))
        t1, t2 = now() - dt.timedelta(seconds=20), now() - dt.timedelta(seconds=5)
        first, second = ended(1, at=t1), ended(1, at=t2, run_id="run2")
        # kubelet's reports, in order, some of them twice (other status fields changed).
        for pod in (
            scheduler_pod(None),
            scheduler_pod(first),
            scheduler_pod(first),
            scheduler_pod(RUNNING, first, restarts=1),
            scheduler_pod(second, first, restarts=1),
            scheduler_pod(WAITING, second, restarts=1),
            scheduler_pod(WAITING, second, restarts=1),
        ):
            h.watch.stores.put_pod(pod)
        await h.settle()
        posted = probe_events(h)
        assert [(obj, kind) for obj, kind, _, _ in posted] == [
            ("c-scheduler-x", "Warning"),
            ("c", "Warning"),
            ("c-scheduler-x", "Warning"),
            ("c", "Warning"),
        ]
        assert posted[0][3].endswith(REASON_LINE)
        assert posted[1][3].startswith("Scheduler pod c-scheduler-x: init container")
        assert "restart count 0" in posted[0][3]
        assert "restart count 1" in posted[2][3]
        (ref, name, field_path) = h.events.refs[-4]
        assert (ref["kind"], field_path) == ("Pod", "spec.initContainers{gpu-parity-check}")
        assert str(name).startswith("c-scheduler-x.")
        assert len(h.watch.stores.probe_failures) == 1
        # The pod is deleted; the Deployment's next pod (a new uid) fails: posted again.
        h.watch.sinks()[2][1].delete("team/c-scheduler-x", None)
        assert len(h.watch.stores.probe_failures) == 0
        h.watch.stores.put_pod(scheduler_pod(second, name="c-scheduler-y", uid="uid-y"))
        assert len(probe_events(h)) == 6

    run(test)


def test_a_bare_pod_or_an_unlisted_cluster_gets_the_pod_event_alone() -> None:
    async def test(h: Harness) -> None:
        await h.settle()
        h.watch.stores.put_pod(scheduler_pod(ended(1, at=now())))
        assert [obj for obj, *_ in probe_events(h)] == ["c-scheduler-x"]

    run(test)


def test_old_failures_and_workers_are_not_posted() -> None:
    async def test(h: Harness) -> None:
        await h.settle()
        h.watch.stores.put_cluster(dask_cluster("c"))
        old = ended(1, at=now() - dt.timedelta(hours=2))
        h.watch.stores.put_pod(scheduler_pod(RUNNING, old, restarts=1))  # listed after a restart
        h.watch.stores.put_pod(scheduler_pod(ended(1, at=now()), component="worker", name="w"))
        await h.settle()
        assert probe_events(h) == []

    run(test)


@pytest.mark.parametrize("where", ["namespace", "cluster"])
def test_opted_out_clusters_get_no_event(where: str) -> None:
    async def test(h: Harness) -> None:
        await h.settle()
        skip = {"gpuparity.dask.org/skip": "true"}
        doc = dask_cluster("c")
        if where == "namespace":
            h.namespaces.upsert({"metadata": {"name": "team", "annotations": skip}})
        else:
            doc["metadata"]["annotations"] = skip
        h.watch.stores.put_cluster(doc)
        h.watch.stores.put_pod(scheduler_pod(ended(1, at=now())))
        await h.settle()
        assert probe_events(h) == []

    run(test)
