"""The real node's test image: Debian's static busybox, as an OCI archive for ``ctr import``.

The binary is ``/bin/busybox`` of Debian's ``busybox-static`` package (bookworm:
``1:1.35.0-4+deb12u1``, https://packages.debian.org/bookworm/busybox-static), fetched with
``apt-get download`` and unpacked with ``dpkg-deb -x``; the image has it and links for the
applets the tests run (``sh``, ``httpd``, ``wget``, ``nslookup``, ``cat``, ``sleep``, ...).

    python -m provingground.node.testimage OUT.tar [BUSYBOX_DEB]     # make node runs it

The package is kept beside the archive (``busybox-static.deb``), so tests can make variants
(``build(..., extra=...)``).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from . import ociimage

__all__ = ["APPLETS", "IMAGE", "build", "main"]

IMAGE = "localhost/node/busybox:test"
APPLETS = ("sh", "cat", "echo", "env", "httpd", "wget", "nslookup", "sleep", "true", "ls", "nc")


def build(
    deb: Path, out: Path, *, name: str = IMAGE, extra: dict[str, Path] | None = None
) -> dict[str, object]:
    """Write the image archive ``out`` from the busybox-static package ``deb``.

    ``extra`` adds files (path in the image -> file here), e.g. ``{"bin/kubectl": k8s}``.
    """
    with tempfile.TemporaryDirectory() as tmp:
        unpacked = Path(tmp) / "deb"
        subprocess.run(["dpkg-deb", "-x", str(deb), str(unpacked)], check=True)
        rootfs = Path(tmp) / "rootfs"
        for sub in ("bin", "tmp", "etc", "www"):
            (rootfs / sub).mkdir(parents=True)
        shutil.copy2(unpacked / "bin/busybox", rootfs / "bin/busybox")
        for applet in APPLETS:
            (rootfs / "bin" / applet).symlink_to("busybox")
        (rootfs / "etc/passwd").write_text("root:x:0:0:root:/:/bin/sh\n")
        (rootfs / "www/index.html").write_text("hello from the real node\n")
        for inside, src in (extra or {}).items():
            with contextlib.suppress(OSError):
                os.link(src, rootfs / inside)  # a copy only across file systems
            if not (rootfs / inside).exists():
                shutil.copy2(src, rootfs / inside)
        out.parent.mkdir(parents=True, exist_ok=True)
        return ociimage.build(rootfs, name, out, cmd=["/bin/sh"], env=["PATH=/bin"], workdir="/")


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: see the module docstring."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        print("usage: python -m provingground.node.testimage OUT.tar [DEB]", file=sys.stderr)
        return 2
    out = Path(args[0]).resolve()
    with tempfile.TemporaryDirectory() as tmp:
        if len(args) > 1:
            deb = Path(args[1])
        else:
            subprocess.run(
                ["apt-get", "download", "busybox-static"], cwd=tmp, check=True, capture_output=True
            )
            deb = next(Path(tmp).glob("busybox-static_*.deb"))
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(deb, out.parent / "busybox-static.deb")
        print(json.dumps(build(deb, out)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
