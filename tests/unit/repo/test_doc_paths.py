"""Every repository file that the docs and the package's docstrings name exists.

Scanned: ``README.md``, ``docs/*.md``, and the module, class and function docstrings under
``operator/dask_gpu_parity/``. A path is a token with a known file extension, or a name ending
in ``/`` (a folder). It resolves when it names a file or folder of the repository from the root,
from the text's own folder (Markdown links such as ``../action.yml``), or as the tail of a longer
path (``core/plain.py`` is ``operator/dask_gpu_parity/core/plain.py``, ``handlers.py`` a module
somewhere in the tree). Left out, as no repository path: absolute paths (``/tmp/x.yaml``),
``~/`` and ``$VAR/`` paths, URLs, and tokens whose first part is a domain or a Kubernetes resource
prefix (``ghcr.io/...``, ``nvidia.com/gpu``). The rest that are not the repository's are listed,
each with its reason, in ``NOT_OURS``.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from functools import cache
from pathlib import Path

import pytest

from dask_gpu_parity.manifests.discover import DEFAULT_EXCLUDES

ROOT = Path(__file__).resolve().parents[3]
PACKAGE = ROOT / "operator" / "dask_gpu_parity"
EXTENSIONS = "py|md|yaml|yml|json|toml|mk|sh|txt|env|cfg|ini|tpl"
# Not after a word, a dot, a slash (absolute paths, URLs), ~ or $ (home and variables), @ or -.
PATH = re.compile(rf"(?<![\w./:@~$-])((?:[\w.-]+/)*[\w.-]+(?:\.(?:{EXTENSIONS})|/))(?![\w/-]|\.\w)")
DOMAIN = re.compile(r"^[a-z0-9-]+(\.[a-z0-9-]+)+/")  # ghcr.io/, nvidia.com/, kopf.zalando.org/
SKIPPED_FOLDERS = {".git", ".venv", "node_modules", "__pycache__", ".mypy_cache", ".pytest_cache"}
# Git-ignored build outputs: whether they exist depends on what was built, not on the repository.
BUILD_OUTPUTS = {".images", ".gpunode", ".run", ".cache", "build", "dist"}

# Paths the texts name that are not files of this repository, and why.
NOT_OURS = {
    # A user's repository, in the CI, pre-commit and `fix` examples, and what discovery skips.
    ".github/workflows/dask-gpu-parity.yml",
    ".gitlab-ci.yml",
    ".pre-commit-config.yaml",
    ".generated.yaml",  # from the pattern '*.generated.yaml'
    ".devcontainer/devcontainer.json",
    ".vscode/settings.json",
    "devcontainer.json",
    "tsconfig.json",
    "kustomization.yaml",
    # Kyverno's PolicyReport CRD, in Kyverno's release (the proving ground takes it from there).
    "wgpolicyk8s.io_policyreports.yaml",
    "overlay/kustomization.yaml",
    "overlays/prod/kustomization.yaml",
    "CHART/rendered.yaml",
    "chart/rendered.yaml",
    "fixed.yaml",
    "gl-code-quality-report.json",
    "legacy/",
    "deploy/",
    # Folders discovery skips (version control, environments, caches): never the repository's.
    *DEFAULT_EXCLUDES,
    # The files of the measurements in docs/ci.md (a link out of a folder, a FIFO).
    "../outside/o.py",
    "fifo.py",
    # Other projects' files, cited: kubeconform's converter, RAPIDS' image matrix, a package name.
    "openapi2jsonschema.py",
    "matrix.yaml",
    "ruamel.yaml",
    # Made at run time: the proving-ground cache (docs/proving-ground.md) and the GPU node's
    # outputs (docs/verification.md, benchmarks/gpu/node/README.md).
    "kwok-stages.yaml",
    "scheduler-pass.yaml",
    "scheduler-fail.yaml",
    "daskcluster-pass.yaml",
    "daskcluster-fail.yaml",
    # Made by the release workflow, attached to a GitHub release (docs/releasing.md).
    ".spdx.json",
    "dask-gpu-parity-VERSION-linux-ARCH.spdx.json",
    "dask-gpu-parity-probe-VERSION-linux-ARCH.spdx.json",
    # Build and run outputs (git-ignored): make images' archives, the proving ground's run folders.
    ".run/",
    ".images/",
    ".images/images.json",
    ".images/logs/",
    "images.json",
    # The project's research notes with their sources, kept beside the repository, not in it.
    "reference/dask-kubernetes.md",
    "reference/nvidia.md",
    "reference/scale-baseline.md",
}


def _texts() -> Iterator[tuple[Path, str]]:
    """(file, text) for each document and each docstring of the package."""
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        yield doc, doc.read_text(encoding="utf-8")
    for module in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(module.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
                docstring = ast.get_docstring(node)
                if docstring:
                    yield module, docstring


def named_paths(text: str) -> list[str]:
    """The repository paths ``text`` may name (see the module docstring for what is left out)."""
    return [p for p in PATH.findall(text) if not DOMAIN.match(p)]


@cache
def _tree() -> frozenset[str]:
    """Every file and folder of the repository, relative to its root (folders end in ``/``)."""
    found: set[str] = set()
    stack = [ROOT]
    while stack:
        folder = stack.pop()
        for entry in folder.iterdir():
            name = entry.relative_to(ROOT).as_posix()
            if entry.is_dir() and not entry.is_symlink():
                if entry.name not in SKIPPED_FOLDERS | BUILD_OUTPUTS:
                    found.add(name + "/")
                    stack.append(entry)
            else:
                found.add(name)
    return frozenset(found)


def resolves(path: str, where: Path) -> bool:
    """Whether ``path``, named in a text of the file ``where``, is a file or folder of ours."""
    if path.startswith(("./", "../")):  # a Markdown link, relative to the text's folder
        target = (where.parent / path).resolve()
        return target.is_relative_to(ROOT) and target.exists()
    tree = _tree()
    return path in tree or any(entry.endswith("/" + path) for entry in tree)


def test_every_named_path_exists() -> None:
    missing = sorted(
        {
            f"{where.relative_to(ROOT)} names {path}, which is not in the repository"
            for where, text in _texts()
            for path in named_paths(text)
            if path not in NOT_OURS and not resolves(path, where)
        }
    )
    assert not missing, "\n".join(missing)


def test_every_exception_is_still_named() -> None:
    named = {path for _, text in _texts() for path in named_paths(text)}
    assert sorted(NOT_OURS - named) == []


@pytest.mark.parametrize(
    ("text", "paths"),
    [
        pytest.param("see `core/plain.py` and ``admission/``.", ["core/plain.py", "admission/"]),
        pytest.param(
            "[action](../action.yml), `benchmarks/x.py`", ["../action.yml", "benchmarks/x.py"]
        ),
        pytest.param("kubectl apply -f /tmp/dgp/x.yaml; ~/.kube/config.yaml", [], id="absolute"),
        pytest.param("$DGP_CACHE/bin/v1.36.3/ and $PWD/charts/", [], id="variables"),
        pytest.param(
            "https://github.com/o/r/blob/main/a.py nvidia.com/gpu ghcr.io/x/", [], id="urls"
        ),
        pytest.param("the go-yaml fork `go.yaml.in/yaml/v2`", [], id="module-path"),
    ],
)
def test_what_counts_as_a_named_path(text: str, paths: list[str]) -> None:
    assert named_paths(text) == paths


@pytest.mark.parametrize(
    ("path", "ours"),
    [
        ("core/plain.py", True),
        ("operator/dask_gpu_parity/probe.py", True),
        ("handlers.py", True),
        ("rules/", True),
        ("../action.yml", True),
        ("core/gone.py", False),
        ("admission.py", False),
        ("../../outside.md", False),
    ],
)
def test_a_path_resolves_only_to_what_exists(path: str, ours: bool) -> None:
    assert resolves(path, ROOT / "docs" / "ci.md") is ours
