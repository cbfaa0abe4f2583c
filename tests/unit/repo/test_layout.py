"""The layering contracts hold, fail on a violation, and the package has no import cycle."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

import grimp
import pytest

ROOT = Path(__file__).resolve().parents[3]
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
            "from dask_gpu_parity.admission.decide import decisions",
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


# The module-size rule: no module of the package over this many physical lines (blank lines,
# comments and docstrings included: what a reader scrolls through). README.md § Contributing.
MAX_MODULE_LINES = 300
PACKAGE = ROOT / "operator" / "dask_gpu_parity"
OVERSIZE_ALLOWED = {
    # The init container's probe must stay one stdlib-only file that runs as
    # `python -I probe.py` in the scheduler's image (docs/probe.md), so it cannot be split into
    # modules; the layer contract "The probe stands alone" keeps it from importing the package.
    "probe.py": 600,
}


def test_no_package_module_is_over_the_size_limit() -> None:
    """Every module under ``operator/dask_gpu_parity/`` has at most 300 physical lines.

    Physical lines, as ``wc -l`` counts them. The one exemption, ``probe.py``, has its own
    ceiling in ``OVERSIZE_ALLOWED`` with the reason beside it, so it cannot grow unnoticed either.
    """
    over = []
    for path in sorted(PACKAGE.rglob("*.py")):
        name = path.relative_to(PACKAGE).as_posix()
        limit = OVERSIZE_ALLOWED.get(name, MAX_MODULE_LINES)
        lines = len(path.read_bytes().splitlines())
        if lines > limit:
            over.append(f"{name}: {lines} lines (at most {limit}): split it by job")
    assert not over, "\n".join(over)


def test_size_exemptions_name_existing_modules() -> None:
    assert all((PACKAGE / name).is_file() for name in OVERSIZE_ALLOWED)


def _imported_test_modules(source: str, where: Path) -> list[str]:
    """The repository's ``test_*`` modules that ``source``, a module at ``where``, imports."""
    package = where.relative_to(ROOT).parent.parts
    found = []
    for stmt in ast.walk(ast.parse(source)):
        if isinstance(stmt, ast.Import):
            targets = [alias.name.split(".") for alias in stmt.names]
        elif isinstance(stmt, ast.ImportFrom):
            base = list(package[: len(package) - stmt.level + 1]) if stmt.level else []
            module = [*base, *stmt.module.split(".")] if stmt.module else base
            # ``from tests.unit import test_x`` imports a module; ``from m import name`` a name.
            targets = [module] + [[*module, alias.name] for alias in stmt.names]
        else:
            continue
        for parts in targets:
            target = ROOT.joinpath(*parts).with_suffix(".py")
            if parts and parts[-1].startswith("test_") and target.is_file():
                found.append(".".join(parts))
    return found


TEST_MODULES = sorted(
    p for folder in ("tests", "provingground/tests") for p in (ROOT / folder).rglob("test_*.py")
)


def test_test_modules_never_import_each_other() -> None:
    """A ``test_*.py`` imports no other ``test_*`` module: shared helpers live in plain modules.

    Importing a test module runs its module-level code (hypothesis settings, fixtures), a test
    function imported into another module runs twice, and an edit to one test file breaks
    another. Helpers shared between test files live in a non-test module beside them
    (``tests/unit/helpers.py``, ``gpunodes.py``, ``driftharness.py``, ``inventorywalk.py``).
    """
    assert TEST_MODULES
    crossing = [
        f"{path.relative_to(ROOT)} imports {module}: move what it uses into a helper module"
        for path in TEST_MODULES
        for module in _imported_test_modules(path.read_text(encoding="utf-8"), path)
    ]
    assert not crossing, "\n".join(crossing)


@pytest.mark.parametrize(
    "line",
    [
        "from tests.unit.decide.test_nodeindex import node",
        "from .test_nodeindex import node",
        "from tests.unit.decide import test_nodeindex",
        "import tests.unit.decide.test_nodeindex",
    ],
)
def test_an_import_of_a_test_module_is_found(line: str) -> None:
    where = ROOT / "tests" / "unit" / "decide" / "test_copy.py"  # where `.` resolves
    other = "from aiohttp.test_utils import TestServer\nfrom tests.unit.helpers import example\n"
    assert _imported_test_modules(other, where) == []
    assert _imported_test_modules(line + "\n" + other, where) == [
        "tests.unit.decide.test_nodeindex"
    ]
