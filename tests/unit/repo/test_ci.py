"""The CI integrations users copy, exercised for real: pre-commit, the GitHub Action, GitLab CI.

Each runs in a temporary Git repository laid out like a real one: a Helm chart, a kustomize
base and overlay (with patches), plain Dask manifests. pre-commit is pre-commit itself,
installing this repository's hooks into their own environment (pip, from a local clone; the
package's dependencies come from the package index or pip's cache).
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from dask_gpu_parity.cli import main
from tests.unit.helpers import EXAMPLES, ROOT
from tests.unit.reports import assert_gitlab, assert_junit, assert_sarif, cli

BIN = Path(sys.executable).parent
CI_DOCS = ROOT / "docs" / "ci"
GIT = [
    "git",
    "-c",
    "user.name=ci",
    "-c",
    "user.email=ci@example.invalid",
    "-c",
    "init.defaultBranch=main",
]


def _git(repo: Path, *args: str) -> None:
    subprocess.run([*GIT, *args], cwd=repo, check=True, capture_output=True, timeout=60)


def _fixed(example: str) -> str:
    out = io.StringIO()
    assert main(["fix", str(EXAMPLES / example)], out=out, err=io.StringIO()) == 0
    return out.getvalue()


CHART_TEMPLATE = """\
apiVersion: kubernetes.dask.org/v1
kind: DaskCluster
metadata:
  name: {{ include "app.fullname" . }}
spec:
  worker:
    replicas: {{ .Values.workers }}
    spec:
      containers:
        - name: worker
          image: {{ .Values.image | quote }}
          {{- with .Values.resources }}
          resources: {{- toYaml . | nindent 12 }}
          {{- end }}
"""
OVERLAY_PATCH = """\
apiVersion: kubernetes.dask.org/v1
kind: DaskCluster
metadata:
  name: rapids-tcp
spec:
  worker:
    replicas: 8
"""
OVERLAY_OPS = """\
- op: replace
  path: /spec/worker/replicas
  value: 16
"""


def make_repo(repo: Path) -> Path:
    """A Git repository with a chart, a kustomize overlay and clean Dask manifests."""
    files = {
        "charts/app/Chart.yaml": "apiVersion: v2\nname: app\nversion: 0.1.0\n",
        "charts/app/values.yaml": "workers: 2\nimage: rapidsai/base:26.10\nresources: {}\n",
        "charts/app/templates/daskcluster.yaml": CHART_TEMPLATE,
        "deploy/base/kustomization.yaml": "resources:\n  - cluster.yaml\n",
        "deploy/base/cluster.yaml": _fixed("gpu-cluster-tcp.yaml"),
        "deploy/overlays/prod/kustomization.yaml": (
            "resources:\n  - ../../base\npatches:\n  - path: replicas.yaml\n"
            "  - path: replicas-ops.yaml\n    target: {kind: DaskCluster}\n"
        ),
        "deploy/overlays/prod/replicas.yaml": OVERLAY_PATCH,
        "deploy/overlays/prod/replicas-ops.yaml": OVERLAY_OPS,
        "manifests/cpu-cluster.yaml": (EXAMPLES / "cpu-cluster.yaml").read_text(),
        "manifests/gpu-job.yaml": _fixed("gpu-daskjob.yaml"),
        "manifests/settings.json": '{"not": "a manifest"}\n',
    }
    for name, text in files.items():
        path = repo / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    return repo


def add_unfixed_cluster(repo: Path) -> Path:
    path = repo / "manifests" / "gpu-cluster.yaml"
    shutil.copy(EXAMPLES / "gpu-cluster-tcp.yaml", path)
    _git(repo, "add", "-A")
    return path


# --- pre-commit ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def hook_repo(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """A clone of this repository's package and hooks, committed: what `repo:` points at."""
    clone = tmp_path_factory.mktemp("hook-repo")
    for name in ("pyproject.toml", "README.md", "LICENSE", ".pre-commit-hooks.yaml"):
        shutil.copy(ROOT / name, clone / name)
    shutil.copytree(
        ROOT / "operator",
        clone / "operator",
        ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"),
    )
    _git(clone, "init", "-q")
    _git(clone, "add", "-A")
    _git(clone, "commit", "-q", "-m", "hooks")
    rev = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=clone, capture_output=True, text=True, check=True
    ).stdout.strip()
    return clone, rev


