"""What ``make images`` builds, and the ``buildctl`` command line of each image.

Pure: the images' specifications (Dockerfile, context, target, build arguments, which stand-in
base each ``FROM`` gets) and the BuildKit options that follow from them. ``__main__`` runs them.

BuildKit options used (moby/buildkit v0.34):
* ``--frontend dockerfile.v0 --opt cmdline=dockerfile.v0``: the built-in Dockerfile frontend.
  It reads the ``# syntax=`` line only when no ``cmdline`` option is set (the option a forwarded
  frontend receives: frontend/dockerfile/builder/build.go); ``dockerfile.v0`` is the value
  ``BUILDKIT_SYNTAX=dockerfile.v0`` documents as "use the built-in frontend" (frontend/dockerfile/
  docs/reference.md). Without it the ``docker/dockerfile:1`` image would be pulled. (The
  ``gateway.v0`` + ``source=dockerfile.v0`` form works only for a top-level solve, not for
  buildctl's, which goes through a gateway client and would pull ``dockerfile.v0`` as an image.)
* ``--oci-layout STORE=DIR`` with ``--opt context:NAME=oci-layout://STORE@DIGEST``: a ``FROM NAME``
  is read from the OCI layout folder DIR, pinned by manifest digest (frontend/dockerui/
  namedcontext.go), instead of from a registry.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from provingground.images.bases import Base
from provingground.images.pins import Pins

__all__ = [
    "Spec",
    "buildctl_args",
    "chart_references",
    "dask_operator_reference",
    "named_contexts",
    "specs",
]

DASK_OPERATOR_DOCKERFILE = "dask_kubernetes/operator/deployment/Dockerfile"
DASK_OPERATOR_CHART = "dask_kubernetes/operator/deployment/helm/dask-kubernetes-operator"
_FROM = re.compile(r"^(FROM\s+)(\S+)", re.IGNORECASE | re.MULTILINE)


@dataclass(frozen=True)
class Spec:
    """One image to build.

    Attributes:
        name: The catalog's name of the image.
        reference: The reference the archive is imported as.
        context: The build context folder.
        dockerfile: The Dockerfile.
        target: The Dockerfile stage (``""``: the last one).
        build_args: Build arguments.
        bases: The ``FROM`` names this build reads from stand-in bases.
    """

    name: str
    reference: str
    context: Path
    dockerfile: Path
    target: str = ""
    build_args: Mapping[str, str] = field(default_factory=dict)
    bases: tuple[str, ...] = ()


def _load_yaml(path: Path) -> dict[str, Any]:
    data = yaml.safe_load(path.read_text())
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected a mapping")
    return data


def chart_references(chart: Path) -> tuple[str, str]:
    """The operator's and the probe's image references the chart uses by default.

    The repositories of ``values.yaml`` (``image``, ``probeImage``), tagged with the chart's
    ``appVersion`` (the chart's default tag).
    """
    app_version = str(_load_yaml(chart / "Chart.yaml")["appVersion"])
    values = _load_yaml(chart / "values.yaml")
    refs = []
    for key in ("image", "probeImage"):
        image = values[key]
        refs.append(f"{image['repository']}:{image.get('tag') or app_version}")
    return refs[0], refs[1]


def dask_operator_reference(sdist: Path) -> str:
    """The dask operator's image reference its chart uses by default (``image.name:image.tag``)."""
    image = _load_yaml(sdist / DASK_OPERATOR_CHART / "values.yaml")["image"]
    return f"{image['name']}:{image['tag']}"


def rewrite_froms(dockerfile: str, python_base: str) -> tuple[str, dict[str, str]]:
    """Point every ``FROM python:...`` of a third-party Dockerfile at the stand-in Python base.

    Returns:
        The rewritten Dockerfile and what was rewritten (``old name: new name``), for the record.
    """
    rewritten: dict[str, str] = {}

    def repl(match: re.Match[str]) -> str:
        name = match.group(2)
        if not name.startswith("python:") or name == python_base:
            return match.group(0)
        rewritten[name] = python_base
        return match.group(1) + python_base

    return _FROM.sub(repl, dockerfile), rewritten


def specs(
    repo: Path, pins: Pins, sdist: Path, dask_operator_dockerfile: Path, dask: tuple[str, str]
) -> list[Spec]:
    """The four images ``make images`` builds.

    Args:
        repo: The repository's top level.
        pins: The pinned inputs.
        sdist: The unpacked dask-kubernetes sdist (the dask operator's build context).
        dask_operator_dockerfile: Its Dockerfile, with FROM pointed at the stand-in base.
        dask: The dask and distributed versions of the development environment.
    """
    operator_ref, probe_ref = chart_references(repo / "charts" / "dask-gpu-parity")
    python = {"PYTHON_VERSION": pins.python_base_version}
    dockerfile = repo / "Dockerfile"
    return [
        Spec("operator", operator_ref, repo, dockerfile, "", python, (pins.python_base_name,)),
        Spec("probe", probe_ref, repo, dockerfile, "probe", python, (pins.busybox_base_name,)),
        Spec(
            "dask-operator",
            dask_operator_reference(sdist),
            sdist,
            dask_operator_dockerfile,
            bases=(pins.python_base_name,),
        ),
        Spec(
            "dask",
            f"localhost/provingground/dask:{dask[1]}",
            repo / "provingground" / "images",
            repo / "provingground" / "images" / "dask.Dockerfile",
            "",
            {**python, "DASK_VERSION": dask[0], "DISTRIBUTED_VERSION": dask[1]},
            (pins.python_base_name,),
        ),
    ]


def _store(name: str) -> str:
    """An OCI layout store ID for a base name: a valid reference name (``busybox-1-37-0``)."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")


def named_contexts(wanted: tuple[str, ...], bases: Mapping[str, Base]) -> list[str]:
    """The buildctl options that make each ``FROM`` name in ``wanted`` read its stand-in base.

    Raises:
        KeyError: A wanted name has no base.
    """
    args: list[str] = []
    for name in sorted(set(wanted)):
        base = bases[name]
        store = _store(name)
        args += ["--oci-layout", f"{store}={base.layout}"]
        args += ["--opt", f"context:{name}=oci-layout://{store}@{base.digest}"]
    return args


def buildctl_args(spec: Spec, bases: Mapping[str, Base], out: Path) -> list[str]:
    """The arguments after ``buildctl --addr ADDR`` that build ``spec`` into the archive ``out``."""
    args = [
        "build",
        "--progress=plain",
        "--frontend=dockerfile.v0",
        "--opt=cmdline=dockerfile.v0",
        f"--local=context={spec.context}",
        f"--local=dockerfile={spec.dockerfile.parent}",
        f"--opt=filename={spec.dockerfile.name}",
    ]
    if spec.target:
        args.append(f"--opt=target={spec.target}")
    args += [f"--opt=build-arg:{k}={v}" for k, v in sorted(spec.build_args.items())]
    args += named_contexts(spec.bases, bases)
    args.append(f"--output=type=oci,dest={out},name={spec.reference}")
    return args
