"""Folder walks never crash: kustomizations of any shape, tools' JSON configs, FIFOs, --exclude."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from dask_gpu_parity.manifests import FileError, Selection, discover
from tests.unit.helpers import EXAMPLES, ROOT
from tests.unit.reports import cli

TCP = (EXAMPLES / "gpu-cluster-tcp.yaml").read_text()


def _walk(top: str = ".", **selection: bool) -> tuple[list[str], list[FileError]]:
    found = list(discover([top], Selection(**selection)))  # type: ignore[arg-type]
    return (
        [f for f in found if isinstance(f, str)],
        [f for f in found if isinstance(f, FileError)],
    )


def _report(argv: list[str]) -> tuple[int, dict[str, list[dict[str, object]]], str]:
    code, out, err = cli([*argv, "-o", "json"])
    return code, json.loads(out) if out else {}, err


@pytest.fixture
def overlay(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A kustomize overlay: a cluster and a patch file (kustomize's docs: the `patches` field,
    https://kubectl.docs.kubernetes.io/references/kustomize/kustomization/patches/)."""
    (tmp_path / "cluster.yaml").write_text(TCP)
    (tmp_path / "patch.yaml").write_text(TCP)
    (tmp_path / "other.yaml").write_text(TCP)
    monkeypatch.chdir(tmp_path)
    return tmp_path


# Every shape a field can have that kustomize's schema does not allow there.
MALFORMED = [
    ("patches-is-a-number", "patches: 5\n", "patches is 5, not a list"),
    ("patches-is-a-string", "patches: patch.yaml\n", "patches is a string, not a list"),
    ("patches-is-a-mapping", "patches: {path: patch.yaml}\n", "patches is a mapping, not a list"),
    ("patch-is-a-number", "patches: [5]\n", "patches[0] is 5, not a mapping"),
    ("patch-path-is-a-list", "patches: [{path: [a]}]\n", "patches[0].path is a list, not a file"),
    ("patch-path-is-true", "patches: [{path: true}]\n", "patches[0].path is true, not a file"),
    ("merge-item-is-a-mapping", "patchesStrategicMerge: [{a: 1}]\n", "[0] is a mapping, not a"),
    ("merge-is-a-number", "patchesStrategicMerge: 1.5e+3\n", "patchesStrategicMerge is 1500,"),
    ("json6902-is-a-bool", "patchesJson6902: yes\n", "patchesJson6902 is true, not a list"),
    ("huge-number", f"patches: {'9' * 5000}\n", "patches is a string, not a list"),  # as kubectl
    ("big-number", f"patches: {'9' * 30}\n", "patches is 1e+30, not a list"),
    ("a-date", "patches: 2001-13-45\n", "patches is a string, not a list"),  # no date: a string
    ("not-a-mapping", "- patches\n", "it holds no mapping"),
    ("scalar", "just text\n", "it holds no mapping"),
    ("not-yaml", "patches: [\n", "it is not YAML (invalid YAML"),
    ("not-utf-8", b"patches: \xff\n", "it is not UTF-8 text"),
    ("empty", "", "it holds no mapping"),
]


@pytest.mark.parametrize(
    ("content", "notice"), [m[1:] for m in MALFORMED], ids=[m[0] for m in MALFORMED]
)
def test_a_malformed_kustomization_is_one_notice_and_the_walk_goes_on(
    overlay: Path, content: str | bytes, notice: str
) -> None:
    kustomization = overlay / "kustomization.yaml"
    if isinstance(content, bytes):
        kustomization.write_bytes(content)
    else:
        kustomization.write_text(content)
    files, errors = _walk()
    assert {"cluster.yaml", "other.yaml", "patch.yaml"} <= set(files)
    (error,) = errors
    assert (error.file, error.code) == ("kustomization.yaml", "DGP903")
    assert notice in error.detail
    assert "\n" not in error.detail


