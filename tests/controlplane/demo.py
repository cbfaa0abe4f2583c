"""``make demo``: the proving ground, the real dask operator, the GPU examples, where Pods land.

Stages: build check -> control plane -> node pools -> Dask CRDs + operator -> *hooks* ->
apply ``examples/`` -> wait for Pods -> one placement table per cluster -> stop everything.
``run(hooks=[...])`` is where a later step inserts "start our operator and webhooks" so the
same demo shows parity.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import yaml

from .binaries import BinariesMissingError, StaleCacheError, find_binaries
from .ground import ProvingGround
from .manifests import gpu_dask_cluster, load_gpu_examples, worker_replicas
from .placement import format_table, placements, wait_for_placements
from .process import ComponentError

__all__ = ["Hook", "main", "run"]

REPO = Path(__file__).resolve().parents[2]
DEMO_NAMESPACE = "dask-demo"
Hook = Callable[[ProvingGround], None]


def _say(msg: str) -> None:
    print(msg, flush=True)


def _rel(path: Path) -> str:
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


def _cluster_name(doc: dict[str, Any]) -> str:
    # A DaskJob's cluster is named after the job (dask-kubernetes controller).
    return str(doc["metadata"]["name"])


def _apply(ground: ProvingGround, doc: dict[str, Any], source: str) -> bool:
    ns = doc["metadata"].get("namespace") or DEMO_NAMESPACE
    doc["metadata"]["namespace"] = ns
    cp = ground.control_plane
    if cp.kubectl("get", "namespace", ns, check=False).returncode != 0:
        cp.kubectl("create", "namespace", ns)
    proc = cp.kubectl("apply", "-f", "-", input=yaml.safe_dump(doc), check=False)
    what = f"{doc['kind']} {ns}/{doc['metadata']['name']} from {source}"
    if proc.returncode != 0:
        _say(f"  FAILED to apply {what}:\n    {proc.stderr.strip()}")
        return False
    _say(f"  applied {what}")
    return True


def run(
    run_dir: Path,
    examples: Path,
    *,
    hooks: Sequence[Hook] = (),
    sizes: dict[str, int] | None = None,
    timeout: float = 120,
) -> int:
    """Run the demo; return 0 when every applied cluster's Pods were placed and shown."""
    if run_dir.exists():
        shutil.rmtree(run_dir)
    t0 = time.monotonic()
    with ProvingGround(run_dir, sizes=sizes) as ground:
        cp = ground.control_plane
        _say(f"Proving ground up in {time.monotonic() - t0:.1f}s (run folder {run_dir})")
        _say(cp.kubectl("version").stdout.rstrip())
        _say(
            cp.kubectl(
                "get",
                "nodes",
                "-L",
                "dask-gpu-parity.test/pool,nvidia.com/gpu.product,"
                "nvidia.com/cuda.driver-version.full,nvidia.com/cuda.runtime-version.full",
            ).stdout.rstrip()
        )
        for hook in hooks:
            hook(ground)

        found, skipped = load_gpu_examples(examples) if examples.is_dir() else ([], [])
        for note in skipped:
            _say(f"  skipped {note}")
        if not found:
            _say(f"No GPU DaskCluster/DaskJob in {examples}; using the built-in baseline cluster")
            found = [(Path("<built-in>"), gpu_dask_cluster("baseline-gpu"))]

        applied = [(p, d) for p, d in found if _apply(ground, d, _rel(p))]
        failures = len(found) - len(applied)
        assert ground.api is not None
        deadline = time.monotonic() + timeout
        for path, doc in applied:
            ns, name = doc["metadata"]["namespace"], _cluster_name(doc)
            _say(f"\n{doc['kind']} {ns}/{name} ({_rel(path)}):")
            left = max(deadline - time.monotonic(), 1.0)
            try:
                rows = wait_for_placements(
                    ground.api,
                    ns,
                    name,
                    worker_replicas(doc),
                    timeout=left,
                    settle_unschedulable=True,
                )
            except TimeoutError as exc:
                _say(f"  {exc}")
                rows = placements(ground.api, ns, name)
                failures += 1
            _say(format_table(rows))
            sched = [r for r in rows if r.component == "scheduler"]
            if sched and not any(r.requests_gpu for r in sched):
                _say("  -> baseline: GPU workers, but the scheduler has no GPU, driver or CUDA")
    _say("\nProving ground stopped; nothing left running.")
    return 1 if failures else 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``make demo``."""
    parser = argparse.ArgumentParser(prog="make demo", description=__doc__)
    parser.add_argument("--run-dir", type=Path, default=REPO / ".run" / "demo")
    parser.add_argument("--examples", type=Path, default=REPO / "examples")
    parser.add_argument("--timeout", type=float, default=90, help="for all Pods, in seconds")
    args = parser.parse_args(argv)
    try:
        find_binaries()
        return run(args.run_dir, args.examples, timeout=args.timeout)
    except (BinariesMissingError, StaleCacheError, ComponentError, TimeoutError) as exc:
        print(f"demo: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
