"""The layering contracts hold, fail on a violation, and the package has no import cycle."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[2]
LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def _lint_imports(package_root: Path) -> subprocess.CompletedProcess[str]:
    """``lint-imports`` with the repository's contracts, on the package under ``package_root``."""
    return subprocess.run(
        [str(LINT_IMPORTS), "--config", str(ROOT / "pyproject.toml"), "--no-cache"],
        cwd=ROOT,
        env={"PYTHONPATH": str(package_root), "PATH": str(LINT_IMPORTS.parent)},
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )


def test_contracts_hold_on_the_tree() -> None:
    result = _lint_imports(ROOT / "operator")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "0 broken" in result.stdout


@pytest.mark.parametrize(
    ("module", "line", "contract"),
    [
        pytest.param("core/plain.py", "import kopf", "The core is pure", id="kopf-in-core"),
        pytest.param("core/gpu.py", "import aiohttp", "The core is pure", id="aiohttp-in-core"),
        pytest.param("core/engine.py", "import yaml", "The core is pure", id="yaml-in-core"),
        pytest.param(
            "core/policy.py",
            "from dask_gpu_parity.manifests import read",
            "Layers",
            id="core-imports-adapter",
        ),
        pytest.param(
            "manifests/report/model.py",
            "from dask_gpu_parity.admission import decisions",
            "Layers",
            id="adapters-not-independent",
        ),
        pytest.param(
            "admission/decide/decisions.py",
            "from dask_gpu_parity.admission.runtime import kube",
            "runtime on its decisions",
            id="decision-imports-runtime",
        ),
        pytest.param(
            "admission/decide/placement.py",
            "import aiohttp",
            "decisions are pure",
            id="decision-does-io",
        ),
        pytest.param(
            "admission/decide/nodeindex.py",
            "import asyncio",
            "decisions are pure",
            id="decision-waits",
        ),
        pytest.param(
            "probe.py", "import dask_gpu_parity.names", "probe stands alone", id="probe-not-alone"
        ),
        pytest.param(
            "core/rules/gpu.py",
            "from dask_gpu_parity.core.rules import image",
            "rules depend on their context",
            id="rule-imports-rule",
        ),
    ],
)
def test_a_forbidden_import_fails_the_lint(
    tmp_path: Path, module: str, line: str, contract: str
) -> None:
    copy = tmp_path / "dask_gpu_parity"
    shutil.copytree(
        ROOT / "operator" / "dask_gpu_parity", copy, ignore=shutil.ignore_patterns("__pycache__")
    )
    target = copy / module
    target.write_text(target.read_text(encoding="utf-8") + f"\n{line}\n", encoding="utf-8")
    result = _lint_imports(tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    broken = result.stdout.split("Broken contracts", 1)[-1]
    assert contract in broken


def test_the_package_has_no_import_cycle() -> None:
    graph = grimp.build_graph("dask_gpu_parity", cache_dir=None)
    modules = sorted(graph.modules)
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    cycle: list[str] = []

    def visit(module: str, path: list[str]) -> bool:
        state[module] = 1
        for imported in sorted(graph.find_modules_directly_imported_by(module)):
            if state.get(imported) == 1:
                cycle.extend([*path[path.index(imported) :], imported])
                return True
            if imported not in state and visit(imported, [*path, imported]):
                return True
        state[module] = 2
        return False

    # A package's __init__ importing its own modules is no cycle between modules of one job.
    found = any(visit(m, [m]) for m in modules if m not in state)
    assert not found, " -> ".join(cycle)
