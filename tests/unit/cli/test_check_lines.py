"""check walks each distinct text once for its findings' lines (``manifests.locate.SharedLines``)
and evaluates each distinct content once: its reports, in every format, must be byte for byte
what locating and evaluating every document alone gives.

The corpus: the repository's Dask examples stamped out under several names and namespaces, as a
fleet stamps them from one template, beside copies equal in content but not in text (a comment
inside the spec, another layout, JSON, a List of them, CRLF line ends), copies that differ in
what a rule reads, and every fixture of tests/fixtures (charts, gateway values, DRA, worker
groups with and without their cluster).
"""

from __future__ import annotations

import importlib
import json
import re
from pathlib import Path

import pytest
import yaml

from dask_gpu_parity.cli import inputs
from dask_gpu_parity.cli.args import CheckArgs, parse_args
from dask_gpu_parity.manifests.locate import SharedLines, locate
from dask_gpu_parity.manifests.report import FORMATS
from tests.unit.helpers import EXAMPLES, ROOT
from tests.unit.reports import cli

CHECK = importlib.import_module("dask_gpu_parity.cli.check")  # the module: the package has `check`
DASK_EXAMPLES = [
    p
    for p in sorted(EXAMPLES.glob("*.yaml"))
    if yaml.safe_load(p.read_text()).get("apiVersion", "").startswith("kubernetes.dask.org/")
]


def _renamed(text: str, name: str, namespace: str) -> str:
    """The example's text under another name, in a namespace; nothing else changed."""
    return re.sub(
        r"^metadata:\n  name: .*$",
        f"metadata:\n  name: {name}\n  namespace: {namespace}",
        text,
        count=1,
        flags=re.M,
    )


def _corpus(folder: Path) -> list[Path]:
    """Files of documents alike and unlike, in content and in text."""
    docs = []
    for path in DASK_EXAMPLES:
        text = path.read_text()
        data = yaml.safe_load(text)
        for n, namespace in enumerate(("team-a", "team-b", "team-a")):
            docs.append(_renamed(text, f"{path.stem}-{n}", namespace))
        # Equal content, other text: a comment inside the spec moves every line below it.
        docs.append(text.replace("\nspec:\n", "\nspec:\n  # stamped by a template\n", 1))
        docs.append(yaml.safe_dump(data, sort_keys=False))
        docs.append(yaml.safe_dump(data, sort_keys=False, indent=4))
        docs.append(json.dumps(data))
        # Other content: another image for every container, another annotation.
        docs.append(text.replace("25.12", "25.10"))
        data["metadata"]["annotations"] = {"team": "b"}
        docs.append(yaml.safe_dump(data, sort_keys=False))
    many = folder / "many.yaml"
    many.write_text("---\n".join(d if d.endswith("\n") else d + "\n" for d in docs))
    listed = folder / "list.yaml"
    items = [yaml.safe_load(p.read_text()) for p in DASK_EXAMPLES]
    listed.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": items * 2}))
    crlf = folder / "crlf.yaml"
    crlf.write_bytes(many.read_bytes().replace(b"\n", b"\r\n"))
    return [many, listed, crlf, ROOT / "tests" / "fixtures"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    return [str(p) for p in _corpus(tmp_path_factory.mktemp("corpus"))]


@pytest.mark.parametrize("fmt", FORMATS)
def test_shared_lines_and_evaluations_report_what_each_document_alone_does(
    corpus: list[str], fmt: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    argv = ["check", *corpus, "-o", fmt, "--nodes", str(EXAMPLES / "nodes.yaml")]
    shared = cli(argv)
    monkeypatch.setattr(inputs, "spec_key", lambda resource: b"%d" % id(resource))  # no sharing
    monkeypatch.setattr(CHECK, "locate", lambda document, ptr, _lines: locate(document, ptr))
    assert cli(argv) == shared
    assert shared[0] == 1


def test_the_corpus_shares_line_walks(corpus: list[str]) -> None:
    """The comparison above compares something: walks are shared, and give the same lines."""
    args = parse_args(["check", corpus[0]])
    assert isinstance(args, CheckArgs)
    documents = inputs.load_inputs(args.inputs).documents
    judged = inputs.findings_all(documents, None, None)
    lines = SharedLines()
    walked = [locate(j.document, f.path, lines) for j in judged for f in j.findings]
    assert walked == [locate(j.document, f.path) for j in judged for f in j.findings]
    assert len(walked) > len(judged)
    assert 0 < len(lines._blocks) < len(judged) / 2
