"""The pinned inputs of `make images`: read strictly, checked against what is downloaded."""

from __future__ import annotations

import hashlib
import re

import pytest

from provingground.images.catalog import REPO_ROOT
from provingground.images.pins import (
    VERSIONS,
    PinMismatchError,
    fetch_pinned,
    lock_drift,
    parse_lock,
    read_pins,
)


def test_the_pins_hold_together():
    pins = read_pins()
    # The busybox .deb is the version the stand-in base is named after, which is the Dockerfile's.
    deb_version = pins.busybox_deb_url.rsplit("/", 1)[-1].split("_")[1]
    assert deb_version.startswith(pins.busybox_version + "-")
    dockerfile = (REPO_ROOT / "Dockerfile").read_text()
    assert f"FROM {pins.busybox_base_name} AS probe" in dockerfile
    # The Python base's name says the Python that bookworm's python3 is (python-base.lock).
    lock = parse_lock((REPO_ROOT / "provingground/images/python-base.lock").read_text())
    assert f"python{pins.python_base_version}" in lock
    assert pins.python_base_name == f"python:{pins.python_base_version}-slim-{pins.debian_suite}"
    # The dask operator's sdist is the version the test extra pins.
    pyproject = (REPO_ROOT / "pyproject.toml").read_text()
    assert f'"dask-kubernetes=={pins.dask_kubernetes_version}"' in pyproject
    assert re.fullmatch(r"v\d+\.\d+\.\d+", pins.buildkit_version)


def test_the_dockerfile_default_python_is_unchanged_for_docker_build():
    assert "ARG PYTHON_VERSION=3.12\n" in (REPO_ROOT / "Dockerfile").read_text()


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda t: t.replace("BUILDKIT_VERSION=", "BUILDKIT_VERSON="), "expected one of"),
        (lambda t: t + "BUILDKIT_VERSION=v1.0.0\n", "expected one of"),
        (lambda t: re.sub(r"(?m)^DEBIAN_SUITE=.*\n", "", t), "missing DEBIAN_SUITE"),
        (
            lambda t: re.sub(r"BUSYBOX_DEB_SHA256=\w+", "BUSYBOX_DEB_SHA256=abc", t),
            "64 lower-case hex",
        ),
    ],
)
def test_a_malformed_versions_file_is_refused_with_its_line(tmp_path, edit, message):
    path = tmp_path / "versions.env"
    path.write_text(edit(VERSIONS.read_text()))
    with pytest.raises(PinMismatchError, match=message):
        read_pins(path)


def test_a_pinned_download_is_kept_only_when_its_sha256_matches(tmp_path):
    source = tmp_path / "busybox-static_1.37.0-6_amd64.deb"
    source.write_bytes(b"a .deb")
    good = hashlib.sha256(b"a .deb").hexdigest()
    got = fetch_pinned(source.as_uri(), good, tmp_path / "cache")
    assert got.read_bytes() == b"a .deb"
    assert got.parent.name == good
    bad = "0" * 64
    with pytest.raises(PinMismatchError, match=f"is not the pinned {bad}"):
        fetch_pinned(source.as_uri(), bad, tmp_path / "cache")
    assert not list((tmp_path / "cache" / bad).iterdir())  # nothing half-kept


def test_the_lock_file_reader_skips_comments():
    text = "# name=version, as last built\n\nlibc6=2.36-9+deb12u14\npython3.11=3.11.2-6+deb12u8\n"
    assert parse_lock(text) == {"libc6": "2.36-9+deb12u14", "python3.11": "3.11.2-6+deb12u8"}


def test_lock_drift_names_each_changed_added_and_removed_package():
    locked = {"libc6": "2.36-9+deb12u13", "gone": "1", "same": "1"}
    installed = {"libc6": "2.36-9+deb12u14", "new": "2", "same": "1"}
    assert lock_drift(locked, installed) == [
        "gone: 1 -> (not installed)",
        "libc6: 2.36-9+deb12u13 -> 2.36-9+deb12u14",
        "new: (not locked) -> 2",
    ]
