"""``check`` starts without what only other commands, formats or inputs need.

A fresh interpreter runs ``check`` over the example clusters (read by the fast path) with the
text report, then lists what it imported: nothing of ``audit``, ``fix``'s rewriting, the exact YAML
reader (PyYAML), ``tempfile`` or ``hashlib``. Each was milliseconds of every run's start-up.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[3]
CLUSTERS = [str(p) for p in sorted((ROOT / "examples").glob("*-cluster*.yaml"))]
NOT_FOR_CHECK = (
    "dask_gpu_parity.audit",
    "dask_gpu_parity.cli.audit",
    "dask_gpu_parity.cli.audit_report",
    "dask_gpu_parity.manifests.inplace",
    "dask_gpu_parity.manifests.kubeyaml",
    "dask_gpu_parity.manifests.rewrite",
    "yaml",
    "ruamel",
    "tempfile",
    "hashlib",
    "importlib.resources",
    "concurrent.futures",
)
PROGRAM = """
import json, sys
from dask_gpu_parity.cli import main
code = main(sys.argv[1:])
print(json.dumps([code, sorted(sys.modules)]), file=sys.stderr)
"""


def _imported(*argv: str) -> tuple[int, set[str]]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT / "operator"), str(ROOT)])}
    done = subprocess.run(
        [sys.executable, "-c", PROGRAM, *argv],
        capture_output=True,
        text=True,
        env=env,
        cwd=ROOT,
        check=False,
        timeout=120,
    )
    code, modules = json.loads(done.stderr.splitlines()[-1])
    return code, set(modules)


def test_check_imports_nothing_only_other_commands_need() -> None:
    code, modules = _imported("check", *CLUSTERS, "-o", "text")
    assert code == 1  # the examples have findings: check ran to its report
    assert "yaml_rs" in modules  # the fast path read them
    assert [m for m in NOT_FOR_CHECK if m in modules] == []


@pytest.mark.parametrize(("fmt", "module"), [("sarif", "hashlib"), ("gitlab", "hashlib")])
def test_the_formats_with_fingerprints_import_what_they_need(fmt: str, module: str) -> None:
    code, modules = _imported("check", *CLUSTERS, "-o", fmt)
    assert code == 1
    assert module in modules


def test_a_document_off_the_fast_path_loads_the_exact_reader(tmp_path: Path) -> None:
    manifest = tmp_path / "flow.yaml"  # a flow mapping at the top: the exact reader's
    manifest.write_text('{"apiVersion": "v1", "kind": "ConfigMap"}\n---\n{kind: Secret}\n')
    code, modules = _imported("check", str(manifest))
    assert code == 0
    assert {"yaml", "dask_gpu_parity.manifests.kubeyaml"} <= modules
