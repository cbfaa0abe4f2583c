"""The drift watch's memory for a first pass, in a process of its own fed as the informers feed it.

Usage: python -m benchmarks.drift_memory --sizes 5000/1000/10000,15000/3000/30000 --rounds 3
           [--tree before=/tmp/before/operator] [--tree after=operator] [--dra]

Each run is a fresh interpreter (``--one GPU/CPU/CLUSTERS``) that imports what the operator imports
(the webhook server, kopf), then receives GPU and CPU nodes, GPU DaskClusters and their scheduler
Deployments as LIST pages of 500 objects: JSON bytes made one page at a time and decoded as
``informer.py`` decodes them (``listpage.py``; ``json.loads`` for a tree from before it), never a
list of every object. DaskCluster and Deployment pages alternate (their informers run side by side)
and the event loop turns between pages, so checks run while the lists do. Events go to a real
``EventPoster`` that is never run: its queue holds what a first pass queues (at most
``events.QUEUE``), as it would while the API server takes 50 a second; so does a real
``PolicyReports`` (as the operator runs by default): each GPU cluster's report is wanted, and few
are written during a first pass. At the end of the first pass the run reports VmHWM and VmRSS
(``/proc/self/status``), and with ``--trace`` the Python heap kept and its peak (tracemalloc, which
costs memory of its own: a traced run's VmHWM is not reported). Each run also reports its CPU
seconds from the first node page to the end of the pass, less what making the pages cost
(``cpu_s``), and the cyclic collector's runs of the oldest generation (``full_collections``) and
seconds in all generations (``collector_s``), with the thresholds the tree's operator sets
(``collector.py``; CPython's own for a tree from before it). ``--tree NAME=DIR`` runs the package
from another checkout's ``operator/`` directory (a before and after, side by side); the sweep
reports medians. ``--dra``: the API server serves ``resource.k8s.io/v1`` (as the proving ground's
does), so Nodes go through ``DraNodes`` with the DeviceClasses and ResourceSlices (none here: the
nodes' GPUs are the device plugin's). ``benchmarks/scale.py`` measures the whole operator on the
proving ground; this leaves out the API client's buffers and the metrics and webhook threads.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from benchmarks.procfs import proc_status

PAGE = 500  # objects per LIST page, as informer.PAGE_SIZE
T = TypeVar("T")


def status_mib() -> dict[str, float]:
    """VmHWM and VmRSS of this process, MiB."""
    return {field: value / 2**20 for field, value in proc_status("self").items()}


def template_objects(gpu: int, cpu: int, clusters: int) -> dict[str, Any]:
    """One object of each kind, the names of the nodes and the namespaces (made by the parent).

    The child imports none of the proving ground (the Kubernetes client, dask-kubernetes): the
    operator does not.
    """
    import dataclasses

    from dask_kubernetes.operator.controller import controller

    from benchmarks.scale import NAMESPACES, Size, gpu_pools
    from provingground import POOLS
    from provingground.parity import example
    from provingground.pools import node_manifest

    cluster = example("gpu-cluster-tcp.yaml")
    deployment = controller.build_scheduler_deployment_spec(
        "c", cluster["spec"]["scheduler"]["spec"], {}, {}
    )
    pools = gpu_pools(Size(gpu, cpu, clusters))
    pools.append(dataclasses.replace(POOLS["cpu"], name="fleet-cpu", size=cpu))
    nodes = [
        {
            "manifest": node_manifest(pool, 0),
            "names": [pool.node_name(i) for i in range(pool.size)],
        }
        for pool in pools
        if pool.size
    ]
    return {
        "cluster": cluster,
        "deployment": deployment,
        "nodes": nodes,
        "namespaces": list(NAMESPACES),
    }


def pages(make: Any, count: int) -> Iterator[bytes]:
    """LIST pages of ``make(i)`` for ``i < count``, as the API server sends them."""
    for start in range(0, count, PAGE):
        items = [make(i) for i in range(start, min(count, start + PAGE))]
        more = start + PAGE < count
        meta = {"resourceVersion": "1", **({"continue": f"p{start + PAGE}"} if more else {})}
        page = {"kind": "List", "apiVersion": "v1", "metadata": meta, "items": items}
        yield json.dumps(page, separators=(",", ":")).encode()
        del items


def node_pages(templates: dict[str, Any]) -> Iterator[bytes]:
    """Every node, in LIST pages."""
    plan = [
        (text, f'"{pool["names"][0]}"', name)
        for pool in templates["nodes"]
        for text in [json.dumps(pool["manifest"])]
        for name in pool["names"]
    ]

    def node(i: int) -> dict[str, Any]:
        text, first, name = plan[i]
        found: dict[str, Any] = json.loads(text.replace(first, f'"{name}"'))
        return found

    yield from pages(node, len(plan))


def made(pages: Iterator[T], spent: list[float]) -> Iterator[T]:
    """The pages, with the CPU seconds spent making them added to ``spent[0]`` (the benchmark's
    share of the run, not the watch's)."""
    while True:
        started = time.process_time()
        page = next(pages, None)
        spent[0] += time.process_time() - started
        if page is None:
            return
        yield page


class Collections:
    """The cyclic collector's runs while it is installed: how many, and their seconds."""

    def __init__(self) -> None:
        self.runs = [0, 0, 0]
        self.seconds = [0.0, 0.0, 0.0]
        self._started = 0.0

    def __call__(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._started = time.perf_counter()
        else:
            self.runs[info["generation"]] += 1
            self.seconds[info["generation"]] += time.perf_counter() - self._started


def cluster_pages(templates: dict[str, Any], clusters: int) -> Iterator[tuple[bytes, bytes]]:
    """Every DaskCluster and scheduler Deployment, in LIST pages of each, side by side."""
    namespaces = templates["namespaces"]
    cluster_text = json.dumps(templates["cluster"])
    deployment_text = json.dumps(templates["deployment"])

    def cluster(i: int) -> dict[str, Any]:
        doc: dict[str, Any] = json.loads(cluster_text)
        ns, name = namespaces[i % len(namespaces)], f"c-{i:05d}"
        doc["metadata"] = {"name": name, "namespace": ns, "uid": f"u{i:08d}"}
        return doc

    def deployment(i: int) -> dict[str, Any]:
        doc: dict[str, Any] = json.loads(
            deployment_text.replace('"c-scheduler"', f'"c-{i:05d}-scheduler"')
        )
        ns, name = namespaces[i % len(namespaces)], f"c-{i:05d}"
        doc["metadata"]["labels"]["dask.org/cluster-name"] = name
        doc["metadata"] |= {"namespace": ns, "uid": f"d{i:08d}", "generation": 1}
        return doc

    yield from zip(pages(cluster, clusters), pages(deployment, clusters), strict=True)


async def first_pass(
    gpu: int, cpu: int, clusters: int, templates: dict[str, Any], *, dra: bool = False
) -> dict[str, Any]:
    """The first pass of a drift watch fed by pages; what the process holds at its end."""
    from dask_gpu_parity.admission.runtime import state as operator
    from dask_gpu_parity.admission.runtime.driftstore import CLUSTERS, DEPLOYMENTS, PODS
    from dask_gpu_parity.admission.runtime.driftwatch import DriftWatch
    from dask_gpu_parity.admission.runtime.events import EventPoster
    from dask_gpu_parity.admission.runtime.reports import PolicyReports
    from dask_gpu_parity.admission.runtime.state import OperatorState, Options

    figures: dict[str, Any] = {"imported_rss_mib": round(status_mib()["VmRSS"], 1)}
    read = as_operator()
    state = OperatorState(Options(certfile="", keyfile=""))
    poster = EventPoster(None)  # type: ignore[arg-type]  # never run: the queue as it fills

    async def patch(namespace: str, name: str, ops: list[Any]) -> None:
        pass

    reports = PolicyReports(None)  # type: ignore[arg-type]  # never run: every report wanted
    watch = DriftWatch(state, poster, patch, reports)
    state.drift = watch
    sinks, feeds = dict(state.sinks(dra=dra)), dict(watch.sinks())
    task = asyncio.create_task(watch.run())

    async def feed(sink: Any, body: bytes) -> None:
        items = read(body)
        for obj in items:
            sink.upsert(obj)
        del items
        await asyncio.sleep(0)  # the next page is awaited: the checks run meanwhile

    making = [0.0]
    collections = Collections()
    gc.callbacks.append(collections)
    started = time.process_time()
    for body in made(node_pages(templates), making):
        await feed(sinks[operator.NODES], body)
    sinks[operator.NODES].listed()
    sinks[operator.NAMESPACES].upsert({"metadata": {"name": "default"}})
    for resource, sink in sinks.items():
        if resource is not operator.NODES:
            sink.listed()

    for cluster_page, deployment_page in made(cluster_pages(templates, clusters), making):
        await feed(feeds[CLUSTERS], cluster_page)
        await feed(feeds[DEPLOYMENTS], deployment_page)
    for resource in (CLUSTERS, DEPLOYMENTS, PODS):
        feeds[resource].listed()
    while watch.first_pass_seconds is None:
        await asyncio.sleep(0)
    gc.callbacks.remove(collections)
    figures["cpu_s"] = round(time.process_time() - started - making[0], 2)
    figures["full_collections"] = collections.runs[2]
    figures["collector_s"] = round(sum(collections.seconds), 2)
    figures |= {f"{k}_mib": round(v, 1) for k, v in status_mib().items()}
    if tracemalloc.is_tracing():
        kept, peak = tracemalloc.get_traced_memory()
        figures |= {"kept_mib": round(kept / 2**20, 1), "peak_mib": round(peak / 2**20, 1)}
    counts = poster.counts()
    figures |= {"events_queued": counts.pending, "events_dropped": counts.dropped}
    figures["checks"] = watch.checks
    task.cancel()
    await asyncio.gather(task, return_exceptions=True)
    return figures


def as_operator() -> Callable[[bytes], list[Any]]:
    """This process set up as the tree's operator runs: its collector's thresholds
    (``collector.py``), and a LIST page's items as its informer decodes them (``listpage.py``).
    A tree from before either keeps CPython's thresholds or ``json.loads``."""
    try:
        from dask_gpu_parity.admission.runtime import collector
    except ImportError:
        pass
    else:
        collector.configure()
    try:
        from dask_gpu_parity.admission.runtime import listpage
    except ImportError:
        return lambda body: list(json.loads(body).get("items") or [])
    return lambda body: listpage.decode(body).items


def one(size: str, templates: Path, trace: bool, dra: bool = False) -> dict[str, Any]:
    """One first pass in this process."""
    from dask_gpu_parity.admission.runtime import server  # noqa: F401 (what the operator imports)

    gpu, cpu, clusters = (int(x) for x in size.split("/"))
    objects = json.loads(templates.read_text())[size]
    if trace:
        tracemalloc.start()  # after the imports: what the watch and its input cost
    figures = asyncio.run(first_pass(gpu, cpu, clusters, objects, dra=dra))
    if trace:
        del figures["VmHWM_mib"], figures["VmRSS_mib"]
    return figures


def child(tree: str, size: str, templates: Path, *, trace: bool, dra: bool) -> dict[str, Any]:
    """One run in a fresh interpreter, with the package from ``tree``."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [tree, env.get("PYTHONPATH", "")]))
    command = [sys.executable, "-m", "benchmarks.drift_memory", "--one", size]
    command += ["--templates", str(templates)] + (["--trace"] if trace else [])
    command += ["--dra"] if dra else []
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=True)
    figures: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return figures


def sweep(
    sizes: list[str], trees: dict[str, str], rounds: int, trace: bool, dra: bool = False
) -> None:
    """Each size: ``rounds`` runs of each tree, interleaved, then one traced run of each."""
    with tempfile.TemporaryDirectory() as scratch:
        templates = Path(scratch, "templates.json")
        made = {size: template_objects(*(int(x) for x in size.split("/"))) for size in sizes}
        templates.write_text(json.dumps(made))
        del made
        for size in sizes:
            runs: dict[str, list[dict[str, Any]]] = {name: [] for name in trees}
            for _ in range(rounds):
                for name, tree in trees.items():
                    runs[name].append(child(tree, size, templates, trace=False, dra=dra))
            for name, tree in trees.items():
                row: dict[str, Any] = {"size": size, "tree": name, "dra": dra}
                for field in ("VmHWM_mib", "VmRSS_mib", "cpu_s", "collector_s"):
                    values = [r[field] for r in runs[name]]
                    row[field] = [statistics.median(values), values]
                row["full_collections"] = [r["full_collections"] for r in runs[name]]
                row |= {k: runs[name][0][k] for k in ("imported_rss_mib", "events_queued")}
                if trace:
                    traced = child(tree, size, templates, trace=True, dra=dra)
                    row |= {"kept_mib": traced["kept_mib"], "peak_mib": traced["peak_mib"]}
                print(json.dumps(row), flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="5000/1000/10000", help="GPU/CPU/CLUSTERS,...")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tree", action="append", default=[], help="NAME=DIR (operator/)")
    parser.add_argument("--no-trace", action="store_true", help="skip the tracemalloc runs")
    parser.add_argument(
        "--dra", action="store_true", help="resource.k8s.io/v1 served: Nodes go through DraNodes"
    )
    parser.add_argument("--one", help=argparse.SUPPRESS)
    parser.add_argument("--templates", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--trace", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(one(args.one, args.templates, args.trace, args.dra)))
        return 0
    trees = dict(t.split("=", 1) for t in args.tree) or {"this": "operator"}
    sweep(args.sizes.split(","), trees, args.rounds, not args.no_trace, args.dra)
    return 0


if __name__ == "__main__":
    sys.exit(main())
