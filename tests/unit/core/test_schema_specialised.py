"""The specialised schema validator says exactly what the reference walk says, on any input.

``schema.validate`` runs closures compiled per schema node that take the common case (plain
dicts and lists) and hand anything else to ``schema_nodes.check``, the reference walk. These
properties hold the two to the same issues, in the same order, on the repository's examples (the
dask-kubernetes documentation's DaskCluster, DaskJob and DaskWorkerGroup shapes) broken at random:
values replaced by any JSON value, nulls, unknown fields, duplicated list items.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from dask_gpu_parity.core import schema
from dask_gpu_parity.core.schema_nodes import Issue, check, compile_node

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
# examples/*.yaml: written after the dask-kubernetes operator's documented resources
# (https://kubernetes.dask.org/en/latest/operator_resources.html)
DOCUMENTS = [
    doc
    for path in sorted(EXAMPLES.glob("*.yaml"))
    for doc in yaml.safe_load_all(path.read_text())
    if isinstance(doc, dict) and doc.get("kind") in schema.schemas()
]

JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)


def reference(document: dict[str, Any], kind: str) -> list[Issue]:
    issues: list[Issue] = []
    body = {k: v for k, v in document.items() if k not in ("apiVersion", "kind", "metadata")}
    check(body, compile_node(schema.schemas()[kind], {}), None, issues)
    return issues


def _paths(value: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [at]
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*at, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _paths(item, (*at, index))
    return found


@st.composite
def broken(draw: st.DrawFn) -> dict[str, Any]:
    document = copy.deepcopy(draw(st.sampled_from(DOCUMENTS)))
    for _ in range(draw(st.integers(1, 4))):
        paths = [p for p in _paths(document) if p and p[0] != "kind"]  # the kind picks the schema
        path = draw(st.sampled_from(paths))
        parent = document
        for key in path[:-1]:
            parent = parent[key]
        action = draw(st.sampled_from(["replace", "null", "unknown", "duplicate"]))
        if action == "replace":
            parent[path[-1]] = draw(JSON)
        elif action == "null":
            parent[path[-1]] = None
        elif action == "unknown" and isinstance(parent[path[-1]], dict):
            parent[path[-1]][draw(st.text(min_size=1, max_size=5))] = draw(JSON)
        elif action == "duplicate" and isinstance(parent[path[-1]], list) and parent[path[-1]]:
            parent[path[-1]].append(copy.deepcopy(parent[path[-1]][0]))
    return document


@pytest.mark.parametrize(
    "document", DOCUMENTS, ids=lambda d: f"{d['kind']}-{d['metadata']['name']}"
)
def test_examples_give_the_same_issues_as_the_reference_walk(document: dict[str, Any]) -> None:
    assert schema.validate(document, document["kind"]) == reference(document, document["kind"])


@given(broken())
def test_broken_documents_give_the_same_issues_as_the_reference_walk(
    document: dict[str, Any],
) -> None:
    assert schema.validate(document, document["kind"]) == reference(document, document["kind"])


def test_a_broken_document_has_issues_in_both() -> None:
    document = copy.deepcopy(next(d for d in DOCUMENTS if d["kind"] == "DaskCluster"))
    document["spec"]["worker"]["replicas"] = "two"
    document["spec"]["scheduler"]["spec"]["containers"].append(
        document["spec"]["scheduler"]["spec"]["containers"][0]
    )
    document["spec"]["scheduler"]["spec"]["hostAliases2"] = []
    issues = schema.validate(document, "DaskCluster")
    assert issues == reference(document, "DaskCluster")
    assert {i.path for i in issues} >= {
        "/spec/worker/replicas",
        "/spec/scheduler/spec/hostAliases2",
    }
