"""The images `make images` built, unpacked: what the Dockerfile promises, checked in the image.

Needs `.images/` (`make images`); the runs need root and runc (`make node` builds
the real node's; RUNC=path overrides). Each test skips, saying which, when one is missing.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from provingground.images import CatalogError, Image, catalog, oci

from .runc import find_runc, run_in_image

# What counts as a compiler or build tool (the Dockerfile: "no compilers, no build tools").
COMPILERS = ("gcc", "cc", "c++", "g++", "cpp", "clang", "as", "ld", "make", "tcc")


def _image(name: str) -> Image:
    try:
        return catalog()[name]
    except CatalogError as exc:
        pytest.skip(f"no built images: {exc}")


@pytest.fixture(scope="module")
def operator_rootfs(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, oci.Layout]:
    image = _image("operator")
    bundle = tmp_path_factory.mktemp("operator")
    return bundle, oci.unpack(image.archive, bundle / "rootfs")


def test_operator_image_config_is_the_dockerfiles(operator_rootfs):
    _, layout = operator_rootfs
    config = layout.config["config"]
    assert config["User"] == "65532:65532"
    assert config["Entrypoint"] == ["dask-gpu-parity"]
    assert config["Cmd"][0] == "run"
    assert "VIRTUAL_ENV=/opt/dask-gpu-parity" in config["Env"]


def test_operator_image_has_no_compilers(operator_rootfs):
    bundle, _ = operator_rootfs
    found = [
        str(path.relative_to(bundle / "rootfs"))
        for folder in ("usr/bin", "usr/local/bin", "bin", "opt/dask-gpu-parity/bin")
        if (bundle / "rootfs" / folder).is_dir()
        for path in (bundle / "rootfs" / folder).iterdir()
        if path.name in COMPILERS or path.name.startswith(("x86_64-linux-gnu-gcc", "gcc-"))
    ]
    assert found == []
    assert not (bundle / "rootfs/opt/dask-gpu-parity/bin/pip").exists()  # uninstalled


def test_operator_image_names_the_reference_the_chart_uses():
    image = _image("operator")
    layout = oci.read_archive(image.archive)
    assert layout.name == image.reference
    assert layout.digest == image.digest


def _runc() -> Path:
    if os.geteuid() != 0:
        pytest.skip("running a container needs root")
    runc = find_runc()
    if runc is None:
        pytest.skip("no runc: `make node` builds the real node's (or set RUNC=path)")
    return runc


def test_operator_version_runs_in_the_image_read_only_as_65532(operator_rootfs, tmp_path):
    bundle, layout = operator_rootfs
    args = ["dask-gpu-parity", "--version"]
    proc = run_in_image(_runc(), bundle / "rootfs", layout.config["config"], args, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("dask-gpu-parity ")


def test_the_operator_user_has_a_name_and_home_without_the_charts_env(operator_rootfs, tmp_path):
    # kopf's identity is getpass.getuser() unless POD_ID is set (the chart sets it; docker run
    # does not), and the Kubernetes client resolves a home directory at import.
    bundle, layout = operator_rootfs
    args = [
        "python",
        "-c",
        "import getpass, pathlib; print(getpass.getuser(), pathlib.Path.home())",
    ]
    proc = run_in_image(_runc(), bundle / "rootfs", layout.config["config"], args, tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["nonroot", "/nonexistent"]


def test_probe_image_is_tiny_and_holds_the_probe(tmp_path):
    image = _image("probe")
    assert image.compressed_bytes < 2 * 2**20
    layout = oci.unpack(image.archive, tmp_path / "rootfs")
    assert layout.config["config"]["User"] == "65532:65532"
    assert (tmp_path / "rootfs/probe.py").is_file()
    assert oct((tmp_path / "rootfs/probe.py").stat().st_mode & 0o777) == "0o644"


@pytest.fixture(scope="module")
def dask_rootfs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    image = _image("dask")
    rootfs = tmp_path_factory.mktemp("dask") / "rootfs"
    oci.unpack(image.archive, rootfs)
    return rootfs


@pytest.mark.parametrize("command", ["dask-scheduler", "dask-worker"])
def test_dask_image_runs_the_commands_the_dask_operator_starts(dask_rootfs, tmp_path, command):
    image = _image("dask")
    config = oci.read_archive(image.archive).config["config"]
    proc = run_in_image(_runc(), dask_rootfs, config, [command, "--version"], tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert image.reference.endswith(":" + proc.stdout.split()[-1])  # the distributed version


def test_the_dask_operator_image_runs_its_entrypoint(tmp_path):
    image = _image("dask-operator")
    layout = oci.unpack(image.archive, tmp_path / "rootfs")
    config = layout.config["config"]
    assert config["User"] == "1000"  # its Dockerfile's USER
    assert config["Entrypoint"][:3] == ["/usr/local/bin/kopf", "run", "-m"]
    proc = run_in_image(
        _runc(), tmp_path / "rootfs", config, ["/usr/local/bin/kopf", "--version"], tmp_path / "b"
    )
    assert proc.returncode == 0, proc.stderr
    assert "kopf" in proc.stdout.lower()
