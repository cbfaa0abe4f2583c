"""`dask-gpu-parity audit -A` on a large proving ground: wall time and peak memory.

Usage: python -m benchmarks.audit_scale [--sizes 1000/200/1000,5000/1000/10000] [--runs 3]
       [--dra SHARE] [--before CHECKOUT] [--record benchmarks/results/audit_scale.json]

One proving ground grows through the sizes (GPU/CPU/CLUSTERS), built by benchmarks/scale.py's
generators: kwok GPU nodes in three driver classes, CPU nodes, GPU DaskClusters in 5 namespaces
with their scheduler Deployments (``replicas: 0``: no Pods). At each size `audit -A -o json`
runs ``--runs`` times as a subprocess with the proving ground's kubeconfig (the real CLI: the
kubeconfig loaded, every list paginated 500 a page, every resource evaluated); each run's wall
time and the child's own peak RSS (its VmHWM, reported at exit) are printed, and a Markdown
table at the end.

``--before CHECKOUT`` runs another checkout's package (its ``operator/``: e.g. ``git archive``
of an earlier commit) beside this one, the two alternating within each round, so both meet the
same machine. ``--record FILE`` appends the run to a results file (``benchmarks/results.py``),
from which ``make figures`` draws ``docs/figures/audit-scale.svg``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.results import ROOT, commit, record
from benchmarks.scale import grow_clusters, grow_nodes, grow_slices, parse_sizes, start_ground
from provingground import api_client

# The CLI as `python -m dask_gpu_parity.cli` runs it, reporting its own high-water mark at exit:
# a child's ru_maxrss (wait4) starts from its parent's size, as Linux keeps the larger of the
# image it replaces and its own.
_CLI = """
import atexit, sys
def _hwm():
    with open("/proc/self/status") as status:
        kib = next(line.split()[1] for line in status if line.startswith("VmHWM:"))
    sys.stderr.write(f"\\nVmHWM {kib}\\n")
atexit.register(_hwm)
from dask_gpu_parity.cli import main
sys.exit(main(sys.argv[1:]))
"""


def _audit(kubeconfig: Path, package: Path) -> tuple[float, int, int]:
    """Wall seconds, the child's peak RSS in MiB, and the resources reported, of one `audit -A`."""
    argv = [sys.executable, "-c", _CLI, "audit", "-A", "-o", "json"]
    argv += ["--exit-zero", "--kubeconfig", str(kubeconfig)]
    env = {**os.environ, "PYTHONPATH": f"{package}{os.pathsep}{ROOT}"}
    started = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, env=env, check=False, timeout=900)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"audit failed ({done.returncode}): {done.stderr.strip()}")
    kib = int(done.stderr.rsplit("VmHWM ", 1)[1].split()[0])
    return seconds, kib // 1024, len(json.loads(done.stdout)["resources"])


def _trees(before: Path | None) -> list[tuple[str, Path]]:
    here = ("after" if before else "this", ROOT / "operator")
    return [("before", before / "operator"), here] if before else [here]


def _row(size: Any, tree: str, runs: list[tuple[float, int, int]], sha: str) -> dict[str, Any]:
    return {
        "gpu_nodes": size.gpu,
        "cpu_nodes": size.cpu,
        "clusters": size.clusters,
        "tree": tree,
        "commit": sha,
        "seconds": [round(s, 2) for s, _, _ in runs],
        "peak_rss_mib": max(m for _, m, _ in runs),
        "resources": runs[0][2],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=parse_sizes, default=parse_sizes("1000/200/1000"))
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--dra", type=float, default=0.0)
    parser.add_argument("--before", type=Path, help="a checkout of an earlier commit")
    parser.add_argument("--before-commit", default="", help="the commit --before holds")
    parser.add_argument("--record", type=Path, help="append the run to this results file")
    parser.add_argument("--label", default="", help="the run's label in the results file")
    args = parser.parse_args(argv)
    trees = _trees(args.before)
    shas = {"before": args.before_commit or "?", "after": commit(), "this": commit()}
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
            measured: dict[str, list[tuple[float, int, int]]] = {tree: [] for tree, _ in trees}
            for run in range(args.runs):
                order = trees if run % 2 == 0 else trees[::-1]
                for tree, package in order:
                    seconds, mib, found = _audit(cp.kubeconfig, package)
                    measured[tree].append((seconds, mib, found))
                    print(
                        f"  run {run + 1} {tree}: {seconds:.2f} s, peak RSS {mib} MiB, "
                        f"{found} resources",
                        flush=True,
                    )
            rows += [_row(size, tree, runs, shas[tree]) for tree, runs in measured.items()]
    finally:
        api.close()
        cp.stop()
    load = os.getloadavg()
    print(f"\nload average at the end: {load[0]:.1f}\n")
    print("| size | tree | audit -A -o json (median of the runs: each) | peak RSS | resources |")
    print("| --- | --- | --- | --- | --- |")
    for r in rows:
        each = " / ".join(f"{s:.1f}" for s in r["seconds"])
        print(
            f"| {r['gpu_nodes']:,}/{r['cpu_nodes']:,}/{r['clusters']:,} | {r['tree']} "
            f"| {statistics.median(r['seconds']):.1f} s ({each}) | {r['peak_rss_mib']} MiB "
            f"| {r['resources']:,} |"
        )
    if args.record:
        record(
            args.record,
            {
                "commit": shas["after"],
                "label": args.label or ("before and after" if args.before else "this tree"),
                "machine": f"{os.cpu_count()} cores, load average {load[0]:.1f} at the end",
                "command": "python -m benchmarks.audit_scale " + " ".join(argv or sys.argv[1:]),
                "rows": rows,
            },
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