def _pre_commit(repo: Path, home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GIT_", "PRE_COMMIT"))}
    env["PRE_COMMIT_HOME"] = str(home)
    return subprocess.run(
        [str(BIN / "pre-commit"), "run", *args, "--all-files", "--color=never"],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )


def test_pre_commit_hooks(tmp_path: Path, hook_repo: tuple[Path, str]) -> None:
    clone, rev = hook_repo
    repo = make_repo(tmp_path / "repo")
    config = (CI_DOCS / "pre-commit-config.yaml").read_text()
    config = config.replace("https://github.com/dask-gpu-parity/dask-gpu-parity", str(clone))
    (repo / ".pre-commit-config.yaml").write_text(config.replace("rev: v0.1.0", f"rev: {rev}"))
    _git(repo, "add", "-A")
    home = tmp_path / "pre-commit-home"

    clean = _pre_commit(repo, home)
    assert clean.returncode == 0, clean.stdout + clean.stderr
    assert re.search(r"dask-gpu-parity check\.+Passed", clean.stdout)
    assert re.search(r"dask-gpu-parity fix\.+Passed", clean.stdout)

    unfixed = add_unfixed_cluster(repo)
    before = unfixed.read_text()
    failed = _pre_commit(repo, home, "dask-gpu-parity")
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert "manifests/gpu-cluster.yaml:21: error DGP001 DaskCluster rapids-tcp" in failed.stdout
    assert "templates" not in failed.stdout  # Helm templates and kustomize patches: skipped
    assert "replicas" not in failed.stdout
    assert unfixed.read_text() == before  # check never writes

    fixed = _pre_commit(repo, home, "dask-gpu-parity-fix")
    assert fixed.returncode == 1  # pre-commit fails a hook that changed files
    assert "files were modified by this hook" in fixed.stdout
    assert "fixed manifests/gpu-cluster.yaml" in fixed.stdout
    assert unfixed.read_text() != before
    _git(repo, "add", "-A")
    again = _pre_commit(repo, home)
    assert again.returncode == 0, again.stdout + again.stderr


def test_hooks_file_matches_the_cli() -> None:
    hooks = yaml.safe_load((ROOT / ".pre-commit-hooks.yaml").read_text())
    assert [h["id"] for h in hooks] == ["dask-gpu-parity", "dask-gpu-parity-fix"]
    for hook in hooks:
        assert hook["entry"].startswith("dask-gpu-parity ")
        assert "--force-exclude" in hook["entry"]  # pre-commit names every file
        assert hook["language"] == "python"


# --- GitHub Action ---------------------------------------------------------------------------

_EXPRESSION = re.compile(r"\$\{\{\s*([^}]+?)\s*\}\}")


def _action() -> dict[str, Any]:
    action: dict[str, Any] = yaml.safe_load((ROOT / "action.yml").read_text())
    return action


def _run_check_step(repo: Path, given: dict[str, str], tmp_path: Path) -> dict[str, str]:
    """The action's check step as a runner runs it: its env resolved, bash -eo pipefail."""
    action = _action()
    inputs = {k: str(v.get("default", "")) for k, v in action["inputs"].items()} | given
    (step,) = [s for s in action["runs"]["steps"] if s.get("id") == "check"]
    env = {k: v for k, v in os.environ.items() if not k.startswith("INPUT_")}
    for name, value in step["env"].items():
        env[name] = _EXPRESSION.sub(lambda m: inputs[m.group(1).removeprefix("inputs.")], value)
    outputs = tmp_path / "github-output"
    outputs.write_text("")
    env |= {"GITHUB_OUTPUT": str(outputs), "PATH": f"{BIN}{os.pathsep}{env['PATH']}"}
    script = tmp_path / "check-step.sh"
    script.write_text(step["run"])
    proc = subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", str(script)],
        cwd=repo,
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr  # the step never fails: the last step does
    return dict(line.split("=", 1) for line in outputs.read_text().splitlines())


def test_action_check_step(tmp_path: Path) -> None:
    workflow = yaml.safe_load((CI_DOCS / "github-workflow.yml").read_text())
    (uses,) = [s for s in workflow["jobs"]["parity"]["steps"] if "dask-gpu-parity/" in s["uses"]]
    given = {k: str(v) for k, v in uses["with"].items()}
    repo = make_repo(tmp_path / "repo")
    outputs = _run_check_step(repo, given, tmp_path)
    assert outputs == {"exit-code": "0", "sarif-file": "dask-gpu-parity.sarif"}
    assert assert_sarif((repo / "dask-gpu-parity.sarif").read_text(), repo) == []

    add_unfixed_cluster(repo)
    outputs = _run_check_step(repo, given, tmp_path)
    assert outputs["exit-code"] == "1"
    results = assert_sarif((repo / outputs["sarif-file"]).read_text(), repo)
    assert {r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] for r in results} == {
        "manifests/gpu-cluster.yaml"
    }

    outputs = _run_check_step(repo, {**given, "args": "--no-such-flag"}, tmp_path)
    assert outputs == {"exit-code": "2"}  # no report to upload
    assert not (repo / "dask-gpu-parity.sarif").exists()


