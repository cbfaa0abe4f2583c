"""The drift watch's own CPU for a first pass, in process: no API server, no other load.

Usage: python -m benchmarks.drift_pass [--nodes 5000] [--clusters 10000] [--distinct]
           [--profile FILE]
       python -m benchmarks.drift_pass --sizes 500/1000,2000/4000,5000/10000 --rounds 3
           [--record benchmarks/results/drift_pass.json]

Feeds the operator's state and drift watch what the informers would (GPU nodes in the scale
benchmark's three driver classes, GPU DaskClusters and the scheduler Deployments dask-kubernetes
builds for them), then runs the first pass, and reports the CPU time of each stage: taking the
nodes in, taking the clusters and Deployments in, and checking them all. ``benchmarks/scale.py``
measures the same operator end to end on the proving ground, where the API server and the rest
of the machine share the cores; this isolates what is ours. ``--profile`` writes cProfile stats.
The clusters are stamped from one example, as a fleet's clusters are from a few templates, so the
watch evaluates one of them and shares the verdict; ``--distinct`` gives each cluster's workers an
environment value of its own, so that no two share one (the worst case for that sharing).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import sys
import time
import tracemalloc
from pathlib import Path
from typing import Any

from dask_kubernetes.operator.controller import controller

from benchmarks.results import commit, record
from benchmarks.scale import NAMESPACES, Size, gpu_pools
from dask_gpu_parity.admission.runtime import collector
from dask_gpu_parity.admission.runtime import state as operator
from dask_gpu_parity.admission.runtime.driftstore import CLUSTERS, DEPLOYMENTS
from dask_gpu_parity.admission.runtime.driftwatch import DriftWatch
from dask_gpu_parity.admission.runtime.events import EventCounts
from dask_gpu_parity.admission.runtime.state import OperatorState, Options
from provingground.parity import example
from provingground.pools import node_manifest


class Events:
    """Counts Events instead of posting them."""

    def __init__(self) -> None:
        self.posted = 0

    def post(self, ref: Any, type_: str, reason: str, message: str, **_: Any) -> None:
        self.posted += 1

    async def run(self) -> None:
        await asyncio.Event().wait()

    def counts(self) -> EventCounts:
        return EventCounts()


async def _patch(namespace: str, name: str, ops: list[Any]) -> None:
    pass


def objects(
    clusters: int, *, distinct: bool = False
) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    template = example("gpu-cluster-tcp.yaml")
    out = []
    for i in range(clusters):
        ns, name = NAMESPACES[i % len(NAMESPACES)], f"c-{i:05d}"
        doc = json.loads(json.dumps(template))
        doc["metadata"] = {"name": name, "namespace": ns, "uid": f"u{i}"}
        if distinct:
            worker = doc["spec"]["worker"]["spec"]["containers"][0]
            worker.setdefault("env", []).append({"name": "CLUSTER_SERIAL", "value": str(i)})
        deployment = controller.build_scheduler_deployment_spec(
            name, doc["spec"]["scheduler"]["spec"], {}, {}
        )
        deployment["metadata"] |= {"namespace": ns, "uid": f"d{i}", "generation": 1}
        out.append((doc, deployment))
    return out


async def first_pass(nodes: int, clusters: int, *, distinct: bool = False) -> dict[str, float]:
    collector.configure()  # as the operator's process runs
    state = OperatorState(Options(certfile="", keyfile=""))
    events = Events()
    watch = DriftWatch(state, events, _patch)
    state.drift = watch
    manifests = [
        node_manifest(pool, i)
        for pool in gpu_pools(Size(nodes, 0, clusters))
        for i in range(pool.size)
    ]
    pairs = objects(clusters, distinct=distinct)
    times: dict[str, float] = {}
    task = asyncio.create_task(watch.run())
    started = time.process_time()
    sinks = dict(state.sinks())
    for manifest in manifests:
        sinks[operator.NODES].upsert(manifest)
    sinks[operator.NAMESPACES].upsert({"metadata": {"name": "default"}})
    times["nodes in"] = time.process_time() - started
    started = time.process_time()
    feeds = dict(watch.sinks())
    for doc, deployment in pairs:
        feeds[CLUSTERS].upsert(doc)
        feeds[DEPLOYMENTS].upsert(deployment)
    for sink in feeds.values():
        sink.listed()
    del manifests, pairs  # the informers' pages: gone once taken in
    times["clusters in"] = time.process_time() - started
    started = time.process_time()
    while watch.first_pass_seconds is None:
        await asyncio.sleep(0)
    times["first pass checks"] = time.process_time() - started
    times["events"] = events.posted
    if tracemalloc.is_tracing():  # what the state holds with every cluster checked
        current, peak = tracemalloc.get_traced_memory()
        times["heap MiB"], times["heap peak MiB"] = current / 2**20, peak / 2**20
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    return times


def heap(nodes: int, clusters: int) -> tuple[float, float]:
    """MiB of Python heap the drift watch holds after its first pass, and the peak (tracemalloc)."""
    tracemalloc.start()
    try:
        times = asyncio.run(first_pass(nodes, clusters))
    finally:
        tracemalloc.stop()
    return times["heap MiB"], times["heap peak MiB"]


def sweep(sizes: list[tuple[int, int]], rounds: int) -> list[dict[str, Any]]:
    """Each size ``rounds`` times (CPU per stage), then once for the heap."""
    rows = []
    for nodes, clusters in sizes:
        runs = [asyncio.run(first_pass(nodes, clusters)) for _ in range(rounds)]
        kept, peak = heap(nodes, clusters)
        row: dict[str, Any] = {"gpu_nodes": nodes, "clusters": clusters}
        for stage in ("nodes in", "clusters in", "first pass checks"):
            key = stage.replace("first pass checks", "first pass").replace(" ", "_") + "_cpu_s"
            row[key] = [round(r[stage], 2) for r in runs]
        row |= {"heap_after_mib": round(kept, 1), "heap_peak_mib": round(peak, 1)}
        row["events"] = int(runs[0]["events"])
        print(json.dumps(row), flush=True)
        rows.append(row)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--clusters", type=int, default=10000)
    parser.add_argument("--profile", type=Path)
    parser.add_argument("--memory", action="store_true", help="tracemalloc: what is kept")
    parser.add_argument("--distinct", action="store_true", help="no two clusters alike")
    parser.add_argument("--sizes", help="NODES/CLUSTERS,...: a sweep (with --rounds)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--record", type=Path, help="append the sweep to this results file")
    args = parser.parse_args(argv)
    if args.sizes:
        sizes = [tuple(int(x) for x in part.split("/")) for part in args.sizes.split(",")]
        rows = sweep([(n, c) for n, c in sizes], args.rounds)
        if args.record:
            record(
                args.record,
                {
                    "commit": commit(),
                    "label": f"sweep, {args.rounds} rounds a size",
                    "machine": f"{os.cpu_count()} cores, load average "
                    f"{os.getloadavg()[0]:.1f} at the end",
                    "command": "python -m benchmarks.drift_pass " + " ".join(argv or sys.argv[1:]),
                    "rows": rows,
                },
            )
        return 0
    if args.memory:
        tracemalloc.start()
    profiler = cProfile.Profile() if args.profile else None
    if profiler:
        profiler.enable()
    times = asyncio.run(first_pass(args.nodes, args.clusters, distinct=args.distinct))
    if profiler:
        profiler.disable()
        profiler.dump_stats(args.profile)
    for stage, value in times.items():
        unit = "" if stage == "events" or "MiB" in stage else " s CPU"
        per = (
            f" ({value / args.clusters * 1000:.2f} ms per cluster)"
            if "clusters" in stage or "pass" in stage
            else ""
        )
        print(f"{stage:>18}: {value:.2f}{unit}{per}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
