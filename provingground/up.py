"""``make proving-ground``: start everything and keep it up until Ctrl-C (for poking around)."""

from __future__ import annotations

import argparse
import shutil
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from .binaries import BinariesMissingError, StaleCacheError
from .ground import ProvingGround
from .node import NodeBinariesMissingError
from .pools import FLEETS
from .process import ComponentError

__all__ = ["main"]

REPO = Path(__file__).resolve().parents[1]


def main(argv: Sequence[str] | None = None) -> int:
    """Start the proving ground and block until SIGINT/SIGTERM."""
    parser = argparse.ArgumentParser(prog="make proving-ground")
    parser.add_argument("--run-dir", type=Path, default=REPO / ".run" / "proving-ground")
    parser.add_argument("--no-dask-operator", action="store_true")
    parser.add_argument(
        "--real-node",
        action="store_true",
        help="also join a real node (kubelet, containerd; `make node` builds it)",
    )
    parser.add_argument(
        "--fleet",
        choices=sorted(FLEETS),
        default="device-plugin",
        help="node pools: device plugin only (default), pure-dra, mixed (device-plugin and DRA "
        "pools side by side), migrating (a pool half moved to DRA); docs/proving-ground.md",
    )
    args = parser.parse_args(argv)
    if args.run_dir.exists():
        shutil.rmtree(args.run_dir)
    try:
        ground = ProvingGround(
            args.run_dir,
            sizes=FLEETS[args.fleet],
            dask_operator=not args.no_dask_operator,
            real_node=args.real_node,
        ).start()
    except (
        BinariesMissingError,
        StaleCacheError,
        NodeBinariesMissingError,
        ComponentError,
        TimeoutError,
    ) as exc:
        print(f"proving-ground: {exc}", file=sys.stderr)
        return 1
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    cp = ground.control_plane
    print(f"Ready in {ground.timings}. In another shell:")
    print(f"  export KUBECONFIG={cp.kubeconfig}")
    print(f"  {cp.binaries.kubectl} get nodes -L nvidia.com/gpu.product")
    if args.fleet != "device-plugin":
        print(f"  {cp.binaries.kubectl} get deviceclasses,resourceslices")
    if ground.real_node is not None:
        print(f"  real node {ground.real_node.name}: logs in {ground.real_node.logs}")
    print(f"Logs: {cp.logs}. Ctrl-C stops everything.", flush=True)
    try:
        signal.pause()
    except KeyboardInterrupt:
        pass
    finally:
        ground.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
