"""``check`` evaluates documents no rule can tell apart once, and reports exactly as before.

The corpus: the examples and the published manifests of ``tests/fixtures/`` (their sources in
the ``SOURCES.md`` beside them), each also copied under other names and namespaces, worker
groups whose clusters differ, and a classic chart's release (whose documents are read
together, never shared). The expected report is the one with no sharing at all.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest
import yaml

from dask_gpu_parity.cli import inputs, main
from dask_gpu_parity.cli.args import InputArgs
from dask_gpu_parity.manifests.discover import Selection

ROOT = Path(__file__).resolve().parents[3]
SOURCES = [
    *sorted((ROOT / "examples").glob("*-cluster*.yaml")),
    ROOT / "examples" / "gpu-workergroup.yaml",
    ROOT / "examples" / "gpu-daskjob.yaml",
    *sorted((ROOT / "tests" / "fixtures" / "realworld").glob("*.yaml")),
    *sorted((ROOT / "tests" / "fixtures" / "gateway").glob("gw-crd-*.yaml")),
]
CHART = ROOT / "tests" / "fixtures" / "classic-chart" / "rendered-rapids-release.yaml"


def renamed(docs: list[object], copy: int) -> list[object]:
    """The documents again under other names and namespaces (worker groups keep their cluster)."""
    out = []
    for doc in docs:
        if not isinstance(doc, dict) or not isinstance(doc.get("metadata"), dict):
            out.append(doc)
            continue
        meta = dict(doc["metadata"])
        meta["name"] = f"{meta.get('name', 'x')}-copy{copy}"
        meta["namespace"] = f"team-{copy}"
        out.append({**doc, "metadata": meta})
    return out


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    folder = tmp_path_factory.mktemp("corpus")
    files = []
    for source in SOURCES:
        docs = [d for d in yaml.safe_load_all(source.read_text()) if d is not None]
        for copy in range(3):
            target = folder / f"{copy}-{source.name}"
            target.write_text(yaml.safe_dump_all(renamed(docs, copy) if copy else docs))
            files.append(str(target))
    files.append(str(CHART))
    return files


def report(files: list[str], output: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(
        ["check", *files, "-o", output, "--nodes", str(ROOT / "examples" / "nodes.yaml")],
        out=out,
        err=err,
    )
    return code, out.getvalue()


def test_shared_findings_are_what_evaluating_each_document_finds(corpus: list[str]) -> None:
    given = InputArgs(
        paths=tuple(corpus), selection=Selection(), nodes=str(ROOT / "examples" / "nodes.yaml")
    )
    documents = inputs.load_inputs(given).documents
    nodes = inputs.load_cluster(given, None)[1]
    shared = inputs.findings_all(documents, None, nodes)
    alone = inputs.evaluate_all(documents, None, nodes)
    assert [(j.document, j.findings) for j in shared] == [
        (c.document, c.result.findings) for c in alone
    ]
    assert sum(len(j.findings) for j in shared) > len(shared)  # there is something to compare
    distinct = {id(j.findings) for j in shared}
    assert len(distinct) * 2 < len(shared)  # the copies were not evaluated again


@pytest.mark.parametrize("output", ["text", "json"])
def test_shared_evaluations_report_byte_for_byte_what_evaluating_each_does(
    corpus: list[str], output: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    evaluated = []
    real = inputs.evaluate

    def counting(*args: object, **kwargs: object) -> object:
        evaluated.append(1)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(inputs, "evaluate", counting)
    shared = report(corpus, output)
    shared_count = len(evaluated)
    evaluated.clear()
    monkeypatch.setattr(inputs, "spec_key", lambda resource: b"%d" % id(resource))  # no sharing
    alone = report(corpus, output)
    assert shared == alone
    assert shared[0] == 1  # the corpus has findings
    assert shared_count * 2 < len(evaluated)  # the copies were not evaluated again
