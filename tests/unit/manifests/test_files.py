"""Files as careful formatters treat them: which are read, bounded reads, in-place rewrites."""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
from pathlib import Path

import pytest

from dask_gpu_parity.manifests import inplace, sources
from tests.unit.helpers import EXAMPLES
from tests.unit.reports import cli

TCP = (EXAMPLES / "gpu-cluster-tcp.yaml").read_text()


def _files(argv: list[str]) -> list[str]:
    """The files `check` read: every Dask resource's file (JSON report)."""
    code, out, err = cli([*argv, "-o", "json"])
    assert code in (0, 1), err
    findings = json.loads(out)["findings"]
    return sorted({f["resource"]["file"] for f in findings})


@pytest.fixture
def tree(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A repository: GPU clusters in many places, some of which must be left out."""
    layout = [
        "a.yaml",
        "UPPER.YAML",
        "Mixed.Yml",
        "data.JSON",
        "notes.txt",
        "legacy/old.yaml",
        "gen/x.generated.yaml",
        ".venv/lib/site.yaml",
        "node_modules/pkg/x.yaml",
        "ignored/by-git.yaml",
        "nested/keep.yaml",
        "nested/drop.yaml",
        "chart/Chart.yaml",
        "chart/templates/cluster.yaml",
        "chart/templates/sub/cluster.yaml",
        "overlay/kustomization.yaml",
        "overlay/patch.yaml",
        "overlay/cluster.yaml",
    ]
    for name in layout:
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if name.endswith(".JSON"):
            import yaml

            path.write_text(json.dumps(yaml.safe_load(TCP)))
        else:
            path.write_text(TCP)
    (tmp_path / "chart/Chart.yaml").write_text("apiVersion: v2\nname: c\nversion: 1.0.0\n")
    (tmp_path / "overlay/kustomization.yaml").write_text(
        "resources: [cluster.yaml]\npatches:\n  - path: patch.yaml\n"
    )
    (tmp_path / ".git").mkdir()
    (tmp_path / ".gitignore").write_text("ignored/\n")
    (tmp_path / "nested/.gitignore").write_text("drop.yaml\n")
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_folder_walk_defaults(tree: Path) -> None:
    assert _files(["check", "."]) == [
        "Mixed.Yml",
        "UPPER.YAML",
        "a.yaml",
        "data.JSON",
        "gen/x.generated.yaml",
        "legacy/old.yaml",
        "nested/keep.yaml",
        "overlay/cluster.yaml",
    ]


def test_exclude_patterns_are_gitignore_style(tree: Path) -> None:
    got = _files(["check", ".", "--exclude", "legacy/", "--exclude", "*.generated.yaml"])
    assert "legacy/old.yaml" not in got
    assert "gen/x.generated.yaml" not in got
    assert "a.yaml" in got
    assert _files(["check", ".", "--exclude", "/a.yaml"]).count("a.yaml") == 0


def test_no_defaults_reads_everything(tree: Path) -> None:
    got = _files(["check", ".", "--no-default-excludes", "--no-respect-gitignore"])
    for name in (".venv/lib/site.yaml", "ignored/by-git.yaml", "overlay/patch.yaml"):
        assert name in got
    assert "nested/drop.yaml" in got
    _, out, _ = cli(["check", ".", "--no-default-excludes", "-o", "json"])
    assert "chart/templates/cluster.yaml" in {
        f["resource"]["file"] for f in json.loads(out)["findings"]
    }


def test_named_files_are_read_unless_force_exclude(tree: Path) -> None:
    named = ["chart/templates/cluster.yaml", "overlay/patch.yaml", "legacy/old.yaml", "a.yaml"]
    assert _files(["check", *named]) == sorted(named)
    assert _files(["check", *named, "--force-exclude", "--exclude", "legacy/"]) == ["a.yaml"]


def test_stdin_filename_is_excluded_with_force_exclude(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    argv = ["check", "-", "--stdin-filename", "chart/templates/x.yaml", "--force-exclude"]
    code, out, _ = cli(argv, stdin=TCP.encode(), monkeypatch=monkeypatch)
    assert code == 0
    assert "0 Dask resource(s)" in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["check", ""], 'an empty path ("") names no file'),
        (["fix", "-i", ""], 'an empty path ("") names no file'),
        (["check", "-", "-"], "can be read only once"),
        (["check", "x.yaml", "--policy", ""], "an empty path"),
    ],
    ids=["check", "fix-in-place", "stdin-twice", "policy"],
)
def test_empty_paths_are_usage_errors(
    tmp_path: Path, argv: list[str], message: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "x.yaml").write_text(TCP)
    code, _, err = cli(argv)
    assert code == 2
    assert message in err
    assert err.count("\n") == 1
    assert (tmp_path / "x.yaml").read_text() == TCP


def test_reads_are_bounded_whatever_the_size_says(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sources, "MAX_BYTES", 1024)
    code, out, _ = cli(["check", "/dev/zero"])
    assert code == 1
    assert "/dev/zero: error DGP900 larger than 0 MiB: split it" in out

    class Endless(io.RawIOBase):
        def readable(self) -> bool:
            return True

        def readinto(self, buffer: bytearray) -> int:  # type: ignore[override]
            buffer[:] = b"a" * len(buffer)
            return len(buffer)

    class Stdin:
        buffer = io.BufferedReader(Endless())

    monkeypatch.setattr("sys.stdin", Stdin)
    code, out, _ = cli(["check", "-"])
    assert code == 1
    assert "<stdin>: error DGP900 larger than" in out


# --- fix --in-place ------------------------------------------------------------------------


def test_in_place_writes_through_a_symlink(tmp_path: Path) -> None:
    target = tmp_path / "real.yaml"
    target.write_text(TCP)
    link = tmp_path / "link.yaml"
    link.symlink_to(target)
    code, _, err = cli(["fix", "-i", str(link)])
    assert code == 0
    assert link.is_symlink()
    assert target.read_text() != TCP
    assert f"fixed {link}" in err


def test_in_place_keeps_hard_links_mode_and_owner(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(TCP)
    path.chmod(0o640)
    other = tmp_path / "other-name.yaml"
    os.link(path, other)
    inode = path.stat().st_ino
    code, _, err = cli(["fix", "-i", str(path)])
    assert code == 0
    assert path.stat().st_ino == inode == other.stat().st_ino
    assert other.read_text() == path.read_text() != TCP
    assert path.stat().st_mode & 0o777 == 0o640
    assert "(overwritten in place)" in err

    single = tmp_path / "single.yaml"
    single.write_text(TCP)
    single.chmod(0o604)
    if os.geteuid() == 0:
        os.chown(single, 12345, 23456)
    assert cli(["fix", "-i", str(single)])[0] == 0
    info = single.stat()
    assert info.st_mode & 0o777 == 0o604
    if os.geteuid() == 0:
        assert (info.st_uid, info.st_gid) == (12345, 23456)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "c.yaml",
        "other-name.yaml",
        "single.yaml",
    ]


def test_in_place_keeps_crlf(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_bytes(TCP.replace("\n", "\r\n").encode())
    assert cli(["fix", "-i", str(path)])[0] == 0
    data = path.read_bytes()
    assert data.count(b"\r\n") == data.count(b"\n") > TCP.count("\n")
    assert cli(["check", str(path)])[0] == 0


def test_in_place_goes_on_past_bad_files(tmp_path: Path) -> None:
    good, bad = tmp_path / "good.yaml", tmp_path / "bad.yaml"
    good.write_text(TCP)
    bad.write_text("a: [unclosed\n")
    code, _, err = cli(["fix", "-i", str(tmp_path)])
    assert code == 2
    assert good.read_text() != TCP
    assert bad.read_text() == "a: [unclosed\n"
    lines = err.splitlines()
    assert lines[0] == f"fixed {good}"
    assert lines[1].startswith(f"error: {bad}:2:1: invalid YAML")
    assert lines[1].endswith("[DGP901]")
    assert "1 file(s) fixed, 0 left unchanged" in lines


def test_fix_to_stdout_writes_nothing_when_an_input_is_bad(tmp_path: Path) -> None:
    (tmp_path / "good.yaml").write_text(TCP)
    (tmp_path / "bad.yaml").write_bytes(b"\x00")
    code, out, err = cli(["fix", str(tmp_path)])
    assert (code, out) == (2, "")
    assert "binary data" in err


def test_in_place_in_a_read_only_folder_overwrites(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(TCP)

    def refuse(*_args: object, **_kwargs: object) -> None:
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(inplace.tempfile, "mkstemp", refuse)
    assert cli(["fix", "-i", str(path)])[0] == 0
    assert path.read_text() != TCP


def test_in_place_cannot_write_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(TCP)

    def full(*_args: object, **_kwargs: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(inplace.os, "replace", full)
    code, _, err = cli(["fix", "-i", str(path)])
    assert code == 2
    assert f"error: {path}: cannot write it: No space left on device [DGP900]" in err
    assert path.read_text() == TCP
    assert [p.name for p in tmp_path.iterdir()] == ["c.yaml"]


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP], ids=lambda s: s.name)
def test_a_signal_during_in_place_leaves_no_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, signum: signal.Signals
) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(TCP)
    real_fsync = os.fsync

    def killed(fd: int) -> None:
        real_fsync(fd)
        os.kill(os.getpid(), signum)  # delivered at once: the handler raises here

    monkeypatch.setattr(inplace.os, "fsync", killed)
    before = signal.signal(signum, signal.SIG_DFL)  # as a shell starts us (not under nohup)
    try:
        code, _, err = cli(["fix", "-i", str(path)])
        assert signal.getsignal(signum) is signal.SIG_DFL  # restored
    finally:
        signal.signal(signum, before)
    assert code == 128 + signum
    assert err.splitlines()[-1] == f"stopped by signal {signum.name}"
    assert path.read_text() == TCP
    assert [p.name for p in tmp_path.iterdir()] == ["c.yaml"]


def test_a_hangup_ignored_by_nohup_stays_ignored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(TCP)
    real_fsync = os.fsync

    def hung_up(fd: int) -> None:
        real_fsync(fd)
        os.kill(os.getpid(), signal.SIGHUP)  # ignored: the write goes on

    monkeypatch.setattr(inplace.os, "fsync", hung_up)
    before = signal.signal(signal.SIGHUP, signal.SIG_IGN)  # as nohup starts us
    try:
        code, _, _ = cli(["fix", "-i", str(path)])
        assert signal.getsignal(signal.SIGHUP) is signal.SIG_IGN
    finally:
        signal.signal(signal.SIGHUP, before)
    assert code == 0  # fixed
    assert path.read_text() != TCP
    assert [p.name for p in tmp_path.iterdir()] == ["c.yaml"]


def test_hostile_file_names_are_escaped_in_fix_messages(tmp_path: Path) -> None:
    path = tmp_path / "evil\x1b[2J\n.yaml"
    path.write_text(TCP)
    code, _, err = cli(["fix", "-i", str(tmp_path)])
    assert code == 0
    assert "\x1b" not in err
    assert "evil\\x1b[2J\\n.yaml" in err
    shutil.rmtree(tmp_path)


@pytest.mark.parametrize("newline", ["\r", "\r\n", "\u2028"], ids=["cr", "crlf", "ls"])
def test_findings_point_at_their_lines_whatever_the_line_ends(tmp_path: Path, newline: str) -> None:
    path = tmp_path / "c.yaml"
    path.write_bytes(TCP.replace("\n", newline).encode())
    _, out, _ = cli(["check", str(path), "-o", "json"])
    expected = json.loads(cli(["check", str(EXAMPLES / "gpu-cluster-tcp.yaml"), "-o", "json"])[1])
    lines = [(f["code"], f["resource"]["line"]) for f in json.loads(out)["findings"]]
    assert lines == [(f["code"], f["resource"]["line"]) for f in expected["findings"]]
    if newline != "\u2028":
        assert cli(["fix", "-i", str(path)])[0] == 0
        data = path.read_bytes().decode()
        assert data.count(newline) > TCP.count("\n")
        assert "\n" not in data.replace("\r\n", "") or newline == "\r\n"
        assert cli(["check", str(path)])[0] == 0


def test_a_list_inside_a_list_is_refused_as_kubectl_refuses_it(tmp_path: Path) -> None:
    """kubectl's FlattenListVisitor cannot extract the items of an item (``meta.ExtractList``)."""
    import yaml

    cluster = yaml.safe_load(TCP)
    inner = {"apiVersion": "v1", "kind": "List", "items": [cluster]}
    path = tmp_path / "nested.yaml"
    content = yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [inner]})
    path.write_text(content)
    code, out, _ = cli(["check", str(path)])
    assert code == 1
    assert "DGP901 document 1: items/0 is a list itself, which kubectl cannot apply" in out
    assert cli(["fix", "-i", str(path)])[0] == 2
    assert path.read_text() == content


def test_fix_reads_a_json_file_holding_yaml_as_check_does(tmp_path: Path) -> None:
    path = tmp_path / "cluster.json"
    path.write_text(TCP)
    assert cli(["check", str(path)])[0] == 1
    assert cli(["fix", "-i", str(path)])[0] == 0
    assert cli(["check", str(path)])[0] == 0


def test_fix_that_cannot_rewrite_says_why_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "dup.yaml"
    text = TCP.replace("metadata:\n", "metadata:\n  labels: {a: '1'}\n  labels: {b: '2'}\n", 1)
    path.write_text(text)
    code, _, err = cli(["fix", "-i", str(path)])
    assert code == 2
    assert err.splitlines()[0].startswith(f"error: {path}: cannot rewrite it: found duplicate key")
    assert path.read_text() == text


def test_a_file_reached_twice_is_read_once(tree: Path) -> None:
    code, out, _ = cli(["check", "a.yaml", ".", "./a.yaml", "-o", "json"])
    assert code == 1
    assert json.loads(out)["summary"]["resources"] == 8
