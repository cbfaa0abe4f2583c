"""The Dockerfile, without a Docker engine: its shape, and its RUN steps replayed in a venv.

The replay copies the build context as .dockerignore lets it through, then runs the
Dockerfile's own RUN commands (read from the file, paths moved into a temporary folder), so a
change to the Dockerfile is what gets tested. It needs PyPI (the operator's dependencies).
"""

from __future__ import annotations

import fnmatch
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

from dask_gpu_parity import probe as probe_module
from dask_gpu_parity.core.verifier import copy_container
from dask_gpu_parity.names import PROBE_IN_IMAGE

from .helpers import REPO

DOCKERFILE = REPO / "Dockerfile"


def _instructions() -> list[list[tuple[str, str]]]:
    """(instruction, arguments) per stage, continuation lines joined, comments dropped.

    Global ARGs (before the first FROM) are left out; their defaults are substituted in FROM.
    """
    stages: list[list[tuple[str, str]]] = []
    global_args: dict[str, str] = {}
    logical = ""
    for raw in DOCKERFILE.read_text().splitlines():
        if raw.lstrip().startswith("#") and not logical:
            continue
        logical += raw.rstrip("\\").strip() + " " if raw.endswith("\\") else raw.strip()
        if raw.endswith("\\") or not logical:
            continue
        word, _, rest = logical.partition(" ")
        if word.upper() == "ARG" and not stages:
            key, _, default = rest.strip().partition("=")
            global_args[key] = default
            logical = ""
            continue
        if word.upper() == "FROM":
            stages.append([])
            for key, default in global_args.items():
                rest = rest.replace("${" + key + "}", default)
        stages[-1].append((word.upper(), rest.strip()))
        logical = ""
    return stages


def test_dockerfile_shape():
    build, _, final = _instructions()
    assert build[0] == ("FROM", "python:3.12-slim-bookworm AS build")
    assert final[0] == ("FROM", "python:3.12-slim-bookworm")
    run = " ".join(args for word, args in final if word == "RUN")
    assert "--only-binary=:all:" in run  # nothing compiled in the final stage
    assert "[in-cluster]" in run  # the operator in a Pod: no Kubernetes client (kube.py)
    assert not re.search(r"apt-get|apk |gcc|build-essential|COPY \. ", run)
    assert not [args for word, args in final if word == "COPY"]  # only the wheel, bind-mounted
    (user,) = [args for word, args in final if word == "USER"]
    uid, _, gid = user.partition(":")
    assert uid.isdigit()
    assert int(uid) >= 10000
    assert gid.isdigit()
    assert final[-2] == ("ENTRYPOINT", '["dask-gpu-parity"]')  # the CLI: `IMAGE check -` works
    assert final[-1][0] == "CMD"
    assert final[-1][1].startswith('["run", ')
    assert [w for w, _ in final].index("USER") < [w for w, _ in final].index("ENTRYPOINT")


def test_probe_target_is_probe_py_as_the_verifier_copies_it():
    """The probe image: the package's probe.py where the copy step reads it, nothing to run."""
    _, probe, _ = _instructions()
    assert probe[0] == ("FROM", "busybox:1.37.0 AS probe")  # a pinned tag: `cp` and nothing else
    assert not [args for word, args in probe if word == "RUN"]
    (copy,) = [args for word, args in probe if word == "COPY"]
    source, target = copy.split()[-2:]
    assert "--chmod=0644" in copy  # readable by any user the scheduler pod runs as
    assert (REPO / source).resolve() == Path(probe_module.__file__).resolve()
    assert target == PROBE_IN_IMAGE
    container = copy_container("x")
    (user,) = [args for word, args in probe if word == "USER"]
    assert user == f"{container['securityContext']['runAsUser']}:65532"
    (cmd,) = [args for word, args in probe if word == "CMD"]
    assert json.loads(cmd) == container["command"]
    assert ("ENV", "NVIDIA_VISIBLE_DEVICES=void") in probe


def _ignored(rel: str, patterns: list[str]) -> bool:
    """Docker's .dockerignore rule: the last pattern matching the path (or a parent) wins."""
    parts = rel.split("/")
    excluded = False
    for raw in patterns:
        negate = raw.startswith("!")
        pattern = raw.lstrip("!").rstrip("/")
        regex = re.escape(pattern).replace(r"\*\*/", "(.*/)?").replace(r"\*", "[^/]*")
        regex = regex.replace(r"\?", "[^/]").replace(r"\[", "[").replace(r"\]", "]")
        prefixes = ["/".join(parts[: i + 1]) for i in range(len(parts))]
        if any(re.fullmatch(regex, p) for p in prefixes):
            excluded = not negate
    return excluded


