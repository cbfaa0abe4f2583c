"""audit's own CPU, in process: no API server; the objects as the proving ground lists them.

Usage: python -m benchmarks.audit_inprocess [--nodes 5000] [--clusters 10000] [--distinct]
       [--rounds 3] [--profile FILE]

Builds what ``audit -A`` lists from ``benchmarks/audit_scale.py``'s proving ground (GPU nodes of
the scale benchmark's three driver classes, Ready as kwok makes them; GPU DaskClusters from the
TCP example in 5 namespaces) and times, per round, ``audit()`` (inventory, policies, evaluation,
verdicts) and the JSON report. ``--distinct`` gives every DaskCluster a worker env value of its
own, so no two specs are equal and none shares an evaluation: the worst case of a fleet. Run it
with another checkout's ``operator/`` first on PYTHONPATH for a before and after.
``--profile`` writes cProfile stats of the last round.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import io
import json
import statistics
import sys
import time
from collections.abc import Mapping
from typing import Any

from benchmarks.scale import NAMESPACES, Size, gpu_pools
from dask_gpu_parity.audit import ClusterState, audit
from dask_gpu_parity.cli.audit_report import render_audit
from provingground.parity import example
from provingground.pools import node_manifest

READY = {"type": "Ready", "status": "True"}  # kwok's node-initialize stage sets it


def state(nodes: int, clusters: int, distinct: bool) -> ClusterState:
    """What `audit -A` would have listed, as plain JSON objects."""
    listed: list[Mapping[str, Any]] = []
    for pool in gpu_pools(Size(nodes, 0, clusters)):
        for i in range(pool.size):
            node = node_manifest(pool, i)
            node["status"]["conditions"] = [dict(READY)]
            listed.append(node)
    template = json.dumps(example("gpu-cluster-tcp.yaml"))
    resources: list[Mapping[str, Any]] = []
    for i in range(clusters):
        doc: dict[str, Any] = json.loads(template)
        doc["metadata"] = {"name": f"c-{i:05d}", "namespace": NAMESPACES[i % len(NAMESPACES)]}
        doc["metadata"]["uid"] = f"uid-{i}"
        if distinct:
            worker = doc["spec"]["worker"]["spec"]["containers"][0]
            worker.setdefault("env", []).append({"name": "BENCH_ID", "value": str(i)})
        resources.append(doc)
    namespaces: dict[str, Mapping[str, Any]] = {ns: {"metadata": {"name": ns}} for ns in NAMESPACES}
    return ClusterState(resources=resources, nodes=listed, namespaces=namespaces)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=5000)
    parser.add_argument("--clusters", type=int, default=10000)
    parser.add_argument("--distinct", action="store_true")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--profile")
    args = parser.parse_args(argv)
    listed = state(args.nodes, args.clusters, args.distinct)
    gc.disable()  # as the CLI runs audit
    timings: dict[str, list[float]] = {"audit": [], "report": []}
    for n in range(args.rounds):
        profiler = cProfile.Profile() if args.profile and n == args.rounds - 1 else None
        if profiler:
            profiler.enable()
        started = time.process_time()
        audited = audit(listed)
        timings["audit"].append(time.process_time() - started)
        started = time.process_time()
        io.StringIO().write(render_audit("json", audited))
        timings["report"].append(time.process_time() - started)
        if profiler:
            profiler.disable()
            profiler.dump_stats(args.profile)
    kind = "distinct" if args.distinct else "identical"
    print(f"{args.nodes:,} GPU nodes, {args.clusters:,} DaskClusters ({kind} specs)")
    for stage, values in timings.items():
        each = " / ".join(f"{v:.2f}" for v in values)
        median = statistics.median(values)
        per = f"{median / args.clusters * 1000:.3f} ms a cluster"
        print(f"{stage:>8}: {median:.2f} s CPU median ({each}), {per}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
