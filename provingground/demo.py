"""``make demo``: the proving ground, the real dask operator, dask-gpu-parity, where Pods land.

Stages: build check -> control plane -> node pools -> Dask CRDs + dask operator -> our operator
and webhooks (``--baseline`` leaves them out) -> apply ``examples/`` -> wait for Pods -> one
placement table and a parity verdict per cluster -> the policy's T4 scheduler pool -> stop.
With the images built and the real node available, both operators are ``helm install``ed onto
the real node instead of run on the host, and a CPU cluster computes (``install_demo.py``).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import yaml

from dask_gpu_parity.core.engine import evaluate
from dask_gpu_parity.core.inventory import Inventory

from .binaries import BinariesMissingError, StaleCacheError, find_binaries
from .ground import ProvingGround
from .install import InstallError, ensure_namespace
from .install_demo import install_hooks
from .manifests import gpu_dask_cluster, load_gpu_examples, worker_replicas
from .parity import ParityOperator
from .placement import PodPlacement, format_table, placements, wait_for_placements
from .pools import FLEETS
from .process import ComponentError
from .realnode import built_images, real_node_ground

__all__ = ["Hook", "main", "run"]

REPO = Path(__file__).resolve().parents[1]
DEMO_NAMESPACE = "dask-demo"
POOL_NAMESPACE = "dask-demo-t4"  # labelled to match examples/policy.yaml's namespaceSelector
Hook = Callable[[ProvingGround], None]
PLACEMENT_REASONS = ("DGP014", "DGP020", "DGP021", "DGP022", "DGP023")


def _say(msg: str) -> None:
    print(msg, flush=True)


def _rel(path: Path) -> str:
    return str(path.relative_to(REPO)) if path.is_relative_to(REPO) else str(path)


def _apply(ground: ProvingGround, doc: dict[str, Any], source: str) -> bool:
    ns = doc["metadata"].get("namespace") or DEMO_NAMESPACE
    doc["metadata"]["namespace"] = ns
    ensure_namespace(ground.control_plane.kubectl, ns)
    proc = ground.control_plane.kubectl("apply", "-f", "-", input=yaml.safe_dump(doc), check=False)
    what = f"{doc['kind']} {ns}/{doc['metadata']['name']} from {source}"
    warnings = [f"    {line}" for line in proc.stderr.splitlines() if line.startswith("Warning: ")]
    if proc.returncode != 0:
        _say(f"  DENIED {what}:\n    {proc.stderr.strip().splitlines()[-1]}")
        return False
    _say("\n".join([f"  applied {what}", *warnings]))
    return True


def _verdict(rows: list[PodPlacement], pod_init: list[str]) -> tuple[bool, str]:
    """Whether the scheduler has parity with its workers, and the line that says so."""
    sched = [r for r in rows if r.component == "scheduler"]
    workers = [r for r in rows if r.component == "worker"]
    if not sched or not workers:
        return False, "  -> no scheduler or workers placed"
    (s,) = sched[:1]
    if not s.requests_gpu:
        return False, "  -> baseline: GPU workers, but the scheduler has no GPU, driver or CUDA"
    same = all((w.driver, w.cuda) == (s.driver, s.cuda) for w in workers)
    checks = [
        f"GPU {s.gpu_request}"
        + (" (workers' resource)" if s.gpu_request == workers[0].gpu_request else ""),
        "workers' image" if s.image == workers[0].image else f"OTHER image {s.image}",
        "init " + ",".join(pod_init) if pod_init else "NO init container",
        f"driver {s.driver} / CUDA {s.cuda} " + ("= workers'" if same else "!= workers'"),
    ]
    ok = same and s.image == workers[0].image and "gpu-parity-check" in pod_init
    return ok, f"  -> {'parity' if ok else 'NO parity'}: " + "; ".join(checks)


def _show(
    ground: ProvingGround, doc: dict[str, Any], source: str, deadline: float, *, parity: bool
) -> bool:
    """Wait for the cluster's Pods and show where they landed; ``False`` when that is wrong.

    With dask-gpu-parity running, every shown cluster must end with parity; without it (the
    baseline) the Pods only have to be placed.
    """
    assert ground.api is not None
    ns, name = doc["metadata"]["namespace"], doc["metadata"]["name"]
    _say(f"\n{doc['kind']} {ns}/{name} ({source}):")
    try:
        rows = wait_for_placements(
            ground.api,
            ns,
            name,
            worker_replicas(doc),
            timeout=max(deadline - time.monotonic(), 1.0),
            settle_unschedulable=True,
        )
        ok = True
    except TimeoutError as exc:
        _say(f"  {exc}")
        rows, ok = placements(ground.api, ns, name), False
    _say(format_table(rows))
    sched = [r for r in rows if r.component == "scheduler"]
    init: list[str] = []
    if sched:
        pod = ground.control_plane.kubectl("get", "pod", "-n", ns, sched[0].pod, "-o", "json")
        init = [c["name"] for c in json.loads(pod.stdout)["spec"].get("initContainers", [])]
    has_parity, line = _verdict(rows, init)
    _say(line)
    return ok and (has_parity or not parity)


def _untouched(ground: ProvingGround, doc: dict[str, Any], source: str) -> bool:
    """Apply a CPU-only cluster and show that admission left its spec as written."""
    if not _apply(ground, doc, source):
        return False
    ns, name = doc["metadata"]["namespace"], doc["metadata"]["name"]
    stored = ground.control_plane.kubectl("get", "daskcluster", "-n", ns, name, "-o", "json")
    same: bool = (
        json.loads(stored.stdout)["spec"]["scheduler"]["spec"] == doc["spec"]["scheduler"]["spec"]
    )
    _say(f"  -> CPU-only {ns}/{name}: scheduler spec {'untouched' if same else 'CHANGED'}")
    return same


def run(
    run_dir: Path,
    examples: Path,
    *,
    hooks: Sequence[Hook] = (),
    parity: bool = True,
    sizes: dict[str, int] | None = None,
    timeout: float = 120,
    installed: bool = False,
) -> int:
    """Run the demo; return 0 when every cluster did what the demo says it does.

    ``installed``: a hook installs both charts on the real node; no host-process operators.
    """
    if run_dir.exists():
        shutil.rmtree(run_dir)
    t0 = time.monotonic()
    failures = 0
    if installed:
        ground = real_node_ground(run_dir, find_binaries(), built_images(), sizes=sizes)
    else:
        ground = ProvingGround(run_dir, sizes=sizes)
    with ground:
        cp = ground.control_plane
        assert ground.api is not None
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
        operator = None
        if parity and not installed:
            operator = ParityOperator(cp, ground.api, cp.logs).start()
            _say(f"\ndask-gpu-parity running, webhooks wired in ({operator.ready_seconds:.1f}s)")
        try:
            failures += _examples(ground, examples, timeout, parity=parity)
            if parity:
                failures += _scheduler_pool(ground, examples, timeout)
        finally:
            if operator is not None:
                operator.stop()
    shutil.rmtree(run_dir / "node", ignore_errors=True)  # the containers' files (logs/ stays)
    _say("\nProving ground stopped; nothing left running.")
    return 1 if failures else 0


def _examples(ground: ProvingGround, examples: Path, timeout: float, *, parity: bool) -> int:
    found, skipped = load_gpu_examples(examples) if examples.is_dir() else ([], [])
    if not found:
        _say(f"No GPU DaskCluster/DaskJob in {examples}; using the built-in baseline cluster")
        found = [(Path("<built-in>"), gpu_dask_cluster("baseline-gpu"))]
    failures = 0
    _say("")
    if parity and (examples / "cpu-cluster.yaml").is_file():
        cpu = yaml.safe_load((examples / "cpu-cluster.yaml").read_text())
        cpu["metadata"]["namespace"] = DEMO_NAMESPACE
        failures += not _untouched(ground, cpu, "examples/cpu-cluster.yaml")
        group = examples / "gpu-workergroup.yaml"
        if group.is_file():
            doc = yaml.safe_load(group.read_text())
            doc["metadata"]["namespace"] = DEMO_NAMESPACE
            failures += _apply(ground, doc, _rel(group))  # must be denied: DGP015
    else:
        for note in skipped:
            _say(f"  skipped {note}")
    if parity:
        _placement_reasons(ground, found)
    applied = [(p, d) for p, d in found if _apply(ground, d, _rel(p))]
    expected_denials = {"rapids-ucx"} if parity else set()
    denied = {d["metadata"]["name"] for _, d in found} - {d["metadata"]["name"] for _, d in applied}
    failures += len(denied ^ expected_denials)
    deadline = time.monotonic() + timeout
    for path, doc in applied:
        failures += not _show(ground, doc, _rel(path), deadline, parity=parity)
    return failures


def _placement_reasons(ground: ProvingGround, found: list[tuple[Path, dict[str, Any]]]) -> None:
    """Why each cluster lands where it will: the placement findings on this cluster's nodes.

    The webhook's warnings name each change; the reasons (the image's CUDA, the driver classes)
    are the findings' messages, from the same rules and the nodes as the API server has them.
    """
    listed = ground.control_plane.kubectl("get", "nodes", "-o", "json").stdout
    inventory = Inventory.from_nodes(json.loads(listed)["items"])
    for path, doc in found:
        for finding in evaluate(doc, None, inventory).findings:
            if finding.code in PLACEMENT_REASONS:
                name = doc["metadata"]["name"]
                _say(f"  {name} ({_rel(path)}): {finding.code} {finding.message}")


def _scheduler_pool(ground: ProvingGround, examples: Path, timeout: float) -> int:
    """examples/policy.yaml sends schedulers to the T4 pool, on the workers' driver."""
    policy, cluster = examples / "policy.yaml", examples / "gpu-cluster-tcp.yaml"
    if not (policy.is_file() and cluster.is_file()):
        return 0
    selector = yaml.safe_load(policy.read_text())["spec"]["namespaceSelector"]["matchLabels"]
    # The examples' clusters are done: their GPUs go back to the pools (the CUDA 13 example holds
    # both T4s, the pool this stage sends a scheduler to).
    cp = ground.control_plane
    cp.kubectl("delete", "daskclusters,daskjobs", "--all", "-n", DEMO_NAMESPACE, "--wait")
    cp.kubectl("wait", "--for=delete", "pods", "--all", "-n", DEMO_NAMESPACE, "--timeout=60s")
    _say(f"\nWith {_rel(policy)} (scheduler pool Tesla-T4) in namespace {POOL_NAMESPACE}:")
    ground.control_plane.kubectl("apply", "-f", str(policy))
    ensure_namespace(ground.control_plane.kubectl, POOL_NAMESPACE, selector)
    time.sleep(2)  # the operator's policy and namespace indices catch up
    doc = yaml.safe_load(cluster.read_text())
    doc["metadata"]["namespace"] = POOL_NAMESPACE
    if not _apply(ground, doc, _rel(cluster)):
        return 1
    return not _show(ground, doc, _rel(cluster), time.monotonic() + timeout, parity=True)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of ``make demo``."""
    parser = argparse.ArgumentParser(prog="make demo", description=__doc__)
    parser.add_argument("--run-dir", type=Path, default=REPO / ".run" / "demo")
    parser.add_argument("--examples", type=Path, default=REPO / "examples")
    parser.add_argument("--timeout", type=float, default=120, help="for all Pods, in seconds")
    parser.add_argument(
        "--baseline", action="store_true", help="only the dask operator: the problem, not the fix"
    )
    parser.add_argument("--host-operators", action="store_true", help="kwok only, no helm")
    parser.add_argument(
        "--fleet",
        choices=sorted(FLEETS),
        default="device-plugin",
        help="node pools: device plugin only (default), pure-dra, mixed, migrating "
        "(docs/proving-ground.md)",
    )
    args = parser.parse_args(argv)
    try:
        find_binaries()
        hooks = install_hooks(args.run_dir) if not (args.baseline or args.host_operators) else []
        return run(
            args.run_dir,
            args.examples,
            parity=not args.baseline,
            timeout=args.timeout,
            hooks=hooks,
            installed=bool(hooks),
            sizes=FLEETS[args.fleet],
        )
    except (
        BinariesMissingError,
        StaleCacheError,
        ComponentError,
        TimeoutError,
        InstallError,
    ) as exc:
        print(f"demo: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