def _build_context(dest: Path) -> list[str]:
    patterns = [
        line.strip()
        for line in (REPO / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    reincluded = [p.lstrip("!").rstrip("/") for p in patterns if p.startswith("!")]
    copied = []
    for root, dirs, files in os.walk(REPO):
        rel_root = Path(root).relative_to(REPO).as_posix()
        rel_root = "" if rel_root == "." else rel_root + "/"
        dirs[:] = [
            d
            for d in dirs
            if not _ignored(rel_root + d, patterns)
            or any(fnmatch.fnmatch(r, f"{rel_root}{d}/*") for r in reincluded)
        ]
        for name in files:
            rel = rel_root + name
            if not _ignored(rel, patterns):
                (dest / rel).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(REPO / rel, dest / rel)
                copied.append(rel)
    return copied


def test_dockerignore_lets_in_only_the_package():
    patterns = [
        line.strip()
        for line in (REPO / ".dockerignore").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    for path in ("pyproject.toml", "README.md", "LICENSE"):  # pyproject.toml names the last two
        assert not _ignored(path, patterns), path
    assert not _ignored("operator/dask_gpu_parity/cli/__init__.py", patterns)
    assert not _ignored("operator/dask_gpu_parity/core/data/dask_crds.json", patterns)
    for path in (
        ".venv/bin/python",
        "tests/unit/cli/test_cli.py",
        "charts/dask-gpu-parity/values.yaml",
        ".git/HEAD",
        "operator/dask_gpu_parity/__pycache__/cli.cpython-311.pyc",
        "operator/dask_gpu_parity.egg-info/PKG-INFO",
    ):
        assert _ignored(path, patterns), path


def _env(stage: list[tuple[str, str]], venv: Path, shims: Path) -> dict[str, str]:
    env = dict(os.environ)
    for word, args in stage:
        if word == "ENV":
            for pair in shlex.split(args):
                key, _, value = pair.partition("=")
                env[key] = value
    env.pop("PIP_NO_CACHE_DIR", None)  # the one difference: reuse the pip cache between runs
    env["VIRTUAL_ENV"] = str(venv)
    env["PATH"] = f"{venv / 'bin'}:{shims}:{os.environ['PATH']}"
    return env


def test_install_steps_work_in_a_fresh_venv(tmp_path):
    """Stage 1 builds the wheel, the final stage installs it with [in-cluster] and runs it."""
    src, dist, venv, shims = (tmp_path / n for n in ("src", "dist", "venv", "shims"))
    src.mkdir()
    shims.mkdir()
    (shims / "python").symlink_to(sys.executable)  # `python` as in the image
    copied = _build_context(src)
    assert "pyproject.toml" in copied
    assert "operator/dask_gpu_parity/cli/__init__.py" in copied
    assert not [c for c in copied if c.startswith(("tests/", "charts/", ".venv/"))]
    build, _, final = _instructions()
    for stage, cwd in ((build, src), (final, tmp_path)):
        for word, args in stage:
            if word != "RUN":
                continue
            command = re.sub(r"--mount=\S+\s+", "", args).replace("/dist", str(dist))
            proc = subprocess.run(
                ["sh", "-ec", command],
                cwd=cwd,
                env=_env(stage, venv, shims),
                capture_output=True,
                text=True,
                timeout=900,
                check=False,
            )
            assert proc.returncode == 0, (
                f"RUN {command}\n{proc.stdout[-3000:]}{proc.stderr[-3000:]}"
            )
    (wheel,) = dist.glob("dask_gpu_parity-*.whl")
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    assert wheel.name == f"dask_gpu_parity-{version}-py3-none-any.whl"
    run = [str(venv / "bin" / "dask-gpu-parity"), "--version"]
    out = subprocess.run(run, capture_output=True, text=True, timeout=60, check=True).stdout
    assert out.strip() == f"dask-gpu-parity {version}"
    # The in-cluster extra is there: kopf and the operator module import; the Kubernetes client
    # is not (kopf imports it when installed: 19 MiB of every replica); pip is gone.
    probe = (
        "import importlib.util, kopf, prometheus_client\n"
        "import dask_gpu_parity.admission.runtime.handlers\n"
        "assert importlib.util.find_spec('kubernetes') is None"
    )
    subprocess.run([str(venv / "bin" / "python"), "-c", probe], timeout=120, check=True)
    assert not (venv / "bin" / "pip").exists()
