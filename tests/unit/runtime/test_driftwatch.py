"""The drift watch's stores and marks: spec drift, placement drift, work proportional to change.

Objects are fed to the sinks as the informers would; checks run on a real event loop.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from tests.unit.driftharness import Harness, dask_cluster, pod, run, scheduler_deployment
from tests.unit.gpunodes import node

A100 = ("580.95.05", "13.0")
H100 = ("570.172.08", "12.8")


def test_first_pass_reports_each_drifted_cluster_once() -> None:
    async def test(h: Harness) -> None:
        for i in range(50):
            doc = dask_cluster(f"c{i}")
            h.watch.stores.put_cluster(doc)
            h.watch.stores.put_deployment(scheduler_deployment(doc))
        await h.settle()
        assert h.watch.first_pass_seconds is not None
        assert h.events.reasons() == ["ParityDrift"] * 50
        assert h.watch.stores.specs.counts() == {"team": 50}
        # Status updates of the dask operator (same spec, same template) check nothing.
        checks = h.watch.checks
        for i in range(50):
            doc = dask_cluster(f"c{i}")
            doc["status"] = {"phase": "Running"}
            h.watch.stores.put_cluster(doc)
            deployment = scheduler_deployment(doc)
            deployment["status"] = {"replicas": 1}
            h.watch.stores.put_deployment(deployment)
        await h.settle()
        assert h.watch.checks == checks
        assert len(h.events.posted) == 50
        figures = h.watch.figures()
        assert (figures.drifted, figures.watched) == ((("team", 50),), 50)

    run(test)


def test_a_restarted_watch_names_the_same_drift_alike() -> None:
    """Each ParityDrift Event is named after its drift: a restarted operator posting it again
    meets the first one (409) instead of making a second; a new generation is a new drift."""

    def names(generation: int) -> list[str | None]:
        async def test(h: Harness) -> None:
            for i in range(3):
                doc = dask_cluster(f"c{i}")
                h.watch.stores.put_cluster(doc)
                h.watch.stores.put_deployment(scheduler_deployment(doc, generation=generation))
            await h.settle()

        return [name for _, name, _ in run(test).events.refs]

    first, restarted, changed = names(1), names(1), names(2)
    assert len(set(first)) == 3
    assert all(first)
    assert all(n and n.startswith(f"c{i}.") for i, n in enumerate(sorted(first)))
    assert restarted == first
    assert set(changed).isdisjoint(first)


def test_opt_out_and_deletion_clear_the_count() -> None:
    async def test(h: Harness) -> None:
        doc = dask_cluster("c")
        h.watch.stores.put_cluster(doc)
        h.watch.stores.put_deployment(scheduler_deployment(doc))
        await h.settle()
        assert h.watch.stores.specs.counts() == {"team": 1}
        h.namespaces.upsert(
            {"metadata": {"name": "team", "annotations": {"gpuparity.dask.org/skip": "true"}}}
        )
        await h.settle()
        assert h.watch.stores.specs.counts() == {}
        h.namespaces.upsert({"metadata": {"name": "team"}})
        await h.settle()
        assert h.watch.stores.specs.counts() == {"team": 1}
        h.watch.stores.drop_cluster("team/c")
        assert h.watch.stores.specs.counts() == {}

    run(test)


def test_repair_when_the_policy_allows_it() -> None:
    async def test(h: Harness) -> None:
        doc = dask_cluster("c")
        h.watch.stores.put_cluster(doc)
        h.watch.stores.put_deployment(scheduler_deployment(doc))
        await h.settle()
        await asyncio.sleep(0)
        ((namespace, name, ops),) = h.patches
        assert (namespace, name) == ("team", "c-scheduler")
        assert any("nvidia.com/gpu" in str(op.get("value")) for op in ops)
        assert h.events.reasons() == ["ParityDrift", "ParityRepaired"]
        assert "Repairing" in h.events.posted[0][3]

    run(test, repair=True)


def test_driver_upgrade_under_a_running_cluster() -> None:
    async def test(h: Harness) -> None:
        for name in ("h0", "h1", "h2"):
            h.nodes.upsert(node(name, *H100))
        doc = dask_cluster("c")
        h.watch.stores.put_cluster(doc)
        h.watch.stores.put_pod(pod("c-scheduler-x", "c", "scheduler", "h0"))
        h.watch.stores.put_pod(pod("c-worker-a", "c", "worker", "h1"))
        h.watch.stores.put_pod(pod("c-worker-b", "c", "worker", "h2"))
        await h.settle()
        assert h.events.posted == []  # no Deployment seen: no spec check; placement agrees

        # The GPU Operator upgrades h1: its worker is evicted and comes back there, on 580.
        h.nodes.upsert(node("h1", *A100))
        await h.settle()
        ((_, kind, reason, message),) = h.events.posted
        assert (kind, reason) == ("Warning", "ParityDriverMismatch")
        assert "runs on node h0 with driver 570.172.08 / CUDA 12.8" in message
        assert "driver 580.95.05 / CUDA 13.0 (1 pod: c-worker-a on h1)" in message
        assert "The workers straddle driver classes" in message
        assert h.watch.stores.places.counts() == {"team": 1}

        # A node nobody's pods run on changes: nothing is checked.
        checks = h.watch.checks
        h.nodes.upsert(node("spare", *A100))
        h.nodes.upsert(node("spare", *H100))
        await h.settle()
        assert h.watch.checks == checks

        # h2 is upgraded too: workers agree again, scheduler still behind. New Event (classes).
        h.nodes.upsert(node("h2", *A100))
        await h.settle()
        assert h.events.reasons()[-1] == "ParityDriverMismatch"
        assert "Restart the scheduler on driver 580.95.05 / CUDA 13.0" in h.events.posted[-1][3]

        # Then h0: the scheduler pod is deleted and comes back on the upgraded node.
        posted = len(h.events.posted)
        h.watch.stores.drop_pod("team/c-scheduler-x")
        h.nodes.upsert(node("h0", *A100))
        await h.settle()
        assert len(h.events.posted) == posted  # no scheduler pod: no verdict, the last stands
        assert h.watch.stores.places.counts() == {"team": 1}
        h.watch.stores.put_pod(pod("c-scheduler-y", "c", "scheduler", "h0"))
        await h.settle()
        assert h.events.posted[-1][1:3] == ("Normal", "ParityDriverRestored")
        assert "run on driver 580.95.05 / CUDA 13.0 again" in h.events.posted[-1][3]
        assert h.watch.stores.places.counts() == {}

    run(test)


async def _scheduler_on_h100_workers_on_a100(h: Harness, *, legacy: bool = False) -> list[Any]:
    """A running cluster whose scheduler landed on the H100 class; the repair's JSON Patch."""
    h.nodes.upsert(node("h0", *H100))
    h.nodes.upsert(node("a0", *A100, legacy=legacy))
    doc = dask_cluster("c")
    h.watch.stores.put_cluster(doc)
    fixed = scheduler_deployment(doc)
    fixed["spec"]["template"]["spec"]["containers"][0]["resources"] = {
        "limits": {"nvidia.com/gpu": "1"}
    }
    h.watch.stores.put_deployment(fixed)
    h.watch.stores.put_pod(pod("c-scheduler-x", "c", "scheduler", "h0"))
    h.watch.stores.put_pod(pod("c-worker-a", "c", "worker", "a0"))
    await h.settle()
    await asyncio.sleep(0)
    assert "ParityDriverMismatch" in h.events.reasons()
    (_, _, ops) = h.patches[-1]
    return ops


