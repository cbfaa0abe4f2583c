"""Observed parity on DRA nodes: the drift watch reads a node's driver class from its devices.

DRA nodes carry no GFD labels (the GPU Operator's DRA stack deploys no GFD); their class is what
their ResourceSlice's devices report. Fleet: ``tests/fixtures/dra/pure-dra.yaml`` (sources in
its SOURCES.md): dra-a100-0 on 580.95.5 / 13.0, dra-h100-0 on 570.172.8 / 12.8.
"""

from __future__ import annotations

import copy
from typing import Any

from tests.unit.core.dra import items
from tests.unit.driftharness import Harness, dask_cluster, pod, run


def _dra_sinks(h: Harness) -> dict[str, Any]:
    sinks = {resource.kind: sink for resource, sink in h.state.sinks(dra=True)}
    for obj in items("pure-dra.yaml"):
        sinks["nodes" if obj["kind"] == "Node" else "resourceslices"].upsert(obj)
    sinks["deviceclasses"].listed()
    assert h.state.dra is not None
    for change in h.state.dra.release():  # as readiness does once everything is listed
        h.state.node_changed(change)
    return sinks


def test_a_scheduler_on_another_driver_than_its_workers_on_dra_nodes_is_reported() -> None:
    async def test(h: Harness) -> None:
        sinks = _dra_sinks(h)
        h.watch.stores.put_cluster(dask_cluster("c"))
        h.watch.stores.put_pod(pod("c-scheduler-x", "c", "scheduler", "dra-h100-0"))
        h.watch.stores.put_pod(pod("c-worker-a", "c", "worker", "dra-a100-0"))
        await h.settle()
        ((_, kind, reason, message),) = h.events.posted
        assert (kind, reason) == ("Warning", "ParityDriverMismatch")
        assert "runs on node dra-h100-0 with driver 570.172.8 / CUDA 12.8" in message
        assert "driver 580.95.5 / CUDA 13.0 (1 pod: c-worker-a on dra-a100-0)" in message

        # The H100 node's driver is upgraded: its slice now reports 580.95.5, as the A100's.
        [h100] = [
            o
            for o in items("pure-dra.yaml")
            if o["kind"] == "ResourceSlice" and o["spec"]["nodeName"] == "dra-h100-0"
        ]
        upgraded = copy.deepcopy(h100)
        upgraded["spec"]["pool"]["generation"] += 1
        for device in upgraded["spec"]["devices"]:
            device["attributes"]["driverVersion"] = {"version": "580.95.5"}
            device["attributes"]["cudaDriverVersion"] = {"version": "13.0.0"}
        sinks["resourceslices"].upsert(upgraded)
        await h.settle()
        assert h.events.reasons()[-1] == "ParityDriverRestored"

    run(test)


def test_pods_on_one_dra_driver_class_are_not_reported() -> None:
    async def test(h: Harness) -> None:
        _dra_sinks(h)
        h.watch.stores.put_cluster(dask_cluster("c"))
        h.watch.stores.put_pod(pod("c-scheduler-x", "c", "scheduler", "dra-gh200-0"))
        h.watch.stores.put_pod(pod("c-worker-a", "c", "worker", "dra-a100-0"))
        await h.settle()
        assert "ParityDriverMismatch" not in h.events.reasons()

    run(test)
