"""Where the proving-ground binaries live, and whether a cached build is complete.

`provingground/tools/build.sh` builds into ``$DGP_CACHE/bin/<k8s version>/`` and writes
``MANIFEST`` last, after an atomic rename, so a folder without a matching MANIFEST is stale.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "COMPONENTS",
    "HELM_VERSION",
    "K8S_VERSION",
    "KWOK_VERSION",
    "Binaries",
    "BinariesMissingError",
    "StaleCacheError",
    "default_bin_dir",
    "find_binaries",
]

_TOOLS = Path(__file__).resolve().parent / "tools"


def _versions() -> dict[str, str]:
    lines = (_TOOLS / "versions.env").read_text().splitlines()
    pairs = (line.split("=", 1) for line in lines if "=" in line and not line.startswith("#"))
    return {k.strip(): v.strip() for k, v in pairs}


_V = _versions()
K8S_VERSION = _V["K8S_VERSION"]
KWOK_VERSION = _V["KWOK_VERSION"]
HELM_VERSION = _V["HELM_VERSION"]
COMPONENTS = (
    "etcd",
    "kube-apiserver",
    "kube-controller-manager",
    "kube-scheduler",
    "kwok",
    "kubectl",
    "helm",
)
BUILD_HINT = "run `make controlplane` (cold build ~25 min on 2 cores, see docs/proving-ground.md)"


class BinariesMissingError(RuntimeError):
    """The binaries for this version were never built on this machine."""


class StaleCacheError(RuntimeError):
    """A cache folder exists but is incomplete or was built for other versions."""


def default_bin_dir() -> Path:
    """Folder for this version's binaries (``DGP_BIN`` overrides, else ``DGP_CACHE``)."""
    if explicit := os.environ.get("DGP_BIN"):
        return Path(explicit)
    cache = os.environ.get("DGP_CACHE") or str(Path.home() / ".cache" / "dask-gpu-parity")
    return Path(cache) / "bin" / K8S_VERSION


def manifest_line() -> str:
    """First MANIFEST line that build.sh writes for the pinned versions."""
    return f"k8s={K8S_VERSION} kwok={KWOK_VERSION} helm={HELM_VERSION}"


@dataclass(frozen=True)
class Binaries:
    """Paths of one complete, verified set of proving-ground binaries."""

    root: Path

    def __getitem__(self, component: str) -> Path:
        if component not in COMPONENTS:
            raise KeyError(component)
        return self.root / component

    @property
    def kubectl(self) -> Path:
        """The kubectl built with the control plane (same version)."""
        return self.root / "kubectl"

    @property
    def kwok_stages(self) -> Path:
        """The "fast" node/pod Stages of kwok (Ready nodes with leases, Running pods)."""
        return self.root / "kwok-stages.yaml"

    @property
    def helm(self) -> Path:
        """Helm v4."""
        return self.root / "helm"


def find_binaries(root: Path | None = None) -> Binaries:
    """Return the cached binaries, or raise with a message that says how to fix it.

    Raises:
        BinariesMissingError: the folder does not exist.
        StaleCacheError: the folder exists but its MANIFEST is missing, is for other versions,
            or a binary is missing or not executable.
    """
    root = root or default_bin_dir()
    if not root.exists():
        raise BinariesMissingError(f"Proving-ground binaries not found in {root}: {BUILD_HINT}")
    manifest = root / "MANIFEST"
    if not manifest.is_file():
        raise StaleCacheError(
            f"Stale cache folder {root}: no MANIFEST (an interrupted build?); "
            f"delete it or {BUILD_HINT}, which rebuilds it"
        )
    first = manifest.read_text().splitlines()[:1]
    if first != [manifest_line()]:
        raise StaleCacheError(
            f"Stale cache folder {root}: MANIFEST says {first[0] if first else '(empty)'!r}, "
            f"expected {manifest_line()!r}; {BUILD_HINT}"
        )
    for name in COMPONENTS:
        path = root / name
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise StaleCacheError(
                f"Stale cache folder {root}: {name} is missing or not executable; {BUILD_HINT}"
            )
    if not Binaries(root).kwok_stages.is_file():
        raise StaleCacheError(
            f"Stale cache folder {root}: kwok-stages.yaml is missing; {BUILD_HINT}"
        )
    return Binaries(root)
