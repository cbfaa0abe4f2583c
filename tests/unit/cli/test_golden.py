"""Golden pairs: ``tests/fixtures/golden/NAME.in.yaml`` fixed is ``NAME.out.yaml``.

Regenerate after an intended change with ``UPDATE_GOLDEN=1 pytest tests/unit/cli/test_golden.py``
and review the diff.
"""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

from dask_gpu_parity.cli import main
from dask_gpu_parity.core import verifier

GOLDEN = Path(__file__).resolve().parents[2] / "fixtures" / "golden"
CASES = sorted(p.name.removesuffix(".in.yaml") for p in GOLDEN.glob("*.in.yaml"))


@pytest.fixture(autouse=True)
def short_probe(monkeypatch: pytest.MonkeyPatch) -> None:
    """Golden files show a stand-in for the probe source, so they don't change with it.

    ``test_verifier.py`` checks that the real source is embedded byte for byte.
    """
    monkeypatch.setattr(verifier, "probe_source", lambda: "import probe\nprobe.main()\n")


def fix(path: Path) -> str:
    out, err = io.StringIO(), io.StringIO()
    assert (
        main(
            ["fix", str(path), "--nodes", str(GOLDEN.parents[2] / "examples" / "nodes.yaml")],
            out=out,
            err=err,
        )
        == 0
    )
    return out.getvalue()


@pytest.mark.parametrize("name", CASES)
def test_golden(name: str) -> None:
    expected_path = GOLDEN / f"{name}.out.yaml"
    got = fix(GOLDEN / f"{name}.in.yaml")
    if os.environ.get("UPDATE_GOLDEN"):
        expected_path.write_text(got)
    assert got == expected_path.read_text()


@pytest.mark.parametrize("name", CASES)
def test_fixing_the_golden_output_changes_nothing(name: str) -> None:
    path = GOLDEN / f"{name}.out.yaml"
    assert fix(path) == path.read_text()


def test_non_dask_documents_are_byte_identical() -> None:
    text = (GOLDEN / "multi-document.in.yaml").read_text()
    out = fix(GOLDEN / "multi-document.in.yaml")
    head = text.split("---\n")[0]
    tail = text.split("---\n")[-1]
    assert out.startswith(head)
    assert out.endswith(tail)
    assert "# the scheduler container" in out
    assert "# Source: dask/templates/cluster.yaml" in out
