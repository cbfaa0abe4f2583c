"""Run a command in an unpacked image with runc, as the chart runs the operator's container.

Read-only root filesystem, the image's numeric user, no capabilities, no new privileges
(charts/dask-gpu-parity/templates/deployment.yaml's securityContext).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from pathlib import Path
from typing import Any

from provingground.images.catalog import REPO_ROOT
from provingground.node import node_dir


def find_runc() -> Path | None:
    """``$RUNC``, else the real node's runc (``make node``), else the GPU node's, else PATH."""
    for candidate in (
        os.environ.get("RUNC"),
        str(node_dir() / "bin/runc"),
        str(REPO_ROOT / ".gpunode/bin/runc"),
        shutil.which("runc"),
    ):
        if candidate and os.access(candidate, os.X_OK):
            return Path(candidate)
    return None


def run_in_image(
    runc: Path, rootfs: Path, config: dict[str, Any], args: list[str], bundle: Path
) -> subprocess.CompletedProcess[str]:
    """Run ``args`` in ``rootfs`` (an unpacked image) with the image's ``config``.

    The process gets the image's Env and User, a read-only root filesystem with a tmpfs on /tmp,
    no capabilities and no_new_privs. ``bundle`` (a new folder) gets runc's config and state.
    """
    bundle.mkdir(parents=True, exist_ok=True)
    subprocess.run([str(runc), "spec", "--bundle", str(bundle)], check=True)
    spec = json.loads((bundle / "config.json").read_text())
    uid, _, gid = config.get("User", "0:0").partition(":")
    spec["root"] = {"path": str(rootfs), "readonly": True}
    spec["process"].update(
        terminal=False,
        args=args,
        env=config.get("Env", []),
        cwd=config.get("WorkingDir") or "/",
        user={"uid": int(uid), "gid": int(gid or uid)},
        noNewPrivileges=True,
        capabilities={
            k: [] for k in ("bounding", "effective", "permitted", "inheritable", "ambient")
        },
    )
    spec["mounts"].append(
        {
            "destination": "/tmp",
            "type": "tmpfs",
            "source": "tmpfs",
            "options": ["nosuid", "nodev", "mode=1777"],
        }
    )
    (bundle / "config.json").write_text(json.dumps(spec))
    state = bundle / "state"
    name = f"dgp-image-test-{uuid.uuid4().hex[:8]}"
    cmd = [str(runc), "--root", str(state), "run", "--bundle", str(bundle), name]
    try:
        return subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    finally:
        subprocess.run(
            [str(runc), "--root", str(state), "delete", "--force", name],
            capture_output=True,
            check=False,
        )
