"""What `make images` asks BuildKit for: named contexts, the built-in frontend, the references."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from provingground.images.__main__ import main
from provingground.images.bases import Base
from provingground.images.build import (
    Spec,
    buildctl_args,
    chart_references,
    dask_operator_reference,
    named_contexts,
    rewrite_froms,
    specs,
)
from provingground.images.catalog import REPO_ROOT
from provingground.images.pins import read_pins

DIGEST = "sha256:" + "ab" * 32
PY = Base("python:3.11-slim-bookworm", Path("/cache/bases/py"), DIGEST, {})
BB = Base("busybox:1.37.0", Path("/cache/bases/bb"), "sha256:" + "cd" * 32, {})
BASES = {PY.name: PY, BB.name: BB}


def test_each_from_name_reads_its_base_from_an_oci_layout_pinned_by_digest():
    # The form of frontend/dockerui/namedcontext.go (moby/buildkit v0.34): context:NAME set to
    # oci-layout://STORE@DIGEST, STORE given to buildctl as --oci-layout STORE=DIR.
    assert named_contexts(("python:3.11-slim-bookworm",), BASES) == [
        "--oci-layout",
        "python-3-11-slim-bookworm=/cache/bases/py",
        "--opt",
        f"context:python:3.11-slim-bookworm=oci-layout://python-3-11-slim-bookworm@{DIGEST}",
    ]


def test_named_contexts_are_sorted_and_each_given_once():
    args = named_contexts(("python:3.11-slim-bookworm", "busybox:1.37.0", "busybox:1.37.0"), BASES)
    assert [a for a in args if a.startswith("context:")] == [
        f"context:busybox:1.37.0=oci-layout://busybox-1-37-0@{BB.digest}",
        f"context:python:3.11-slim-bookworm=oci-layout://python-3-11-slim-bookworm@{DIGEST}",
    ]


def test_a_from_name_without_a_base_is_refused():
    with pytest.raises(KeyError):
        named_contexts(("python:3.12",), BASES)


def test_buildctl_uses_the_built_in_frontend_and_never_the_syntax_image(tmp_path):
    spec = Spec(
        "probe", "r/p:1", tmp_path, tmp_path / "Dockerfile", "probe", {"A": "1"}, (BB.name,)
    )
    args = buildctl_args(spec, BASES, tmp_path / "out.tar")
    assert "--frontend=dockerfile.v0" in args
    # With a cmdline option the frontend skips the `# syntax=` line (it would pull the image).
    assert "--opt=cmdline=dockerfile.v0" in args
    assert "--opt=target=probe" in args
    assert "--opt=build-arg:A=1" in args
    assert f"--local=context={tmp_path}" in args
    assert f"--local=dockerfile={tmp_path}" in args
    assert args[-1] == f"--output=type=oci,dest={tmp_path / 'out.tar'},name=r/p:1"


def test_the_default_target_sends_no_target(tmp_path):
    spec = Spec("operator", "r/o:1", tmp_path, tmp_path / "Dockerfile")
    assert not [a for a in buildctl_args(spec, BASES, tmp_path / "o.tar") if "target=" in a]


def test_our_references_are_the_charts_defaults():
    # The chart's Artifact Hub annotation lists the images it deploys; the references must match.
    chart = REPO_ROOT / "charts" / "dask-gpu-parity"
    listed = yaml.safe_load(
        yaml.safe_load((chart / "Chart.yaml").read_text())["annotations"]["artifacthub.io/images"]
    )
    assert list(chart_references(chart)) == [item["image"] for item in listed]


def test_the_dask_operator_reference_is_its_charts_default(tmp_path):
    # dask-kubernetes 2026.3.0's chart: image.name ghcr.io/dask/dask-kubernetes-operator and
    # image.tag "set-by-chartpress" (its values.yaml), used as "{{ name }}:{{ tag }}".
    values = (
        tmp_path / "dask_kubernetes/operator/deployment/helm/dask-kubernetes-operator/values.yaml"
    )
    values.parent.mkdir(parents=True)
    values.write_text(
        'image:\n  name: ghcr.io/dask/dask-kubernetes-operator\n  tag: "set-by-chartpress"\n'
    )
    assert (
        dask_operator_reference(tmp_path)
        == "ghcr.io/dask/dask-kubernetes-operator:set-by-chartpress"
    )


def test_a_third_party_python_from_is_rewritten_to_the_stand_in_and_recorded():
    # dask_kubernetes/operator/deployment/Dockerfile of the 2026.3.0 sdist, abridged.
    text = "FROM python:3.12 as builder\nRUN pip install hatch\nFROM python:3.12\nFROM busybox\n"
    out, rewritten = rewrite_froms(text, "python:3.11-slim-bookworm")
    assert out.splitlines()[0] == "FROM python:3.11-slim-bookworm as builder"
    assert out.splitlines()[2] == "FROM python:3.11-slim-bookworm"
    assert out.splitlines()[3] == "FROM busybox"
    assert rewritten == {"python:3.12": "python:3.11-slim-bookworm"}


def test_the_four_images_read_only_bases_made_here(tmp_path):
    pins = read_pins()
    values = (
        tmp_path / "dask_kubernetes/operator/deployment/helm/dask-kubernetes-operator/values.yaml"
    )
    values.parent.mkdir(parents=True)
    values.write_text("image:\n  name: x/op\n  tag: t\n")
    built = specs(REPO_ROOT, pins, tmp_path, tmp_path / "op.Dockerfile", ("2026.1.0", "2026.1.1"))
    assert [s.name for s in built] == ["operator", "probe", "dask-operator", "dask"]
    for spec in built:
        assert set(spec.bases) <= {pins.python_base_name, pins.busybox_base_name}
        if "PYTHON_VERSION" in spec.build_args:  # our Dockerfiles: the base's Python, by name
            assert spec.build_args["PYTHON_VERSION"] == pins.python_base_version
    dask = built[-1]
    assert dask.reference == "localhost/provingground/dask:2026.1.1"
    assert dask.build_args["DASK_VERSION"] == "2026.1.0"


def test_make_images_without_runc_says_how_to_get_it(tmp_path, capsys):
    for tool in ("buildkitd", "buildctl"):
        (tmp_path / tool).write_text("#!/bin/sh\n")
        (tmp_path / tool).chmod(0o755)
    assert (
        main(
            [
                "--buildkit",
                str(tmp_path),
                "--runc",
                str(tmp_path / "runc"),
                "--out",
                str(tmp_path / "o"),
            ]
        )
        == 1
    )
    err = capsys.readouterr().err.strip().splitlines()
    hint = "`make node` builds the real node's runc"
    assert err == [f"images: {tmp_path / 'runc'} not found or not executable; {hint}"]
    assert not (tmp_path / "o").exists()  # nothing half-written
