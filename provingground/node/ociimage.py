"""Write an OCI image archive from a root filesystem folder, for ``ctr images import``.

Standard library only: it runs here (the pause image) and on the GPU machine (the Python image,
made from that machine's own userland), where there is no registry and no image builder.

    python3 ociimage.py --rootfs DIR --name localhost/node/pause:local \
        --entrypoint /pause --out pause.tar

The archive is an OCI image layout (``oci-layout``, ``index.json``, ``blobs/sha256/``) with one
uncompressed layer; ``index.json`` names the image with ``io.containerd.image.name``, which
``ctr -n k8s.io images import`` uses as the image's name. The layout's pieces (digests, tar
entries, the config, manifest and index documents) are also what ``provingground.images.oci``
writes its layout folders with.
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
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

__all__ = [
    "CONFIG",
    "INDEX",
    "LAYER",
    "MANIFEST",
    "Filter",
    "Put",
    "blob_name",
    "build",
    "clean",
    "digest_bytes",
    "digest_file",
    "main",
    "tar_tree",
    "write_documents",
]

INDEX = "application/vnd.oci.image.index.v1+json"
MANIFEST = "application/vnd.oci.image.manifest.v1+json"
CONFIG = "application/vnd.oci.image.config.v1+json"
LAYER = "application/vnd.oci.image.layer.v1.tar"
_CHUNK = 1 << 20
_PATH = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
_LAYOUT = b'{"imageLayoutVersion":"1.0.0"}'

Put = Callable[[str, bytes], None]
"""Stores one member of a layout (``oci-layout``, ``index.json``, ``blobs/sha256/...``)."""
Filter = Callable[[tarfile.TarInfo], "tarfile.TarInfo | None"]


def digest_bytes(data: bytes) -> str:
    """The OCI digest (``sha256:<hex>``) of ``data``."""
    return "sha256:" + hashlib.sha256(data).hexdigest()


def digest_file(path: Path) -> str:
    """The OCI digest (``sha256:<hex>``) of the file ``path``, read in chunks."""
    sha = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(_CHUNK):
            sha.update(chunk)
    return "sha256:" + sha.hexdigest()


def blob_name(digest: str) -> str:
    """The layout member that holds the blob ``digest``: ``blobs/sha256/<hex>``."""
    return "blobs/sha256/" + digest.removeprefix("sha256:")


def clean(info: tarfile.TarInfo) -> tarfile.TarInfo:
    """The layers' tar filter: owner names dropped (ids, modes and links kept)."""
    info.uname = info.gname = ""
    return info


def tar_tree(tar: tarfile.TarFile, rootfs: Path, skip: Filter = clean) -> None:
    """Add the contents of ``rootfs`` to ``tar`` in name order, each entry through ``skip``."""
    for entry in sorted(rootfs.iterdir()):
        tar.add(str(entry), arcname=entry.name, filter=skip)


def _json(doc: Mapping[str, Any]) -> bytes:
    return json.dumps(doc, separators=(",", ":"), sort_keys=True).encode()


def _put_blob(put: Put, doc: Mapping[str, Any]) -> tuple[str, int]:
    data = _json(doc)
    digest = digest_bytes(data)
    put(blob_name(digest), data)
    return digest, len(data)


def write_documents(
    put: Put,
    layer: Mapping[str, Any],
    diff_id: str,
    config: Mapping[str, Any],
    *,
    history: Sequence[Mapping[str, str]] = (),
    annotations: Mapping[str, str] | None = None,
    index_annotations: Mapping[str, str] | None = None,
) -> tuple[str, int]:
    """Store the image config, manifest, ``index.json`` and ``oci-layout`` of a one-layer image.

    Args:
        put: Stores one layout member (into a tar archive, or a folder).
        layer: The layer's descriptor (``mediaType``, ``digest``, ``size``), stored by the caller.
        diff_id: The digest of the uncompressed layer.
        config: The image config's ``config`` section (``Env``, ``Cmd``, ...).
        history: The image config's ``history``, if any.
        annotations: The manifest's annotations, if any.
        index_annotations: The index entry's annotations (the image's name), if any.

    Returns:
        The manifest's digest and size.
    """
    platform = {"architecture": "amd64", "os": "linux"}
    image: dict[str, Any] = {
        **platform,
        "config": dict(config),
        "rootfs": {"type": "layers", "diff_ids": [diff_id]},
    }
    if history:
        image["history"] = [dict(h) for h in history]
    config_digest, config_size = _put_blob(put, image)
    manifest: dict[str, Any] = {
        "schemaVersion": 2,
        "mediaType": MANIFEST,
        "config": {"mediaType": CONFIG, "digest": config_digest, "size": config_size},
        "layers": [dict(layer)],
    }
    if annotations is not None:
        manifest["annotations"] = dict(annotations)
    digest, size = _put_blob(put, manifest)
    entry: dict[str, Any] = {
        "mediaType": MANIFEST,
        "digest": digest,
        "size": size,
        "platform": platform,
    }
    if index_annotations is not None:
        entry["annotations"] = dict(index_annotations)
    put("index.json", _json({"schemaVersion": 2, "mediaType": INDEX, "manifests": [entry]}))
    put("oci-layout", _LAYOUT)
    return digest, size


def _add_bytes(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o644
    tar.addfile(info, io.BytesIO(data))


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
        with tarfile.open(layer, "w", format=tarfile.PAX_FORMAT) as tar:
            tar_tree(tar, rootfs)
        layer_digest, layer_size = digest_file(layer), layer.stat().st_size
        config = {
            "Env": list(env) or [_PATH],
            "Entrypoint": list(entrypoint) or None,
            "Cmd": list(cmd) or None,
            "WorkingDir": workdir,
        }
        with tarfile.open(out, "w", format=tarfile.PAX_FORMAT) as tar:
            tar.add(str(layer), arcname=blob_name(layer_digest))
            manifest_digest, _ = write_documents(
                lambda member, data: _add_bytes(tar, member, data),
                {"mediaType": LAYER, "digest": layer_digest, "size": layer_size},
                layer_digest,
                config,
                history=[{"created_by": f"provingground/node/ociimage.py from {rootfs}"}],
                index_annotations={
                    "io.containerd.image.name": name,
                    "org.opencontainers.image.ref.name": name.rpartition(":")[2],
                },
            )
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
