"""OCI image layouts: write one from a root filesystem, read one back (folder or archive).

Standard library only. The base images are written here as OCI image layout folders
(``oci-layout``, ``index.json``, ``blobs/sha256/``) that BuildKit reads as named contexts; the
images BuildKit exports are OCI layout archives, read back here for their digests, sizes and
layers (https://github.com/opencontainers/image-spec/blob/v1.1.0/image-layout.md).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import shutil
import tarfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from provingground.node.ociimage import (
    MANIFEST,
    Filter,
    blob_name,
    clean,
    digest_file,
    tar_tree,
    write_documents,
)

__all__ = ["Layout", "read_archive", "unpack", "unpacked_size", "write_layout"]

LAYER_GZIP = "application/vnd.oci.image.layer.v1.tar+gzip"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"


@dataclass(frozen=True)
class Layout:
    """One image of an OCI layout: its manifest and config, and how to open its blobs.

    Attributes:
        name: The index's ``io.containerd.image.name`` annotation, or ``""``.
        digest: The manifest's digest (``sha256:...``).
        manifest: The manifest, parsed.
        config: The image configuration, parsed.
        blobs: The compressed size of each blob the manifest names (config and layers).
    """

    name: str
    digest: str
    manifest: dict[str, Any]
    config: dict[str, Any]
    blobs: dict[str, int]

    @property
    def compressed_size(self) -> int:
        """Bytes of the manifest's config and layers, as stored (what a pull downloads)."""
        return sum(self.blobs.values())

    @property
    def layers(self) -> list[str]:
        """The layer digests, bottom first."""
        return [layer["digest"] for layer in self.manifest["layers"]]


def write_layout(
    rootfs: Path,
    dest: Path,
    *,
    config: dict[str, Any],
    annotations: dict[str, str],
    skip: Filter = clean,
) -> str:
    """Write ``rootfs`` as a one-layer image into the OCI layout folder ``dest``.

    The layer is written to a temporary folder beside ``dest`` and renamed into place last, so
    ``dest`` is complete or absent.

    Args:
        rootfs: The root filesystem folder (owners, modes and hard links are kept).
        dest: The layout folder to create (must not exist).
        config: The image's ``config`` section (``Env``, ``Cmd``, ...).
        annotations: Annotations of the manifest (what the image stands for, its inputs).
        skip: A tarfile filter: returns the entry to store, or None to leave it out.

    Returns:
        The manifest's digest.
    """
    tmp = dest.with_name(dest.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    blobs = tmp / "blobs" / "sha256"
    blobs.mkdir(parents=True)
    layer_tmp = tmp / "layer.tar.gz"
    diff = hashlib.sha256()
    with layer_tmp.open("wb") as raw:
        gz = gzip.GzipFile(fileobj=raw, mode="wb", compresslevel=6, mtime=0)
        with (
            _Tee(gz, diff) as sink,
            tarfile.open(fileobj=sink, mode="w|", format=tarfile.PAX_FORMAT) as tar,
        ):
            tar_tree(tar, rootfs, skip)
        gz.close()
    layer_digest = digest_file(layer_tmp)
    layer = {"mediaType": LAYER_GZIP, "digest": layer_digest, "size": layer_tmp.stat().st_size}
    layer_tmp.rename(tmp / blob_name(layer_digest))
    digest, _ = write_documents(
        lambda member, data: _write(tmp / member, data),
        layer,
        "sha256:" + diff.hexdigest(),
        config,
        annotations=annotations,
    )
    tmp.rename(dest)
    return digest


def _write(path: Path, data: bytes) -> None:
    path.write_bytes(data)


class _Tee(io.RawIOBase):
    """A write-only stream that writes to ``out`` and hashes what passes (the layer's diff ID)."""

    def __init__(self, out: gzip.GzipFile, sha: Any) -> None:
        self._out, self._sha = out, sha

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        self._sha.update(data)
        self._out.write(data)
        return len(data)


@contextmanager
def _opener(path: Path) -> Iterator[Callable[[str], IO[bytes]]]:
    """Yield a function opening a layout member (``index.json``, ``blobs/sha256/...``)."""
    if path.is_dir():
        yield lambda name: (path / name).open("rb")
        return
    with tarfile.open(path) as tar:
        members = {os.path.normpath(m.name): m for m in tar.getmembers() if m.isfile()}

        def open_member(name: str) -> IO[bytes]:
            member = members.get(os.path.normpath(name))
            f = tar.extractfile(member) if member else None
            if f is None:
                raise FileNotFoundError(f"{path}: no {name}")
            return f

        yield open_member


def read_archive(path: Path, layer: Callable[[IO[bytes]], None] | None = None) -> Layout:
    """Read the one image of an OCI layout folder or archive.

    Args:
        path: An OCI layout folder or a tar archive of one (as ``ctr images import`` reads).
        layer: If given, called with each layer's stream (as stored, gzip or not), bottom first.

    Returns:
        The image's name, manifest digest, manifest, config and blob sizes.

    Raises:
        ValueError: The layout does not hold exactly one image manifest.
    """
    with _opener(path) as open_member:
        with open_member("index.json") as f:
            index = json.load(f)
        manifests = [
            m
            for m in index.get("manifests", [])
            if m.get("mediaType") in (MANIFEST, DOCKER_MANIFEST)
        ]
        if len(manifests) != 1:
            raise ValueError(
                f"{path}: expected one image manifest in index.json, found {len(manifests)}"
            )
        desc = manifests[0]
        with open_member(blob_name(desc["digest"])) as f:
            manifest = json.load(f)
        with open_member(blob_name(manifest["config"]["digest"])) as f:
            config = json.load(f)
        if layer is not None:
            for item in manifest["layers"]:
                with open_member(blob_name(item["digest"])) as f:
                    layer(f)
    blobs = {manifest["config"]["digest"]: manifest["config"]["size"]}
    blobs.update({item["digest"]: item["size"] for item in manifest["layers"]})
    name = desc.get("annotations", {}).get("io.containerd.image.name", "")
    return Layout(name=name, digest=desc["digest"], manifest=manifest, config=config, blobs=blobs)


def unpacked_size(path: Path) -> int:
    """Bytes of the regular files in all the image's layers, uncompressed (roughly its disk use)."""
    total = 0

    def count(stream: IO[bytes]) -> None:
        nonlocal total
        with tarfile.open(fileobj=stream, mode="r|*") as tar:
            total += sum(m.size for m in tar if m.isfile())

    read_archive(path, count)
    return total


def unpack(path: Path, dest: Path) -> Layout:
    """Unpack the image's layers into ``dest`` (owners and modes kept; whiteouts applied).

    Returns:
        The image, as :func:`read_archive` reads it.
    """

    def apply(stream: IO[bytes]) -> None:
        with tarfile.open(fileobj=stream, mode="r|*") as tar:
            for info in tar:
                folder, _, base = info.name.rpartition("/")
                if base == ".wh..wh..opq":
                    for child in (dest / folder).iterdir():
                        _remove(child)
                elif base.startswith(".wh."):
                    _remove(dest / folder / base.removeprefix(".wh."))
                else:
                    if not info.isdir():
                        _remove(dest / info.name)
                    tar.extract(info, dest, filter="tar")

    dest.mkdir(parents=True, exist_ok=True)
    return read_archive(path, apply)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()
