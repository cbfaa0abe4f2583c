"""``fix --in-place`` beside ruff format and prettier: what it refuses, what it keeps.

docs/ci.md has the table these tests hold true: links met in a folder walk that lead out of the
folder, FIFOs and devices, extended attributes and POSIX ACLs, the byte order mark, overwrites
that are all or nothing, and a fix that cannot be written back (an unrendered template).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import stat
import struct
import subprocess
import threading
from pathlib import Path

import pytest

from dask_gpu_parity.manifests import inplace
from tests.unit.helpers import EXAMPLES
from tests.unit.reports import cli

TCP = (EXAMPLES / "gpu-cluster-tcp.yaml").read_text()

# An unrendered Helm value in place of the image, as a chart's template has it
# (https://helm.sh/docs/chart_template_guide/values_files/): YAML reads `{{ ... }}` as a
# mapping whose key is a mapping, which the probe's init container would copy.
TEMPLATED = TCP.replace(
    "image: nvcr.io/nvidia/rapidsai/base:25.12-cuda13.0-py3.12", "image: {{ .Values.image }}"
)


def test_an_image_that_is_a_mapping_is_one_line_and_the_other_files_are_fixed(
    tmp_path: Path,
) -> None:
    bad, good = tmp_path / "a-templated.yaml", tmp_path / "b-good.yaml"
    bad.write_text(TEMPLATED)
    good.write_text(TCP)
    code, _, err = cli(["fix", "-i", str(tmp_path)])
    assert code == 2
    assert bad.read_text() == TEMPLATED
    assert good.read_text() != TCP
    assert cli(["check", str(good)])[0] == 0
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert errors == [  # refused as kubectl refuses it, when it is read
        f"error: {bad}:12: document 1: invalid map key: a dict cannot be a key: kubectl refuses "
        "it too; it looks like a Helm template: check the rendered chart (helm template CHART | "
        "dask-gpu-parity check -) or exclude it [DGP901]"
    ]
    assert "Traceback" not in err
    code, out, err = cli(["fix", str(bad)])
    assert (code, out) == (2, "")
    assert err.count("\n") == 1


def test_in_place_refuses_a_symlink_in_a_folder_that_points_outside_it(tmp_path: Path) -> None:
    tree, outside = tmp_path / "tree", tmp_path / "outside"
    tree.mkdir()
    outside.mkdir()
    (outside / "shared.yaml").write_text(TCP)
    (tree / "escape.yaml").symlink_to(outside / "shared.yaml")
    (tree / "real.yaml").write_text(TCP)
    (tree / "inside.yaml").symlink_to("real.yaml")  # inside the tree: written through
    code, _, err = cli(["fix", "-i", str(tree)])
    assert code == 2
    assert (outside / "shared.yaml").read_text() == TCP
    assert (tree / "real.yaml").read_text() != TCP
    assert (tree / "inside.yaml").is_symlink()
    assert (
        f"error: {tree / 'escape.yaml'}: a symbolic link to {outside / 'shared.yaml'}, outside "
        f"{tree}: not written; name the link or its target to fix it [DGP900]"
    ) in err.splitlines()
    # Named, the link is written through (as ruff format does), also beside its folder.
    code, _, err = cli(["fix", "-i", str(tree), f"{tree}/./escape.yaml"])
    assert (code, err.count("error:")) == (0, 0)
    assert (outside / "shared.yaml").read_text() != TCP


def _acl(*entries: tuple[int, int, int]) -> bytes:
    """A POSIX ACL as the kernel stores it in ``system.posix_acl_access`` (version 2)."""
    return struct.pack("<I", 2) + b"".join(struct.pack("<HHI", *e) for e in entries)


def _reviewed(tmp_path: Path) -> Path:
    """The TCP example with a user extended attribute (skips where the file system has none)."""
    path = tmp_path / "c.yaml"
    path.write_text(TCP)
    try:
        os.setxattr(path, "user.x", b"reviewed")
    except OSError as exc:  # pragma: no cover - a file system without user xattrs
        pytest.skip(f"no user xattrs here: {exc}")
    return path


def test_in_place_keeps_extended_attributes_and_acls(tmp_path: Path) -> None:
    path = _reviewed(tmp_path)
    # u::rw-, u:12345:r--, g::r--, m::r--, o::--- (setfacl -m u:12345:r)
    acl = _acl((1, 6, 0xFFFFFFFF), (2, 4, 12345), (4, 4, 0xFFFFFFFF), (0x10, 4, 0xFFFFFFFF))
    acl += _acl((0x20, 0, 0xFFFFFFFF))[4:]
    has_acl = True
    if shutil.which("setfacl"):
        subprocess.run(["setfacl", "-m", "u:12345:r", str(path)], check=True)
    else:
        try:
            os.setxattr(path, "system.posix_acl_access", acl)
        except OSError:
            has_acl = False
    before = {name: os.getxattr(path, name) for name in os.listxattr(path)}
    mode = path.stat().st_mode
    assert cli(["fix", "-i", str(path)])[0] == 0
    assert path.read_text() != TCP
    assert {name: os.getxattr(path, name) for name in os.listxattr(path)} == before
    assert before["user.x"] == b"reviewed"
    assert ("system.posix_acl_access" in before) == has_acl
    assert path.stat().st_mode == mode
    assert [p.name for p in tmp_path.iterdir()] == ["c.yaml"]


def test_in_place_drops_no_inherited_acl_onto_the_file(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(TCP)
    default = _acl((1, 7, 0xFFFFFFFF), (2, 7, 12345), (4, 5, 0xFFFFFFFF), (0x10, 7, 0xFFFFFFFF))
    default += _acl((0x20, 5, 0xFFFFFFFF))[4:]
    try:
        os.setxattr(tmp_path, "system.posix_acl_default", default)
    except OSError as exc:  # pragma: no cover - a file system without ACLs
        pytest.skip(f"no ACLs here: {exc}")
    assert "system.posix_acl_access" not in os.listxattr(path)
    assert cli(["fix", "-i", str(path)])[0] == 0
    assert path.read_text() != TCP
    assert "system.posix_acl_access" not in os.listxattr(path)


@pytest.mark.parametrize("named", [True, False], ids=["named", "in-a-folder"])
def test_in_place_refuses_a_fifo_without_blocking(tmp_path: Path, named: bool) -> None:
    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)
    (tmp_path / "good.yaml").write_text(TCP)

    unblocked: list[bool] = []

    def unblock() -> None:  # a reader waiting for a writer gets one: the test fails, not hangs
        with contextlib.suppress(OSError):
            os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
            unblocked.append(True)

    guard = threading.Timer(5, unblock)
    guard.start()
    try:
        code, _, err = cli(["fix", "-i", str(fifo if named else tmp_path)])
    finally:
        guard.cancel()
    assert not unblocked, "fix waited for a writer of the FIFO"
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    if named:
        assert code == 2
        assert err.splitlines()[0] == (
            f"error: {fifo}: a FIFO, not a regular file: fix --in-place rewrites regular files "
            "only; fix it to stdout instead [DGP900]"
        )
    else:  # a folder walk reads regular files only
        assert code == 0
        assert (tmp_path / "good.yaml").read_text() != TCP


def test_in_place_keeps_a_byte_order_mark(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_bytes(b"\xef\xbb\xbf" + TCP.encode())
    assert cli(["fix", "-i", str(path)])[0] == 0
    data = path.read_bytes()
    assert data.startswith(b"\xef\xbb\xbf")
    assert not data[3:].startswith(b"\xef\xbb\xbf")
    assert data[3:].decode() != TCP
    assert cli(["check", str(path)])[0] == 0


def _hard_linked(tmp_path: Path) -> Path:
    """The TCP example with a second hard link: fix must overwrite it in place."""
    path = tmp_path / "c.yaml"
    path.write_text(TCP)
    os.link(path, tmp_path / "second-link.yaml")
    return path


def test_an_overwrite_that_fails_leaves_the_old_content(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _hard_linked(tmp_path)

    def full(*_args: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(inplace.os, "posix_fallocate", full)
    code, _, err = cli(["fix", "-i", str(path)])
    assert code == 2
    assert "cannot write it: No space left on device [DGP900]" in err
    assert path.read_text() == TCP


def test_attributes_that_cannot_be_copied_make_it_write_in_place(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _reviewed(tmp_path)
    inode = path.stat().st_ino

    def refuse(*_args: object) -> None:  # as for security.* attributes without the privilege
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr(inplace.os, "setxattr", refuse)
    code, _, err = cli(["fix", "-i", str(path)])
    assert code == 0
    assert f"fixed {path} (overwritten in place)" in err
    assert path.stat().st_ino == inode
    assert os.getxattr(path, "user.x") == b"reviewed"
    assert path.read_text() != TCP
    assert [p.name for p in tmp_path.iterdir()] == ["c.yaml"]


@pytest.mark.parametrize("threads", [1, 2], ids=["alone", "beside-another-thread"])
def test_a_signal_during_an_overwrite_comes_after_the_whole_write(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, threads: int
) -> None:
    """Also with a second thread in the process: the kernel then hands it the signal, and
    Python runs the handler in the main thread all the same (a mask there held nothing)."""
    stop = threading.Event()
    others = [threading.Thread(target=stop.wait, daemon=True) for _ in range(threads - 1)]
    for thread in others:
        thread.start()
    try:
        _overwrite_signalled(tmp_path, monkeypatch)
    finally:
        stop.set()


def _overwrite_signalled(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = _hard_linked(tmp_path)
    expected = cli(["fix", str(path)])[1]
    real_fallocate = os.posix_fallocate
    calls: list[int] = []

    def killed(fd: int, offset: int, length: int) -> None:
        os.kill(os.getpid(), signal.SIGTERM)  # sent as the overwrite starts: held until done
        calls.append(length)
        real_fallocate(fd, offset, length)

    monkeypatch.setattr(inplace.os, "posix_fallocate", killed)
    before = signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        code, _, err = cli(["fix", "-i", str(path)])
    finally:
        signal.signal(signal.SIGTERM, before)
    assert err.splitlines()[-1] == "stopped by signal SIGTERM"
    assert len(calls) == 1
    assert code == 128 + signal.SIGTERM
    assert path.read_text() == expected  # all of the new content, not part of it