def test_placement_repair_pins_the_scheduler_to_the_workers_class() -> None:
    async def test(h: Harness) -> None:
        ops = await _scheduler_on_h100_workers_on_a100(h)
        assert "580.95.05" in str(ops)

    run(test, repair=True)


def test_placement_repair_pins_with_the_legacy_labels_where_the_workers_nodes_have_only_those() -> (
    None
):
    # GFD before v0.15 labels only cuda.driver.major/minor/rev: a pin on the new keys would
    # match none of the workers' nodes, so the repaired scheduler could never be scheduled.
    async def test(h: Harness) -> None:
        ops = await _scheduler_on_h100_workers_on_a100(h, legacy=True)
        keys = {
            e["key"] for op in ops for term in _terms(op) for e in term.get("matchExpressions", [])
        }
        assert "nvidia.com/cuda.driver.major" in keys
        assert "nvidia.com/cuda.driver-version.full" not in keys

    run(test, repair=True)


def _terms(op: dict[str, Any]) -> list[dict[str, Any]]:
    """The node selector terms a JSON Patch operation writes, wherever in the affinity it lands."""
    value = op.get("value")
    found: list[dict[str, Any]] = []

    def walk(v: Any) -> None:
        if isinstance(v, dict):
            if "matchExpressions" in v:
                found.append(v)
            for item in v.values():
                walk(item)
        elif isinstance(v, list):
            for item in v:
                walk(item)

    walk(value)
    return found


@pytest.mark.parametrize("phase", ["Succeeded", "Failed"])
def test_finished_pods_do_not_count(phase: str) -> None:
    async def test(h: Harness) -> None:
        h.nodes.upsert(node("h0", *H100))
        h.nodes.upsert(node("a0", *A100))
        h.watch.stores.put_cluster(dask_cluster("c"))
        h.watch.stores.put_pod(pod("s", "c", "scheduler", "h0"))
        done = pod("w", "c", "worker", "a0")
        done["status"]["phase"] = phase
        h.watch.stores.put_pod(done)
        await h.settle()
        assert h.events.posted == []

    run(test)


def test_checks_start_while_listing_and_placement_waits_for_every_pod() -> None:
    async def test(h: Harness) -> None:
        h.nodes.upsert(node("h0", *H100))
        h.nodes.upsert(node("a0", *A100))
        for i in range(3):  # listed before the watch has seen every resource's LIST end
            doc = dask_cluster(f"c{i}")
            h.watch.stores.put_cluster(doc)
            h.watch.stores.put_deployment(scheduler_deployment(doc))
        h.watch.stores.put_pod(pod("c0-s", "c0", "scheduler", "h0"))
        h.watch.stores.put_pod(pod("c0-w", "c0", "worker", "a0"))
        for _ in range(50):
            await asyncio.sleep(0)
        assert h.events.reasons() == ["ParityDrift"] * 3  # spec checks did not wait
        assert h.watch.first_pass_seconds is None
        h.listed("daskclusters")
        h.listed("deployments")
        for _ in range(50):
            await asyncio.sleep(0)
        assert h.watch.first_pass_seconds is None  # pods not listed: no placement verdict yet
        assert "ParityDriverMismatch" not in h.events.reasons()
        h.listed("pods")
        await h.settle()
        assert h.events.reasons()[-1] == "ParityDriverMismatch"
        assert h.watch.first_pass_seconds is not None

    run(test, listed=False)


def test_first_pass_ends_without_any_cluster() -> None:
    async def test(h: Harness) -> None:
        await h.settle()
        assert h.watch.figures().watched == 0

    run(test)
