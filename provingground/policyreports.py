"""The community's PolicyReport CRD (``wgpolicyk8s.io/v1alpha2``), as Kyverno installs it.

Clusters that run Kyverno (or Policy Reporter, or the wg-policy prototypes) have this CRD; the
drift watch writes its reports there. The proving ground installs the same file: Kyverno's
``config/crds/policyreport/wgpolicyk8s.io_policyreports.yaml`` at a pinned release, taken from
the Go module proxy by ``go mod download`` (checked against the checksum database, cached in
the Go module cache), never copied into this repository. The CRD is not part of our chart: it
belongs to whichever policy engine the cluster runs (docs/operator.md, "PolicyReports").
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["CRD_NAME", "KYVERNO_MODULE", "install_policyreport_crd", "policyreport_crd"]

KYVERNO_MODULE = "github.com/kyverno/kyverno@v1.19.1"
_IN_MODULE = "config/crds/policyreport/wgpolicyk8s.io_policyreports.yaml"
CRD_NAME = "policyreports.wgpolicyk8s.io"


def policyreport_crd(go: str = "go") -> Path:
    """The CRD file from the pinned Kyverno module (downloaded once, then from the cache).

    Raises:
        RuntimeError: ``go`` is missing, or the module cannot be downloaded.
    """
    cache = Path(os.environ.get("DGP_CACHE") or Path.home() / ".cache" / "dask-gpu-parity")
    found = cache / "crds" / KYVERNO_MODULE.replace("/", "_") / Path(_IN_MODULE).name
    if found.is_file():
        return found
    if shutil.which(go) is None:
        raise RuntimeError(f"The PolicyReport CRD needs Go to download {KYVERNO_MODULE}")
    proc = subprocess.run(
        [go, "mod", "download", "-json", KYVERNO_MODULE],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        cwd=tempfile.gettempdir(),  # outside any module: nothing's go.mod is touched
    )
    if proc.returncode:
        raise RuntimeError(
            f"go mod download {KYVERNO_MODULE}: {(proc.stdout + proc.stderr)[-800:]}"
        )
    source = Path(json.loads(proc.stdout)["Dir"]) / _IN_MODULE
    found.parent.mkdir(parents=True, exist_ok=True)
    partial = found.with_suffix(".part")
    shutil.copyfile(source, partial)
    partial.replace(found)
    return found


def _established(crd: dict[str, Any]) -> bool:
    conditions = (crd.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)


def install_policyreport_crd(
    kubectl: Callable[..., subprocess.CompletedProcess[str]], timeout: float = 60
) -> None:
    """Apply the CRD (server-side) and wait until it is Established."""
    kubectl("apply", "--server-side", "--force-conflicts", "-f", str(policyreport_crd()))
    deadline = time.monotonic() + timeout
    while not _established(json.loads(kubectl("get", "crd", CRD_NAME, "-o", "json").stdout)):
        if time.monotonic() > deadline:
            raise TimeoutError(f"CRD {CRD_NAME} not Established within {timeout:.0f}s")
        time.sleep(0.2)
