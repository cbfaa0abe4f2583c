"""The benchmarks' own set-up runs on a fresh clone (nothing else runs them in CI)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from benchmarks.check_throughput import PEERS, corpus, kubeconform_schemas
from dask_gpu_parity.core.contentkey import spec_key


def test_kubeconform_gets_the_bundled_daskcluster_schema(tmp_path: Path) -> None:
    location = kubeconform_schemas(tmp_path / "schemas")
    assert location.endswith("{{.Group}}/{{.ResourceKind}}_{{.ResourceAPIVersion}}.json")
    written = tmp_path / "schemas" / "kubernetes.dask.org" / "daskcluster_v1.json"
    schema = json.loads(written.read_text())
    assert schema["properties"]["spec"]["additionalProperties"] is False


# The short form of `make bench`: a few hundred documents, one round. It asserts that the
# benchmark runs from the repository root and reports every stage, never how fast (the machine is
# shared; docs/performance.md holds the figures of the full run).
SHORT = ["--documents", "200", "--repeat", "1"]
ROOT = Path(__file__).resolve().parents[3]
STAGE_FIELDS = {
    "wall_s_median",
    "cpu_s_median",
    "cpu_s_min",
    "cpu_s_max",
    "docs_per_wall_s",
    "docs_per_cpu_s",
}


def short_bench(tmp_path: Path, *extra: str) -> tuple[subprocess.CompletedProcess[str], Any]:
    out = tmp_path / "bench.json"
    argv = [sys.executable, "-m", "benchmarks.check_throughput", *SHORT, "--json", str(out), *extra]
    done = subprocess.run(argv, cwd=ROOT, capture_output=True, text=True, timeout=300, check=False)
    return done, json.loads(out.read_text()) if out.exists() else None


def test_the_short_bench_times_every_stage_of_check(tmp_path: Path) -> None:
    done, result = short_bench(tmp_path, "--kubeconform", "")
    assert done.returncode == 0, done.stderr
    assert result["documents"] == 200
    assert result["corpus"] == "templated"
    assert result["fast_path"] == 200
    assert set(result["stages"]) == {"pyyaml", "parse", "check", "check-cli", *PEERS}
    for stage in result["stages"].values():
        assert set(stage) == STAGE_FIELDS
        assert stage["cpu_s_min"] <= stage["cpu_s_median"] <= stage["cpu_s_max"]
        assert stage["docs_per_cpu_s"] > 0
    assert len(result["runs"]) == 1
    assert any(line.startswith("check-cli ") for line in done.stdout.splitlines())
    assert "check_cli_vs_kubeconform" not in result
    for peer in PEERS:
        ratio = result[f"check_cli_vs_{peer}"]
        assert ratio["min"] <= ratio["median"] <= ratio["max"]


@pytest.mark.skipif(
    not os.environ.get("KUBECONFORM"),
    reason="needs $KUBECONFORM, the pinned kubeconform `make test` builds and names",
)
def test_the_short_bench_sets_check_beside_kubeconform(tmp_path: Path) -> None:
    done, result = short_bench(tmp_path)  # kubeconform from $KUBECONFORM, as make bench names it
    assert done.returncode == 0, done.stderr
    stages = {"pyyaml", "parse", "check", "check-cli", *PEERS, "kubeconform"}
    assert set(result["stages"]) == stages
    for key in ("check_cli_vs_kubeconform", *(f"{peer}_vs_kubeconform" for peer in PEERS)):
        assert result[key]["min"] <= result[key]["median"] <= result[key]["max"]
    assert "over kubeconform's" in done.stdout


def test_the_bench_refuses_a_kubeconform_that_is_not_there(tmp_path: Path) -> None:
    done, result = short_bench(tmp_path, "--kubeconform", str(tmp_path / "kubeconform"))
    assert done.returncode == 2
    assert result is None
    assert done.stderr.splitlines()[-1].endswith(f"{tmp_path / 'kubeconform'}: no such executable")
    assert "Traceback" not in done.stderr


def test_the_short_bench_sets_check_beside_another_tree(tmp_path: Path) -> None:
    done, result = short_bench(tmp_path, "--kubeconform", "", "--before", str(ROOT))  # itself
    assert done.returncode == 0, done.stderr
    stages = {"pyyaml", "parse", "check", "check-cli", *PEERS, "check-cli-before"}
    assert set(result["stages"]) == stages
    ratio = result["check_cli_vs_before"]
    assert ratio["min"] <= ratio["median"] <= ratio["max"]
    assert "over check-cli-before's" in done.stdout


def test_the_bench_refuses_a_before_tree_without_the_package(tmp_path: Path) -> None:
    done, result = short_bench(tmp_path, "--kubeconform", "", "--before", str(tmp_path))
    assert done.returncode == 2
    assert result is None
    assert done.stderr.splitlines()[-1].endswith(f"{tmp_path}: no operator/dask_gpu_parity there")
    assert "Traceback" not in done.stderr


def test_the_templated_corpus_repeats_contents_and_the_distinct_one_does_not() -> None:
    """check shares evaluations between equal contents: --distinct is the corpus with none."""
    templated = list(yaml.safe_load_all(corpus(12)))
    distinct = list(yaml.safe_load_all(corpus(12, distinct=True)))
    assert len({spec_key(doc) for doc in templated}) == 3  # TCP, UCX, CPU-only
    assert len({spec_key(doc) for doc in distinct}) == 12
    names = [(d["metadata"]["name"], d["metadata"]["namespace"]) for d in templated]
    assert names == [(d["metadata"]["name"], d["metadata"]["namespace"]) for d in distinct]


def test_the_short_bench_names_its_corpus(tmp_path: Path) -> None:
    done, result = short_bench(tmp_path, "--kubeconform", "", "--distinct")
    assert done.returncode == 0, done.stderr
    assert result["corpus"] == "distinct"
    assert result["fast_path"] == 200
    assert "(distinct)" in done.stdout.splitlines()[0]
