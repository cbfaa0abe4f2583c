"""A drift watch on a real event loop, fed objects as the informers would, for the unit tests.

Shared by ``test_driftwatch.py`` and ``test_podevents.py``.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Callable
from typing import Any

from dask_kubernetes.operator.controller import controller

from dask_gpu_parity.admission.runtime.driftwatch import DriftWatch
from dask_gpu_parity.admission.runtime.events import EventCounts
from dask_gpu_parity.admission.runtime.informer import Sink
from dask_gpu_parity.admission.runtime.reports import ReportCounts
from dask_gpu_parity.admission.runtime.state import OperatorState, Options
from dask_gpu_parity.core.policyreport import Outcome, Subject
from tests.unit.helpers import example


class Events:
    def __init__(self) -> None:
        self.posted: list[tuple[str, str, str, str]] = []
        self.refs: list[tuple[Any, str | None, str | None]] = []  # ref, name, field path

    def post(
        self,
        ref: Any,
        type_: str,
        reason: str,
        message: str,
        *,
        name: str | None = None,
        field_path: str | None = None,
    ) -> None:
        self.posted.append((ref["metadata"]["name"], type_, reason, message))
        self.refs.append((ref, name, field_path))

    async def run(self) -> None:
        await asyncio.Event().wait()

    def counts(self) -> EventCounts:
        return EventCounts()

    def reasons(self) -> list[str]:
        return [reason for _, _, reason, _ in self.posted]


class Reports:
    """The PolicyReports each cluster should have now, as the drift watch says."""

    def __init__(self) -> None:
        self.current: dict[tuple[str, str], tuple[Outcome, ...]] = {}
        self.subjects: dict[tuple[str, str], Subject] = {}
        self.first_pass = False
        self.removed: list[tuple[str, str]] = []

    def update(self, subject: Subject, outcomes: Any) -> None:
        key = (subject.namespace, subject.name)
        self.current[key] = tuple(outcomes)
        self.subjects[key] = subject

    def remove(self, key: tuple[str, str]) -> None:
        self.removed.append(key)
        self.current.pop(key, None)

    def first_pass_done(self) -> None:
        self.first_pass = True

    async def run(self) -> None:
        await asyncio.Event().wait()

    def counts(self) -> ReportCounts:
        return ReportCounts()

    def rules(self, name: str, namespace: str = "team") -> list[tuple[str, str]]:
        return [(o.rule, o.result) for o in self.current[(namespace, name)]]


def dask_cluster(name: str, namespace: str = "team") -> dict[str, Any]:
    doc = example("gpu-cluster-tcp.yaml")
    doc["metadata"] = {"name": name, "namespace": namespace, "uid": f"uid-{name}"}
    return doc


def scheduler_deployment(doc: dict[str, Any], *, generation: int = 1) -> dict[str, Any]:
    """What the dask operator builds from the cluster as admitted (no GPU: not mutated)."""
    meta = doc["metadata"]
    built = controller.build_scheduler_deployment_spec(
        meta["name"], copy.deepcopy(doc["spec"]["scheduler"]["spec"]), {}, {}
    )
    built["metadata"] |= {"namespace": meta["namespace"], "uid": "d", "generation": generation}
    return built


def pod(name: str, cluster: str, component: str, node_name: str, ns: str = "team") -> dict:
    labels = {"dask.org/cluster-name": cluster, "dask.org/component": component}
    return {
        "metadata": {"name": name, "namespace": ns, "labels": labels},
        "spec": {"nodeName": node_name},
        "status": {"phase": "Running"},
    }


class Harness:
    def __init__(self, *, repair: bool = False) -> None:
        self.state = OperatorState(Options(certfile="", keyfile=""))
        self.events = Events()
        self.reports = Reports()
        self.patches: list[tuple[str, str, list[Any]]] = []

        async def patch(namespace: str, name: str, ops: list[Any]) -> None:
            self.patches.append((namespace, name, ops))

        self.watch = DriftWatch(self.state, self.events, patch, self.reports)
        self.state.drift = self.watch
        sinks = {resource.kind: sink for resource, sink in self.state.sinks()}
        self.nodes, self.namespaces = sinks["nodes"], sinks["namespaces"]
        if repair:
            sinks["daskgpupolicies"].upsert(
                {
                    "apiVersion": "gpuparity.dask.org/v1alpha1",
                    "kind": "DaskGPUPolicy",
                    "metadata": {"name": "repair"},
                    "spec": {"drift": {"repair": True}},
                }
            )
        self.namespaces.upsert({"metadata": {"name": "team"}})

    def listed(self, kind: str) -> None:
        """The drift watch's informer of ``kind`` has listed everything."""
        sink: Sink = {r.kind: s for r, s in self.watch.sinks()}[kind]
        sink.listed()

    async def settle(self) -> None:
        """Let the watch check everything marked."""
        for _ in range(200):
            await asyncio.sleep(0)
            if not self.watch.pending and self.watch.first_pass_seconds is not None:
                return
        raise AssertionError("the drift watch did not settle")


def run(test: Callable[[Harness], Any], *, listed: bool = True, **kwargs: Any) -> Harness:
    """Run ``test`` with the watch running (its resources listed, unless ``listed`` is false)."""
    harness = Harness(**kwargs)

    async def main() -> None:
        task = asyncio.create_task(harness.watch.run())
        if listed:
            for _, sink in harness.watch.sinks():
                sink.listed()
        try:
            await test(harness)
        finally:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

    asyncio.run(main())
    return harness