def test_what_a_kustomization_names_well_is_still_left_out(overlay: Path) -> None:
    (overlay / "kustomization.yaml").write_text(
        "patches:\n  - path: patch.yaml\n  - 7\npatchesStrategicMerge: [other.yaml, [x]]\n"
    )
    files, (error,) = _walk()
    assert "patch.yaml" not in files
    assert "other.yaml" not in files
    assert "cluster.yaml" in files
    assert error.detail.startswith(
        "kustomization read in part: patchesStrategicMerge[1] is a list, not a file name; "
        "patches[1] is 7, not a mapping: "
    )


def test_a_malformed_kustomization_is_an_info_finding_that_fails_nothing(overlay: Path) -> None:
    (overlay / "kustomization.yaml").write_text("patches: 5\n")
    code, report, err = _report(["check", ".", "--fail-on", "warning", "--exit-zero"])
    assert err == ""
    notices = [f for f in report["findings"] if f["code"] == "DGP903"]
    assert [(n["severity"], n["resource"]["file"]) for n in notices] == [  # type: ignore[index]
        ("info", "kustomization.yaml")
    ]
    code, _, err = cli(["fix", "."])
    assert (code, err) == (0, "")


def test_a_kustomization_that_is_a_fifo_does_not_block_the_walk(overlay: Path) -> None:
    os.mkfifo(overlay / "kustomization.yaml")
    files, (error,) = _walk()
    assert "patch.yaml" in files
    assert error.detail.startswith("kustomization read in part: cannot read it (not a regular")


def test_a_gitignore_that_is_a_fifo_does_not_block_the_walk(overlay: Path) -> None:
    """git opens .gitignore without following links; a FIFO has no writer: never wait on it."""
    os.mkfifo(overlay / ".gitignore")
    done = subprocess.run(
        [sys.executable, "-m", "dask_gpu_parity.cli", "check", ".", "-o", "json"],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": f"{ROOT / 'operator'}{os.pathsep}{ROOT}"},
        check=False,
    )
    assert done.returncode == 1, done.stderr
    assert json.loads(done.stdout)["summary"]["files"] == 3


def test_a_symlinked_gitignore_is_not_read_as_git_does(overlay: Path) -> None:
    (overlay / "elsewhere").write_text("other.yaml\n")
    (overlay / ".gitignore").symlink_to(overlay / "elsewhere")
    assert "other.yaml" in _walk()[0]
    (overlay / ".gitignore").unlink()
    (overlay / ".gitignore").write_text("other.yaml\n")
    assert "other.yaml" not in _walk()[0]


# JSON with comments, as tools write their configuration (fixtures after their documentation).
JSONC = {
    # https://code.visualstudio.com/docs/languages/json#_json-with-comments
    ".vscode/settings.json": '{\n  // Format on save\n  "editor.formatOnSave": true,\n}\n',
    # https://www.typescriptlang.org/tsconfig/ (tsconfig.json accepts comments)
    "tsconfig.json": '{\n  "compilerOptions": {\n    /* Emit */\n    "outDir": "dist"\n  }\n}\n',
    # https://containers.dev/implementors/json_reference/ (devcontainer.json is JSONC)
    ".devcontainer/devcontainer.json": (
        '// For format details, see https://aka.ms/devcontainer.json\n{\n  "name": "Python 3",\n'
        '  "image": "mcr.microsoft.com/devcontainers/python:3.12",\n}\n'
    ),
}


@pytest.fixture
def repo_with_configs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "cluster.yaml").write_text(TCP)
    (tmp_path / ".git").mkdir()
    for name, text in JSONC.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_tools_jsonc_configs_in_a_walk_are_skipped_with_a_notice(repo_with_configs: Path) -> None:
    code, report, err = _report(["check", "."])
    assert err == ""
    by_code: dict[str, list[str]] = {}
    for finding in report["findings"]:
        by_code.setdefault(str(finding["code"]), []).append(finding["resource"]["file"])  # type: ignore[index]
    assert sorted(by_code["DGP902"]) == sorted(JSONC)
    assert "DGP901" not in by_code
    assert set(by_code) - {"DGP902"}  # the cluster is still checked
    assert code == 1  # by the cluster's errors, not by the configs
    code, _, err = cli(["check", ".", "--exclude", "cluster.yaml"])
    assert (code, err) == (0, "")
    code, _, err = cli(["fix", "."])
    assert (code, err) == (0, "")


