"""scripts/krew.py: the krew plugin's archive and manifest, as the release attaches them.

The manifest is checked against krew's plugin manifest reference
(https://krew.sigs.k8s.io/docs/developer-guide/plugin-manifest/): ``spec.version`` a ``v``-prefixed
semantic version, each platform's ``uri`` the archive and ``sha256`` its 64 lowercase hex digits,
``bin`` the executable inside the archive. The download URL is GitHub's for a release asset
(https://docs.github.com/en/repositories/releasing-projects-on-github/linking-to-releases):
``https://github.com/OWNER/REPO/releases/download/TAG/ASSET``.
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import io
import os
import subprocess
import sys
import tarfile
from pathlib import Path
from types import ModuleType

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
ARCHIVE = "kubectl-dask_gpu_parity.tar.gz"
HINT = "pip install 'dask-gpu-parity[operator]'"


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"{name}_script", ROOT / "scripts" / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


krew = _load("krew")


def _build(out: Path, tag: str = "v0.1.0", *extra: str) -> int:
    return krew.main(["--tag", tag, "--out", str(out), *extra])


def _members(archive: bytes) -> dict[str, tarfile.TarInfo]:
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        return {member.name: member for member in tar.getmembers()}


def test_two_builds_give_the_same_archive_bytes(tmp_path: Path) -> None:
    assert _build(tmp_path / "one") == 0
    assert _build(tmp_path / "two") == 0
    one, two = ((tmp_path / d / ARCHIVE).read_bytes() for d in ("one", "two"))
    assert one == two
    assert one[:2] == b"\x1f\x8b"  # gzip
    assert one[4:8] == b"\0\0\0\0"  # no gzip modification time (RFC 1952, MTIME)
    assert one[3] & 0x08 == 0  # no original file name (FNAME flag)


def test_the_archive_does_not_depend_on_the_sources_times_or_modes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    archives = []
    for n, (mtime, mode) in enumerate([(0, 0o600), (1_700_000_000, 0o777)]):
        members = []
        for name, source, archived_mode in krew.MEMBERS:
            copy = tmp_path / f"src{n}" / name
            copy.parent.mkdir(exist_ok=True)
            copy.write_bytes(source.read_bytes())
            copy.chmod(mode)
            os.utime(copy, (mtime, mtime))  # as after another checkout
            members.append((name, copy, archived_mode))
        monkeypatch.setattr(krew, "MEMBERS", tuple(members))
        assert _build(tmp_path / f"out{n}") == 0
        archives.append((tmp_path / f"out{n}" / ARCHIVE).read_bytes())
    assert archives[0] == archives[1]


def test_the_archive_holds_exactly_the_executable_launcher_and_the_license(tmp_path: Path) -> None:
    assert _build(tmp_path) == 0
    archive = (tmp_path / ARCHIVE).read_bytes()
    members = _members(archive)
    assert list(members) == ["LICENSE", "kubectl-dask_gpu_parity"]
    launcher, license_ = members["kubectl-dask_gpu_parity"], members["LICENSE"]
    assert (launcher.isfile(), launcher.mode, license_.isfile(), license_.mode) == (
        True,
        0o755,
        True,
        0o644,
    )
    assert {(m.uid, m.gid, m.uname, m.gname) for m in members.values()} == {(0, 0, "root", "root")}
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r:gz") as tar:
        for name, source in (
            ("LICENSE", ROOT / "LICENSE"),
            ("kubectl-dask_gpu_parity", ROOT / "plugins" / "krew" / "kubectl-dask_gpu_parity"),
        ):
            extracted = tar.extractfile(name)
            assert extracted is not None
            assert extracted.read() == source.read_bytes()


def _extracted_launcher(tmp_path: Path) -> Path:
    assert _build(tmp_path / "assets") == 0
    with tarfile.open(tmp_path / "assets" / ARCHIVE, mode="r:gz") as tar:
        tar.extractall(tmp_path / "plugin", filter="tar")  # keeps the mode, as krew does
    return tmp_path / "plugin" / "kubectl-dask_gpu_parity"


def _python3(tmp_path: Path, *flags: str) -> Path:
    """A folder whose python3 is this test's interpreter (a venv's python must be run by path)."""
    folder = tmp_path / "bin"
    folder.mkdir()
    python3 = folder / "python3"
    python3.write_text(f'#!/bin/sh\nexec {sys.executable} {" ".join(flags)} "$@"\n')
    python3.chmod(0o755)
    return folder


def _kubectl_runs(
    launcher: Path, path: str, pythonpath: str | None
) -> subprocess.CompletedProcess[str]:
    env = {"PATH": path, **({"PYTHONPATH": pythonpath} if pythonpath else {})}
    return subprocess.run(
        [str(launcher), "--help"], env=env, capture_output=True, text=True, timeout=60, check=False
    )


def test_the_extracted_launcher_runs_the_cli_of_the_python3_on_path(tmp_path: Path) -> None:
    launcher = _extracted_launcher(tmp_path)
    folder = _python3(tmp_path)
    result = _kubectl_runs(launcher, f"{folder}:/usr/bin:/bin", f"{ROOT / 'operator'}")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("usage: dask-gpu-parity")
    assert "audit" in result.stdout


def test_without_the_package_the_launcher_prints_the_pip_hint_on_one_line_and_exits_2(
    tmp_path: Path,
) -> None:
    launcher = _extracted_launcher(tmp_path)
    folder = _python3(tmp_path, "-I", "-S")  # no site-packages, no PYTHONPATH: only the stdlib
    result = _kubectl_runs(launcher, f"{folder}:/usr/bin:/bin", f"{ROOT / 'operator'}")
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith("kubectl-dask_gpu_parity: python3 cannot import")
    assert result.stderr.rstrip().endswith(HINT)


def test_without_python3_the_launcher_says_so_on_one_line_and_exits_2(tmp_path: Path) -> None:
    launcher = _extracted_launcher(tmp_path)
    empty = tmp_path / "empty"
    empty.mkdir()
    result = _kubectl_runs(launcher, str(empty), None)
    assert (result.returncode, result.stdout) == (2, "")
    assert (
        result.stderr == f"kubectl-dask_gpu_parity: python3 not found on PATH: "
        f"install Python 3.11+, then {HINT}\n"
    )


def test_the_manifest_names_the_tag_and_the_archive_by_its_url_and_sha256(tmp_path: Path) -> None:
    tag = "v1.2.3-rc.1"
    assert _build(tmp_path, tag, "--repository", "example-org/dgp-fork") == 0
    archive = (tmp_path / ARCHIVE).read_bytes()
    manifest = yaml.safe_load((tmp_path / "dask-gpu-parity.yaml").read_text())
    assert manifest["apiVersion"] == "krew.googlecontainertools.github.com/v1alpha2"
    assert manifest["kind"] == "Plugin"
    assert manifest["metadata"]["name"] == "dask-gpu-parity"
    assert manifest["spec"]["version"] == tag
    (platform,) = manifest["spec"]["platforms"]
    assert platform["uri"] == (
        f"https://github.com/example-org/dgp-fork/releases/download/{tag}/{ARCHIVE}"
    )
    assert platform["sha256"] == hashlib.sha256(archive).hexdigest()
    assert platform["bin"] in _members(archive)
    assert "@" not in yaml.safe_dump(manifest)  # no placeholder left
    header = (tmp_path / "dask-gpu-parity.yaml").read_text().splitlines()[:3]
    assert f"# krew plugin manifest of dask-gpu-parity {tag}, rendered" in header[0]
    assert header[2].endswith(
        f"--manifest-url=https://github.com/example-org/dgp-fork/releases/download/{tag}/"
        "dask-gpu-parity.yaml"
    )


def test_the_template_is_a_template_and_the_rest_of_it_is_the_manifest(tmp_path: Path) -> None:
    template = (ROOT / "plugins" / "krew" / "dask-gpu-parity.yaml").read_text()
    assert "template" in template.splitlines()[1]  # its header says so
    assert _build(tmp_path) == 0
    rendered = (tmp_path / "dask-gpu-parity.yaml").read_text()
    source, result = yaml.safe_load(template), yaml.safe_load(rendered)
    assert source["spec"]["version"] == "@VERSION@"
    for data in (source, result):
        del data["spec"]["version"]
        for platform in data["spec"]["platforms"]:
            del platform["uri"], platform["sha256"]
    assert result == source


@pytest.mark.parametrize(
    ("args", "message"),
    [
        pytest.param(["--tag", "0.1.0"], "Tag '0.1.0' is not a release tag", id="no-v"),
        pytest.param(["--tag", "v0.1"], "Tag 'v0.1' is not a release tag", id="two-numbers"),
        pytest.param(["--tag", "v0.1.0/x"], "is not a release tag", id="a-path"),
        pytest.param(
            ["--tag", "v0.1.0", "--repository", "dask-gpu-parity"],
            "Repository 'dask-gpu-parity' is not a GitHub repository: expected OWNER/NAME",
            id="repository-without-owner",
        ),
    ],
)
def test_bad_input_is_one_line_exit_2_and_writes_nothing(
    args: list[str], message: str, tmp_path: Path
) -> None:
    out = tmp_path / "assets"
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "krew.py"), *args, "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr.count("\n") == 1
    assert result.stderr.startswith("krew.py: ")
    assert message in result.stderr
    assert not out.exists()


def test_a_template_without_its_placeholders_is_refused_and_nothing_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    template = tmp_path / "dask-gpu-parity.yaml"
    text = (ROOT / "plugins" / "krew" / "dask-gpu-parity.yaml").read_text()
    template.write_text(text.replace('"@SHA256@"', '"' + "0" * 64 + '"'))
    with pytest.raises(krew.KrewError, match=r'"@SHA256@" 0 times'):
        krew.build("v0.1.0", "dask-gpu-parity/dask-gpu-parity", tmp_path / "out", template)
    assert not (tmp_path / "out").exists()


def test_the_tag_pattern_is_the_release_scripts() -> None:
    assert krew.TAG.pattern == _load("release").TAG.pattern


def test_the_archive_is_gzip_of_a_ustar_tar(tmp_path: Path) -> None:
    """USTAR: no pax headers, whose extended times would vary with the build's clock."""
    assert _build(tmp_path) == 0
    tar = gzip.decompress((tmp_path / ARCHIVE).read_bytes())
    assert tar[257:263] == b"ustar\0"
    assert b"PaxHeader" not in tar
