"""Where ``make node`` puts the real node's binaries, and whether they are all there.

The folder is outside the clone (as the control plane's), named after a hash of everything
the build reads (``build.sh``, the pins, the Go modules' sources), so a fresh clone on the
same machine reuses it and any change to those files builds into a new folder:
``$DGP_CACHE/node/<hash>/``; ``DGP_NODE_BIN`` overrides it.

    python -c 'from provingground.node import node_dir; print(node_dir())'   # as make does

The stand-in DRA GPU plugin (``draplugin/``) has its own folder keyed by its own sources,
``$DGP_CACHE/draplugin/<hash>/bin/dra-gpu-plugin`` (``build.sh --dra``, run by ``make node``),
so a change to it rebuilds only it; ``DGP_DRA_PLUGIN`` overrides the binary's path.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "NODE_BINARIES",
    "NodeBinaries",
    "NodeBinariesMissingError",
    "dra_plugin_dir",
    "find_dra_plugin",
    "find_node_binaries",
    "node_bin_dir",
    "node_dir",
]

HERE = Path(__file__).resolve().parent
NODE_BINARIES = (
    "k8s",
    "containerd",
    "containerd-shim-runc-v2",
    "runc",
    "bridge",
    "host-local",
    "loopback",
    "coredns",
    "pause",
)
_SOURCES = (
    "build.sh",
    "versions.env",
    "k8s",
    "containerd",
    "coredns",
    "pause",
    "testimage.py",
    "ociimage.py",
)
HINT = "run `make node` (warm Go cache: minutes; see docs/proving-ground.md)"


class NodeBinariesMissingError(RuntimeError):
    """The real node's binaries are not built on this machine."""


def _key(sources: tuple[str, ...] = _SOURCES) -> str:
    sha = hashlib.sha256()
    files = [HERE.parent / "tools/versions.env"]
    for name in sources:
        path = HERE / name
        files += sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    for path in files:
        sha.update(str(path.relative_to(HERE.parent)).encode() + b"\0" + path.read_bytes())
    return sha.hexdigest()[:12]


def node_dir() -> Path:
    """The folder ``make node`` builds into: ``bin/``, ``images/``, ``MANIFEST``."""
    return _cache() / "node" / _key()


def _cache() -> Path:
    return Path(os.environ.get("DGP_CACHE") or str(Path.home() / ".cache" / "dask-gpu-parity"))


def dra_plugin_dir() -> Path:
    """The folder ``build.sh --dra`` builds the DRA GPU plugin into (``bin/dra-gpu-plugin``)."""
    return _cache() / "draplugin" / _key(("build.sh", "draplugin"))


def find_dra_plugin() -> Path:
    """The DRA GPU plugin's binary, or raise ``NodeBinariesMissingError`` saying how to build it."""
    path = Path(os.environ.get("DGP_DRA_PLUGIN") or dra_plugin_dir() / "bin" / "dra-gpu-plugin")
    if not os.access(path, os.X_OK):
        raise NodeBinariesMissingError(f"DRA GPU plugin not built at {path}: {HINT}")
    return path


def node_bin_dir() -> Path:
    """The folder of this checkout's node binaries (``DGP_NODE_BIN`` overrides)."""
    if explicit := os.environ.get("DGP_NODE_BIN"):
        return Path(explicit)
    return node_dir() / "bin"


@dataclass(frozen=True)
class NodeBinaries:
    """One complete set of node binaries, and the test image ``make node`` makes beside them."""

    root: Path

    @property
    def test_image(self) -> Path:
        """The busybox OCI archive (``localhost/node/busybox:test``, see ``testimage.py``)."""
        return self.root.parent / "images" / "busybox.tar"


def find_node_binaries(root: Path | None = None) -> NodeBinaries:
    """The node binaries, or raise ``NodeBinariesMissingError`` saying how to build them."""
    root = root or node_bin_dir()
    missing = [n for n in NODE_BINARIES if not os.access(root / n, os.X_OK)]
    if not NodeBinaries(root).test_image.is_file():
        missing.append("images/busybox.tar")
    if missing or not (root.parent / "MANIFEST").is_file():
        what = ", ".join(missing) if missing else "MANIFEST (an interrupted build?)"
        raise NodeBinariesMissingError(f"Real-node binaries not built in {root} ({what}): {HINT}")
    return NodeBinaries(root)
