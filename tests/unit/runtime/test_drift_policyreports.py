"""What each GPU DaskCluster's PolicyReport says, as the drift watch keeps it current.

Expected verdicts: a drifted cluster fails with the codes of its spec's findings; a fixed one
passes with one result; a scheduler on another driver than its workers adds a failing
ParityDriverMismatch; a CPU cluster, an opted-out one and a deleted one have no report.
"""

from __future__ import annotations

import asyncio
import copy

from dask_gpu_parity.core.engine import evaluate
from tests.unit.driftharness import Harness, dask_cluster, pod, run, scheduler_deployment
from tests.unit.gpunodes import node

A100 = ("580.95.05", "13.0")
H100 = ("570.172.08", "12.8")


def _with_parity(doc: dict) -> dict:
    """The scheduler Deployment the dask operator builds from a cluster our webhook mutated."""
    deployment = scheduler_deployment(doc)
    container = deployment["spec"]["template"]["spec"]["containers"][0]
    container["resources"] = {"limits": {"nvidia.com/gpu": "1"}}
    return deployment


def test_a_drifted_gpu_cluster_fails_with_its_findings_and_passes_once_repaired() -> None:
    async def test(h: Harness) -> None:
        doc = dask_cluster("c")
        h.watch.stores.put_cluster(doc)
        h.watch.stores.put_deployment(scheduler_deployment(doc))
        await h.settle()
        assert ("DGP001", "fail") in h.reports.rules("c")
        assert h.reports.subjects[("team", "c")].uid == "uid-c"
        assert h.reports.first_pass

        fixed = scheduler_deployment(evaluate(doc).patched, generation=2)  # repaired
        h.watch.stores.put_deployment(fixed)
        await h.settle()
        assert h.reports.rules("c") == [("parity", "pass")]

    run(test)


def test_a_scheduler_on_another_driver_than_its_workers_adds_a_failing_mismatch() -> None:
    async def test(h: Harness) -> None:
        h.nodes.upsert(node("h0", *H100))
        h.nodes.upsert(node("a0", *A100))
        doc = dask_cluster("c")
        h.watch.stores.put_cluster(doc)
        h.watch.stores.put_deployment(_with_parity(doc))
        h.watch.stores.put_pod(pod("c-scheduler-x", "c", "scheduler", "h0"))
        h.watch.stores.put_pod(pod("c-worker-a", "c", "worker", "a0"))
        await h.settle()
        assert ("ParityDriverMismatch", "fail") in h.reports.rules("c")

        h.watch.stores.drop_pod("team/c-scheduler-x")
        h.watch.stores.put_pod(pod("c-scheduler-y", "c", "scheduler", "a0"))
        await h.settle()
        assert "ParityDriverMismatch" not in [rule for rule, _ in h.reports.rules("c")]

    run(test)


def test_cpu_opted_out_and_deleted_clusters_have_no_report() -> None:
    async def test(h: Harness) -> None:
        cpu = dask_cluster("cpu")
        for spec in (cpu["spec"]["worker"]["spec"], cpu["spec"]["scheduler"]["spec"]):
            for container in spec["containers"]:
                container.pop("resources", None)
        gpu, gone = dask_cluster("gpu"), dask_cluster("gone")
        for doc in (cpu, gpu, gone):
            h.watch.stores.put_cluster(doc)
            h.watch.stores.put_deployment(scheduler_deployment(doc))
        await h.settle()
        assert set(h.reports.current) == {("team", "gpu"), ("team", "gone")}

        h.watch.stores.drop_cluster("team/gone")
        opted = copy.deepcopy(gpu)
        opted["metadata"]["annotations"] = {"gpuparity.dask.org/skip": "true"}
        h.watch.stores.put_cluster(opted)
        await h.settle()
        assert h.reports.current == {}

    run(test)


def test_a_restart_deletes_nothing_while_deployments_are_still_being_listed() -> None:
    """Clusters are listed before their scheduler Deployments: until every Deployment is
    listed, a cluster without one may simply not have been seen yet."""

    async def test(h: Harness) -> None:
        h.reports.current[("team", "c")] = ()  # read back from before the restart
        doc = dask_cluster("c")
        h.watch.stores.put_cluster(doc)
        h.listed("daskclusters")
        h.listed("pods")
        for _ in range(50):
            await asyncio.sleep(0)
        assert ("team", "c") in h.reports.current
        assert h.reports.removed == []
        h.watch.stores.put_deployment(scheduler_deployment(doc))
        h.listed("deployments")
        await h.settle()
        assert ("DGP001", "fail") in h.reports.rules("c")
        assert h.reports.removed == []

    run(test, listed=False)
