"""What the drift watch's PolicyReports cost on a fleet: writes, time, CPU and etcd space.

Usage: python -m benchmarks.policyreports [--clusters 10000] [--gpu-nodes 500] [--delete 1000]
       [--run-dir DIR] [--write FILE]

One proving ground as ``benchmarks/scale.py`` builds it (no dask operator; GPU nodes in three
driver classes; GPU DaskClusters in 5 namespaces, each with the scheduler Deployment
dask-kubernetes builds, all created without our webhooks, so every one lacks parity), with the
PolicyReport CRD as Kyverno installs it. Then ``dask-gpu-parity run`` with the drift watch:

1. **first start**: seconds from spawn until every cluster has its report
   (``dgp_policyreports`` = N, nothing pending); the CPU seconds of kube-apiserver, etcd and the
   operator over that window, against a run of the same operator with ``--no-policy-reports``
   on the same fleet, each run waiting until its first pass is done and its ParityDrift Events
   are posted (the difference is what the reports cost); etcd's database growth; one
   report's size as stored;
2. **restart**: the writes a restarted operator makes once its first pass is done (the reports
   are read back: expected 0);
3. **deletes**: ``--delete`` clusters deleted; seconds until their reports are gone.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from benchmarks.scale import (
    Size,
    cpu_seconds,
    etcd_db_bytes,
    grow_clusters,
    grow_nodes,
    start_ground,
)
from provingground.cluster import ControlPlane
from provingground.nodes import api_client
from provingground.parity import ParityOperator
from provingground.policyreports import install_policyreport_crd

_POLL = 0.5


def _cpu(cp: ControlPlane, op: ParityOperator) -> dict[str, float]:
    assert op.process is not None
    return {
        "kube-apiserver": cpu_seconds(cp.processes["kube-apiserver"].pid),
        "etcd": cpu_seconds(cp.processes["etcd"].pid),
        "dask-gpu-parity": cpu_seconds(op.process.pid),
    }


def _wait(op: ParityOperator, done: Any, timeout: float, what: str) -> float:
    started = time.monotonic()
    while not done():
        op.check_alive()
        if time.monotonic() - started > timeout:
            raise TimeoutError(f"{what}: not within {timeout:.0f} s")
        time.sleep(_POLL)
    return time.monotonic() - started


def _metric(op: ParityOperator, name: str, **labels: str) -> float:
    """The metric's value (0 while absent or the operator does not answer)."""
    return op.metric(name, **labels)


def _run(
    cp: ControlPlane, api: Any, run_dir: Path, n: int, *, reports: bool, timeout: float
) -> tuple[ParityOperator, dict[str, Any]]:
    """Start the operator; measure until its first pass is done and (with reports) all written."""
    logs = run_dir / "logs" / ("reports" if reports else "none")
    extra = () if reports else ("--no-policy-reports",)
    op = ParityOperator(cp, api, logs, drift=True, extra_args=extra)
    op.log_path.parent.mkdir(parents=True, exist_ok=True)
    op.owns_crd = False
    etcd_before = etcd_db_bytes(cp)
    started = time.monotonic()
    op.launch()
    before = _cpu(cp, op)

    def finished() -> bool:
        # Both runs post the same Events (one ParityDrift per cluster): each waits for them too,
        # so the difference in CPU is the reports'.
        if not _metric(op, "dgp_drift_first_pass_seconds") > 0:
            return False  # not there yet
        if _metric(op, "dgp_events_total") < n or _metric(op, "dgp_events_pending") > 0:
            return False
        if not reports:
            return True
        return (
            _metric(op, "dgp_policyreports") >= n and _metric(op, "dgp_policyreports_pending") == 0
        )

    _wait(op, finished, timeout, "first pass" + (" and every report" if reports else ""))
    seconds = time.monotonic() - started
    after = _cpu(cp, op)
    out = {
        "seconds": round(seconds, 1),
        "cpu": {k: round(after[k] - before[k], 1) for k in after},
        "etcd_growth_mib": round((etcd_db_bytes(cp) - etcd_before) / 2**20, 1),
        "first_pass_seconds": round(_metric(op, "dgp_drift_first_pass_seconds"), 1),
        "events": _metric(op, "dgp_events_total"),
    }
    if reports:
        out["written"] = _metric(op, "dgp_policyreport_writes_total", outcome="written")
        out["failed"] = _metric(op, "dgp_policyreport_writes_total", outcome="failed")
    print(f"  {'with' if reports else 'without'} reports: {json.dumps(out)}", flush=True)
    return op, out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clusters", type=int, default=10_000)
    parser.add_argument("--gpu-nodes", type=int, default=500)
    parser.add_argument("--delete", type=int, default=1_000)
    parser.add_argument("--timeout", type=float, default=1800)
    parser.add_argument("--run-dir", type=Path, default=None)
    parser.add_argument("--write", type=Path, default=None, help="the results as JSON")
    args = parser.parse_args(argv)
    run_dir = args.run_dir or Path(tempfile.mkdtemp(prefix="dgp-polr-"))
    size = Size(args.gpu_nodes, 0, args.clusters)
    print(f"PolicyReports at {size} (run dir {run_dir})", flush=True)
    cp = start_ground(run_dir)
    api = api_client(cp.kubeconfig)
    results: dict[str, Any] = {"size": str(size)}
    try:
        install_policyreport_crd(cp.kubectl)
        grow_nodes(api, size)
        grow_clusters(cp, size)
        op, results["without reports"] = _run(cp, api, run_dir, args.clusters, reports=False,
                                               timeout=args.timeout)  # fmt: skip
        op.stop()
        op, results["first start"] = _run(cp, api, run_dir, args.clusters, reports=True,
                                           timeout=args.timeout)  # fmt: skip
        _, page = cp.api_get(
            "/apis/wgpolicyk8s.io/v1alpha2/namespaces/fleet-0/policyreports?limit=1"
        )
        results["report bytes"] = len(json.dumps(page["items"][0], separators=(",", ":")))
        op.stop()
        op, results["restart"] = _run(cp, api, run_dir, args.clusters, reports=True,
                                       timeout=args.timeout)  # fmt: skip
        written = results["restart"]["written"]
        print(f"  restart: {written:.0f} reports written again (read back: expected 0)")
        names = [f"c-{i:05d}" for i in range(0, args.clusters, 5)][: args.delete]
        started = time.monotonic()
        for chunk in range(0, len(names), 200):
            cp.kubectl("delete", "daskcluster", "-n", "fleet-0", *names[chunk : chunk + 200],
                       "--wait=false")  # fmt: skip
        target = args.clusters - len(names)
        _wait(op, lambda: _metric(op, "dgp_policyreports") <= target, args.timeout, "deletes")

        def gone() -> bool:
            out = str(cp.kubectl("get", "policyreports", "-n", "fleet-0", "-o", "name").stdout)
            return len(out.split()) <= int(args.clusters) // 5 - len(names)

        _wait(op, gone, args.timeout, "reports gone from the API server")
        results["deletes"] = {
            "clusters": len(names),
            "seconds": round(time.monotonic() - started, 1),
            "deleted by the operator": _metric(
                op, "dgp_policyreport_writes_total", outcome="deleted"
            ),
        }
        op.stop()
    finally:
        api.close()
        cp.stop()
    text = json.dumps(results, indent=2)
    print(text)
    if args.write:
        args.write.write_text(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