def test_a_jsonc_file_named_on_the_command_line_is_still_an_error(repo_with_configs: Path) -> None:
    code, out, _ = cli(["check", "tsconfig.json"])
    assert code == 1
    assert "tsconfig.json:4: error DGP901 invalid YAML" in out


def test_a_broken_json_manifest_in_a_walk_stays_an_error(repo_with_configs: Path) -> None:
    """A typo in a JSON manifest (it names its apiVersion) must not pass as a tool's config."""
    (repo_with_configs / "cluster.json").write_text(
        '{"apiVersion": "kubernetes.dask.org/v1", "kind": "DaskCluster",\n "metadata": {}}}\n'
    )
    _, report, _ = _report(["check", "."])
    codes = {(f["resource"]["file"], f["code"]) for f in report["findings"]}  # type: ignore[index]
    assert ("cluster.json", "DGP901") in codes


def test_a_broken_yaml_file_in_a_walk_stays_an_error(repo_with_configs: Path) -> None:
    (repo_with_configs / "broken.yaml").write_text("a: [\n")
    _, report, _ = _report(["check", "."])
    codes = {(f["resource"]["file"], f["code"]) for f in report["findings"]}  # type: ignore[index]
    assert ("broken.yaml", "DGP901") in codes


# --exclude patterns that could match nothing (git would ignore them in a .gitignore).
BAD_EXCLUDES = [
    ("[z-a]", "the range z-a is reversed: write it low to high"),
    ("\\", "it ends in a lone backslash: write \\\\ for a backslash"),
    ("!", "it names no file"),
    ("/", "it names no file"),
    ("[", "the [ at position 1 is never closed"),
    ("a[!]", "the [ at position 2 is never closed"),
    ("[[:bogus:]]", "[:bogus:] is no character class"),
    ("#notes", "a pattern that begins with # is a comment: write \\# for a literal #"),
    ("  ", "it is blank"),
]


@pytest.mark.parametrize(("pattern", "problem"), BAD_EXCLUDES, ids=[b[0] for b in BAD_EXCLUDES])
@pytest.mark.parametrize("command", ["check", "fix"])
def test_an_exclude_pattern_that_cannot_match_is_a_usage_error(
    overlay: Path, command: str, pattern: str, problem: str
) -> None:
    code, out, err = cli([command, ".", "--exclude", pattern])
    assert code == 2
    assert out == ""
    assert err == f'error: --exclude "{pattern}" cannot be used: {problem}\n'


@pytest.mark.parametrize("pattern", ["[]]", "[!]a]", "\\#x", "\\!x", "**", "[[:alpha:]]*"])
def test_unusual_but_valid_exclude_patterns_are_accepted(overlay: Path, pattern: str) -> None:
    code, _, err = cli(["check", ".", "--exclude", pattern])
    assert code in (0, 1)
    assert err == ""


def test_a_named_file_inside_an_ignored_folder_is_left_out_with_force_exclude(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / ".git").mkdir()
    (tmp_path / "deep/er").mkdir(parents=True)
    (tmp_path / "deep/er/c.yaml").write_text(TCP)
    (tmp_path / ".gitignore").write_text("deep/\n")
    monkeypatch.chdir(tmp_path)
    found = list(discover(["deep/er/c.yaml"], Selection(force_exclude=True)))
    assert found == []
    assert list(discover(["deep/er/c.yaml"], Selection())) == ["deep/er/c.yaml"]
    selection = Selection(force_exclude=True, exclude=("er/",), respect_gitignore=False)
    assert list(discover(["deep/er/c.yaml"], selection)) == []  # "er/" matches at any depth
