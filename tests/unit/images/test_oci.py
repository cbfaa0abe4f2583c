"""OCI layouts written here (the bases) and read back (the archives BuildKit writes)."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import lzma
import tarfile

from provingground.images.bases import busybox_binary
from provingground.images.oci import read_archive, unpack, unpacked_size, write_layout
from provingground.node import ociimage


def _rootfs(tmp_path):
    root = tmp_path / "rootfs"
    (root / "bin").mkdir(parents=True)
    (root / "bin/tool").write_bytes(b"#!/bin/sh\necho hi\n")
    (root / "bin/tool").chmod(0o755)
    (root / "bin/alias").hardlink_to(root / "bin/tool")
    (root / "etc").mkdir()
    (root / "etc/passwd").write_text("root:x:0:0::/root:/bin/sh\n")
    return root


def test_a_written_layout_follows_the_image_spec(tmp_path):
    # image-spec v1.1.0 image-layout.md: oci-layout, index.json, blobs/sha256/<hex> named by digest.
    digest = write_layout(
        _rootfs(tmp_path), tmp_path / "layout", config={"Cmd": ["sh"]}, annotations={"a": "b"}
    )
    layout = tmp_path / "layout"
    assert json.loads((layout / "oci-layout").read_text()) == {"imageLayoutVersion": "1.0.0"}
    for blob in (layout / "blobs/sha256").iterdir():
        assert hashlib.sha256(blob.read_bytes()).hexdigest() == blob.name
    read = read_archive(layout)
    assert read.digest == digest
    assert read.manifest["annotations"] == {"a": "b"}
    assert read.config["config"] == {"Cmd": ["sh"]}
    # The diff ID is the digest of the uncompressed layer.
    (layer,) = read.layers
    raw = gzip.decompress((layout / "blobs/sha256" / layer.removeprefix("sha256:")).read_bytes())
    assert read.config["rootfs"]["diff_ids"] == ["sha256:" + hashlib.sha256(raw).hexdigest()]
    assert not (tmp_path / "layout.partial").exists()


def test_an_archive_of_a_layout_reads_like_the_folder_and_names_the_image(tmp_path):
    write_layout(_rootfs(tmp_path), tmp_path / "layout", config={}, annotations={})
    index = json.loads((tmp_path / "layout/index.json").read_text())
    index["manifests"][0]["annotations"] = {"io.containerd.image.name": "localhost/x:1"}
    (tmp_path / "layout/index.json").write_text(json.dumps(index))
    with tarfile.open(tmp_path / "x.tar", "w") as tar:
        for path in sorted((tmp_path / "layout").rglob("*")):
            tar.add(path, arcname=str(path.relative_to(tmp_path / "layout")), recursive=False)
    folder, archive = read_archive(tmp_path / "layout"), read_archive(tmp_path / "x.tar")
    assert archive == folder
    assert archive.name == "localhost/x:1"
    blobs = tmp_path / "layout/blobs/sha256"
    stored = [
        f.stat().st_size
        for f in blobs.iterdir()
        if f.name != archive.digest.removeprefix("sha256:")
    ]
    assert archive.compressed_size == sum(stored)  # config and layer: what a pull downloads
    assert unpacked_size(tmp_path / "x.tar") == len(b"#!/bin/sh\necho hi\n") + len(
        "root:x:0:0::/root:/bin/sh\n"
    )


def test_unpack_keeps_modes_and_links(tmp_path):
    write_layout(_rootfs(tmp_path), tmp_path / "layout", config={}, annotations={})
    unpack(tmp_path / "layout", tmp_path / "out")
    tool = tmp_path / "out/bin/tool"
    assert tool.stat().st_mode & 0o777 == 0o755
    assert (tmp_path / "out/bin/alias").stat().st_ino == tool.stat().st_ino


def test_the_nodes_image_archive_reads_back_with_its_name_config_and_layer(tmp_path):
    # The archive `ctr images import` reads (provingground/node/ociimage.py): one image, named by
    # index.json's io.containerd.image.name (containerd docs/man/ctr images import), one
    # uncompressed layer whose digest is its diff ID (image-spec v1.1.0 config.md).
    facts = ociimage.build(
        _rootfs(tmp_path), "localhost/node/x:1", tmp_path / "x.tar", cmd=["/bin/sh"], env=["A=1"]
    )
    image = read_archive(tmp_path / "x.tar")
    assert (image.name, image.digest) == ("localhost/node/x:1", facts["manifest"])
    assert image.config["config"] == {
        "Env": ["A=1"],
        "Entrypoint": None,
        "Cmd": ["/bin/sh"],
        "WorkingDir": "/",
    }
    assert image.config["rootfs"]["diff_ids"] == image.layers
    unpack(tmp_path / "x.tar", tmp_path / "out")
    assert (tmp_path / "out/bin/tool").stat().st_ino == (tmp_path / "out/bin/alias").stat().st_ino
    with tarfile.open(tmp_path / "x.tar") as tar:
        assert json.load(tar.extractfile("oci-layout")) == {"imageLayoutVersion": "1.0.0"}


def _ar(members):
    out = b"!<arch>\n"
    for name, data in members:
        out += f"{name:<16}{0:<12}{0:<6}{0:<6}{0o100644:<8o}{len(data):<10}`\n".encode() + data
        out += b"\n" if len(data) % 2 else b""
    return out


def test_the_busybox_binary_is_read_from_the_debs_data_tar(tmp_path):
    # A .deb is an ar archive: debian-binary, control.tar.*, data.tar.* (deb(5)).
    data = io.BytesIO()
    with tarfile.open(fileobj=data, mode="w") as tar:
        info = tarfile.TarInfo("./usr/bin/busybox")
        info.size = 5
        tar.addfile(info, io.BytesIO(b"\x7fELF!"))
    deb = tmp_path / "busybox-static.deb"
    deb.write_bytes(
        _ar(
            [
                ("debian-binary", b"2.0\n"),
                ("control.tar.xz", b"x"),
                ("data.tar.xz", lzma.compress(data.getvalue())),
            ]
        )
    )
    assert busybox_binary(deb) == b"\x7fELF!"
