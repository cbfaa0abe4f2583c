"""The dask-kubernetes operator's own Helm chart and test suite, from its sdist (package index).

``provingground.sdist`` fetches the sdist from the package index (no pip, no build); its
sha256 is pinned, and the archive is unpacked into ``$DGP_CACHE/sdist/dask-kubernetes-<v>/``
(outside the clone, never committed). The chart is at
``dask_kubernetes/operator/deployment/helm/dask-kubernetes-operator/`` inside it, the operator's
tests at ``dask_kubernetes/operator/{controller,kubecluster}/tests``.
"""

from __future__ import annotations

import os
import shutil
import tarfile
import tempfile
from pathlib import Path

from .images.pins import read_pins, sha256_file
from .sdist import FetchError, fetch_sdist

__all__ = [
    "CHART_PATH",
    "DASK_KUBERNETES_SDIST_SHA256",
    "DASK_KUBERNETES_VERSION",
    "SdistError",
    "dask_kubernetes_sdist",
    "operator_chart",
]

# The version and the sdist's sha256 as the package index serves it: pinned once, in
# provingground/images/versions.env, where the dask operator's image is built from the same sdist.
_PINS = read_pins()
DASK_KUBERNETES_VERSION = _PINS.dask_kubernetes_version
DASK_KUBERNETES_SDIST_SHA256 = _PINS.dask_kubernetes_sdist_sha256
CHART_PATH = "dask_kubernetes/operator/deployment/helm/dask-kubernetes-operator"


class SdistError(RuntimeError):
    """The sdist could not be fetched, or is not the pinned one."""


def _cache_root() -> Path:
    cache = os.environ.get("DGP_CACHE") or str(Path.home() / ".cache" / "dask-gpu-parity")
    return Path(cache) / "sdist"


def _download(into: Path) -> Path:
    try:
        return fetch_sdist(
            "dask-kubernetes", DASK_KUBERNETES_VERSION, DASK_KUBERNETES_SDIST_SHA256, into
        )
    except FetchError as exc:
        raise SdistError(
            f"Cannot download the dask-kubernetes {DASK_KUBERNETES_VERSION} sdist: {exc}"
        ) from exc


def dask_kubernetes_sdist(root: Path | None = None) -> Path:
    """The unpacked, sha256-verified dask-kubernetes sdist (downloaded once, then reused).

    Unpacked into ``<root>.partial`` and renamed when complete, so the folder is whole or absent.

    Raises:
        SdistError: the download failed or the archive's sha256 is not the pinned one.
    """
    root = root or _cache_root() / f"dask-kubernetes-{DASK_KUBERNETES_VERSION}"
    if (root / CHART_PATH / "Chart.yaml").is_file():
        return root
    partial = root.with_name(root.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    with tempfile.TemporaryDirectory(prefix="dask-kubernetes-sdist-") as tmp:
        archive = _download(Path(tmp))
        found = sha256_file(archive)
        if found != DASK_KUBERNETES_SDIST_SHA256:
            raise SdistError(
                f"{archive.name} has sha256 {found}, expected {DASK_KUBERNETES_SDIST_SHA256}; "
                "the package index served another file: check the pin in provingground/daskchart.py"
            )
        top = f"dask_kubernetes-{DASK_KUBERNETES_VERSION}/"
        with tarfile.open(archive) as tar:
            members = [m for m in tar.getmembers() if m.name.startswith(top)]
            for member in members:
                member.name = member.name[len(top) :]
            tar.extractall(partial, members=[m for m in members if m.name], filter="data")
    if not (partial / CHART_PATH / "Chart.yaml").is_file():
        raise SdistError(f"The dask-kubernetes sdist has no Helm chart at {CHART_PATH}")
    shutil.rmtree(root, ignore_errors=True)
    partial.rename(root)
    return root


def operator_chart(root: Path | None = None) -> Path:
    """The dask-kubernetes-operator Helm chart folder from the sdist."""
    return dask_kubernetes_sdist(root) / CHART_PATH
