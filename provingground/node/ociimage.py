"""Write an OCI image archive from a root filesystem folder, for ``ctr images import``.

Standard library only: it runs here (the pause image) and on the GPU machine (the Python image,
made from that machine's own userland), where there is no registry and no image builder.

    python3 ociimage.py --rootfs DIR --name localhost/node/pause:local \
        --entrypoint /pause --out pause.tar

The archive is an OCI image layout (``oci-layout``, ``index.json``, ``blobs/sha256/``) with one
uncompressed layer; ``index.json`` names the image with ``io.containerd.image.name``, which
``ctr -n k8s.io images import`` uses as the image's name.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import sys
import tarfile
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

__all__ = ["build", "main"]

_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
_CONFIG = "application/vnd.oci.image.config.v1+json"
_LAYER = "application/vnd.oci.image.layer.v1.tar"
_CHUNK = 1 << 20
_PATH = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def _layer(rootfs: Path, out: Path) -> tuple[str, int]:
    """Tar ``rootfs`` (owners, modes, links kept; owner names dropped) into ``out``."""

    def clean(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.uname = info.gname = ""
        return info

    with tarfile.open(out, "w", format=tarfile.PAX_FORMAT) as tar:
        for entry in sorted(rootfs.iterdir()):
            tar.add(str(entry), arcname=entry.name, filter=clean)
    return _digest(out), out.stat().st_size


def _digest(path: Path) -> str:
    sha = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            sha.update(chunk)
    return "sha256:" + sha.hexdigest()


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o644
    tar.addfile(info, io.BytesIO(data))


def _blob(tar: tarfile.TarFile, doc: dict[str, Any]) -> tuple[str, int]:
    data = json.dumps(doc, separators=(",", ":"), sort_keys=True).encode()
    digest = "sha256:" + hashlib.sha256(data).hexdigest()
    _add_bytes(tar, f"blobs/sha256/{digest[7:]}", data)
    return digest, len(data)


def build(
    rootfs: Path,
    name: str,
    out: Path,
    *,
    entrypoint: Sequence[str] = (),
    cmd: Sequence[str] = (),
    env: Sequence[str] = (),
    workdir: str = "/",
) -> dict[str, Any]:
    """Write the archive ``out`` for image ``name`` from ``rootfs``; return its facts."""
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        layer = Path(tmp) / "layer.tar"
        layer_digest, layer_size = _layer(rootfs, layer)
        config = {
            "architecture": "amd64",
            "os": "linux",
            "config": {
                "Env": list(env) or [_PATH],
                "Entrypoint": list(entrypoint) or None,
                "Cmd": list(cmd) or None,
                "WorkingDir": workdir,
            },
            "rootfs": {"type": "layers", "diff_ids": [layer_digest]},
            "history": [{"created_by": f"provingground/node/ociimage.py from {rootfs}"}],
        }
        with tarfile.open(out, "w", format=tarfile.PAX_FORMAT) as tar:
            _add_bytes(tar, "oci-layout", b'{"imageLayoutVersion":"1.0.0"}')
            tar.add(str(layer), arcname=f"blobs/sha256/{layer_digest[7:]}")
            config_digest, config_size = _blob(tar, config)
            manifest = {
                "schemaVersion": 2,
                "mediaType": _MANIFEST,
                "config": {"mediaType": _CONFIG, "digest": config_digest, "size": config_size},
                "layers": [{"mediaType": _LAYER, "digest": layer_digest, "size": layer_size}],
            }
            manifest_digest, manifest_size = _blob(tar, manifest)
            index = {
                "schemaVersion": 2,
                "mediaType": "application/vnd.oci.image.index.v1+json",
                "manifests": [
                    {
                        "mediaType": _MANIFEST,
                        "digest": manifest_digest,
                        "size": manifest_size,
                        "platform": {"architecture": "amd64", "os": "linux"},
                        "annotations": {
                            "io.containerd.image.name": name,
                            "org.opencontainers.image.ref.name": name.rpartition(":")[2],
                        },
                    }
                ],
            }
            _add_bytes(tar, "index.json", json.dumps(index, separators=(",", ":")).encode())
    return {"name": name, "manifest": manifest_digest, "layer_bytes": layer_size}


def main(argv: Sequence[str] | None = None) -> int:
    """Command line: see the module docstring."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rootfs", type=Path, required=True)
    parser.add_argument("--name", required=True, help="e.g. localhost/node/pause:local")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--entrypoint", nargs="*", default=[])
    parser.add_argument("--cmd", nargs="*", default=[])
    parser.add_argument("--env", action="append", default=[])
    args = parser.parse_args(argv)
    if not args.rootfs.is_dir():
        print(f"ociimage: {args.rootfs} is not a folder", file=sys.stderr)
        return 2
    out = args.out.resolve()
    out.parent.mkdir(parents=True, exist_ok=True)
    facts = build(
        args.rootfs, args.name, out, entrypoint=args.entrypoint, cmd=args.cmd, env=args.env
    )
    print(json.dumps({**facts, "archive": os.fspath(out), "archive_bytes": out.stat().st_size}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
