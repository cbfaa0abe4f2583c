"""`dask-gpu-parity audit -A` on a large proving ground: wall time and peak memory.

Usage: python -m benchmarks.audit_scale [--sizes 1000/200/1000,5000/1000/10000] [--runs 3]
       [--dra SHARE]

One proving ground grows through the sizes (GPU/CPU/CLUSTERS), built by benchmarks/scale.py's
generators: kwok GPU nodes in three driver classes, CPU nodes, GPU DaskClusters in 5 namespaces
with their scheduler Deployments (``replicas: 0``: no Pods). At each size `audit -A -o json`
runs ``--runs`` times as a subprocess with the proving ground's kubeconfig (the real CLI: the
kubeconfig loaded, every list paginated 500 a page, every resource evaluated); each run's wall
time and the child's peak RSS (ru_maxrss) are printed, and a Markdown table at the end.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.scale import grow_clusters, grow_nodes, grow_slices, parse_sizes, start_ground
from provingground import api_client


def _audit(kubeconfig: Path) -> tuple[float, int, int]:
    """Wall seconds, peak RSS in MiB, and the resources reported, of one `audit -A`."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    started = time.perf_counter()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "dask_gpu_parity.cli",
            "audit",
            "-A",
            "-o",
            "json",
            "--exit-zero",
            "--kubeconfig",
            str(kubeconfig),
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"audit failed ({done.returncode}): {done.stderr.strip()}")
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    resources = len(json.loads(done.stdout)["resources"])
    return seconds, max(peak, before) // 1024, resources


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=parse_sizes, default=parse_sizes("1000/200/1000"))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--dra", type=float, default=0.0)
    args = parser.parse_args(argv)
    cp = start_ground(Path(tempfile.mkdtemp(prefix="dgp-audit-scale-")))
    api = api_client(cp.kubeconfig, pool_size=32)
    rows = []
    try:
        for size in args.sizes:
            print(f"\n== {size}", flush=True)
            grow_nodes(api, size, args.dra)
            grow_clusters(cp, size)
            if slices := grow_slices(cp, api, size, args.dra):
                print(f"  {slices}", flush=True)
            for run in range(args.runs):
                seconds, mib, found = _audit(cp.kubeconfig)
                print(f"  run {run + 1}: {seconds:.2f} s, peak RSS {mib} MiB, {found} resources")
                rows.append((str(size), seconds, mib, found))
    finally:
        api.close()
        cp.stop()
    print(f"\nload average at the end: {os.getloadavg()[0]:.1f}\n")
    print("| size | audit -A -o json | peak RSS | resources reported |")
    print("| --- | --- | --- | --- |")
    for size, seconds, mib, found in rows:
        print(f"| {size} | {seconds:.1f} s | {mib} MiB | {found:,} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