def test_action_inputs_are_documented_and_used() -> None:
    action = _action()
    text = (ROOT / "action.yml").read_text()
    used = set(re.findall(r"\binputs\.([A-Za-z0-9_-]+)", text))
    assert used == set(action["inputs"])
    docs = (ROOT / "docs" / "ci.md").read_text()
    for name, spec in action["inputs"].items():
        assert spec["description"]
        assert f"`{name}`" in docs, name
    workflow = yaml.safe_load((CI_DOCS / "github-workflow.yml").read_text())
    for step in workflow["jobs"]["parity"]["steps"]:
        if "dask-gpu-parity/" in step["uses"]:
            assert set(step["with"]) <= set(action["inputs"])
    assert workflow["permissions"]["security-events"] == "write"


# --- GitLab CI -------------------------------------------------------------------------------


def _gitlab_job(repo: Path) -> tuple[int, list[str]]:
    """The job's script lines as a runner runs them (stopping at the first failure)."""
    job = yaml.safe_load((CI_DOCS / "gitlab-ci.yml").read_text())["dask-gpu-parity"]
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"}
    ran = []
    for line in job["script"]:
        if line.startswith("pip install"):
            continue  # installed already: this venv
        ran.append(line)
        proc = subprocess.run(["bash", "-c", line], cwd=repo, env=env, check=False, timeout=120)
        if proc.returncode:
            return proc.returncode, ran
    for artifact in job["artifacts"]["reports"].values():
        assert (repo / artifact).is_file()
    return 0, ran


def test_gitlab_job(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    code, _ = _gitlab_job(repo)
    assert code == 0
    assert assert_gitlab((repo / "gl-code-quality-report.json").read_text()) == []
    assert_junit((repo / "dask-gpu-parity-junit.xml").read_text())

    add_unfixed_cluster(repo)
    code, ran = _gitlab_job(repo)
    assert code == 1  # the JUnit step fails the job; both reports are written first
    assert len(ran) == 2
    issues = assert_gitlab((repo / "gl-code-quality-report.json").read_text())
    assert {i["location"]["path"] for i in issues} == {"manifests/gpu-cluster.yaml"}
    root = assert_junit((repo / "dask-gpu-parity-junit.xml").read_text())
    failed = [c.get("file") for c in root.iter("testcase") if c.find("failure") is not None]
    assert failed == ["manifests/gpu-cluster.yaml"]


# --- the README and this repository ----------------------------------------------------------


@pytest.mark.parametrize("name", ["github-workflow.yml", "gitlab-ci.yml", "pre-commit-config.yaml"])
def test_readme_shows_the_tested_files(name: str) -> None:
    assert (CI_DOCS / name).read_text() in (ROOT / "README.md").read_text()


def test_check_on_this_repository(monkeypatch: pytest.MonkeyPatch) -> None:
    """`check .` exits 1 (the examples have errors) and reports every Dask manifest's findings."""
    monkeypatch.chdir(ROOT)
    code, out, err = cli(["check", ".", "-o", "json"])
    assert (code, err) == (1, "")
    report = json.loads(out)
    assert report["summary"]["unchecked_files"] == 0
    tracked = subprocess.run(
        ["git", "ls-files", "*.yaml", "*.yml", "*.json"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    dask = [
        f
        for f in tracked
        if (
            "kubernetes.dask.org/v1" in (ROOT / f).read_text(errors="replace")
            or f.startswith(("tests/fixtures/gateway/", "tests/fixtures/classic-chart/"))
        )
        and "/templates/" not in f
    ]
    assert len(dask) >= 10
    # The same findings as naming every Dask manifest (worker groups meet their clusters).
    named = json.loads(cli(["check", *dask, "-o", "json"])[1])
    ignore = {"files": 0, "documents": 0}  # the walk also reads YAML without Dask
    assert named["summary"] | ignore == report["summary"] | ignore

    def key(f: dict[str, Any]) -> tuple[str, ...]:
        return (f["resource"]["file"], f["code"], f["path"], f["message"])

    got = sorted(map(key, report["findings"]))
    assert got == sorted(map(key, named["findings"]))
    for file in dask:  # and each file's own findings, at least
        alone = json.loads(cli(["check", file, "-o", "json"])[1])["findings"]
        assert set(map(key, alone)) <= set(got), file
    assert {f for f, *_ in got} >= {
        "examples/gpu-cluster-tcp.yaml",
        "examples/gpu-cluster-ucx.yaml",
    }
