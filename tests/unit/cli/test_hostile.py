"""Hostile documents through the CLI and the webhook handler: one error model everywhere.

Every input ends in exit 0/1 with findings, or exit 2 with one line on stderr; nothing is
written; no traceback; no non-finite number leaves the process (``-o json`` and AdmissionReview
answers parse as strict JSON). Generated: types, magnitudes, unicode, aliases, depth.
"""

from __future__ import annotations

import io
import json
import math
from pathlib import Path
from typing import Any

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from dask_gpu_parity.admission.decide import decisions, reviews
from dask_gpu_parity.cli import main
from dask_gpu_parity.core.policy import Policy
from tests.unit.helpers import cluster

SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**80), max_value=2**80),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=8),
    st.sampled_from(
        ["1e999999999", "1e400", ".nan", ".inf", "-1", "9Ei", "1.5.3", " 1", "\u202e1", "1\x00"]
    ),
)
VALUES = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=12,
)
PLACES = [
    ("spec", "worker", "spec", "containers", 0, "resources", "limits", "nvidia.com/gpu"),
    ("spec", "worker", "spec", "containers", 0, "resources", "limits", "memory"),
    ("spec", "worker", "replicas"),
    ("spec", "scheduler", "spec", "containers", 0, "image"),
    ("spec", "worker", "spec", "nodeSelector"),
    ("spec", "worker", "spec", "tolerations"),
    ("spec", "worker", "spec", "affinity"),
    ("spec", "worker", "spec", "containers", 0, "env"),
    ("metadata", "name"),
    ("metadata", "annotations"),
]


def _with(doc: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    node: Any = doc
    for key in path[:-1]:
        node = node[key] if isinstance(key, int) else node.setdefault(key, {})
    node[path[-1]] = value
    return doc


@st.composite
def hostile(draw: st.DrawFn) -> dict[str, Any]:
    doc = cluster(worker_resources={"limits": {"nvidia.com/gpu": "1"}})
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        doc = _with(doc, draw(st.sampled_from(PLACES)), draw(VALUES))
    return doc


def _dump(doc: dict[str, Any], style: str) -> str:
    if style == "json":
        return json.dumps(doc, allow_nan=True, ensure_ascii=False)
    return yaml.safe_dump(doc, allow_unicode=True, sort_keys=False)


RAW = [  # texts no dumper writes
    "a: &x [*x]\n",  # an alias loop
    # A GPU cluster with the key -_, which ruamel.yaml's round-trip reader takes for an int and
    # then fails on (IndexError); found by `make nightly`.
    "apiVersion: kubernetes.dask.org/v1\nkind: DaskCluster\nmetadata: {name: c, namespace: ns}\n"
    "spec:\n  scheduler:\n    spec:\n      containers: [{name: scheduler, image: 'rapids:1'}]\n"
    "  worker:\n    replicas: 1\n    spec:\n      containers:\n      - name: worker\n"
    "        image: 'rapids:1'\n        resources:\n          limits:\n"
    "            nvidia.com/gpu: '1'\n            memory: {-_: null}\n",
    "kind: DaskCluster\napiVersion: kubernetes.dask.org/v1\nspec: "
    + "[" * 5000
    + "]" * 5000
    + "\n",
    "apiVersion: kubernetes.dask.org/v1\nkind: DaskCluster\nspec: &s {worker: *s}\n",
    "apiVersion: kubernetes.dask.org/v1\nkind: DaskCluster\nmetadata: {name: \x1b[31mred}\n",
    "- &a [*a, *a]\n",
    "\ufeff\ufeffkind: x\n",
    # 150 nested block mappings under a GPU worker's env: read, then refused
    "apiVersion: kubernetes.dask.org/v1\nkind: DaskCluster\nspec:\n  worker:\n    spec:\n"
    + "".join("  " * (3 + i) + f"k{i}:\n" for i in range(150))
    + "  " * 153
    + "v: 1\n",
]


def _run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(argv, out=out, err=err)  # never raises: every error ends in an exit code
    return code, out.getvalue(), err.getvalue()


def _strict(text: str) -> Any:
    def refuse(name: str) -> Any:
        raise AssertionError(f"{name} in JSON output")

    return json.loads(text, parse_constant=refuse)


def _check_cli(tmp_path: Path, text: str, suffix: str) -> None:
    path = tmp_path / f"in{suffix}"
    path.write_text(text, encoding="utf-8")
    for argv in (["check", str(path), "-o", "json"], ["fix", str(path)]):
        code, out, err = _run(argv)
        assert code in (0, 1, 2), (argv, code, err)
        if code == 2:
            assert err.startswith("error: "), err
            assert err.count("\n") == 1, err
            assert out == "" or argv[0] == "check", out
        elif argv[0] == "check":
            _strict(out)
    assert path.read_text(encoding="utf-8") == text, "the input file was changed"
    assert sorted(p.name for p in tmp_path.iterdir()) == [path.name], "a file was left behind"


# Half the profile's examples, at least 100 (50,000 nightly): each runs check and fix on a file;
# the webhook's test below runs the profile's full count.
@settings(max_examples=max(100, settings.default.max_examples // 2))
@given(hostile(), st.sampled_from(["yaml", "json"]))
def test_cli_meets_the_error_promise(
    tmp_path_factory: Any, doc: dict[str, Any], style: str
) -> None:
    tmp = tmp_path_factory.mktemp("hostile")
    _check_cli(tmp, _dump(doc, style), ".json" if style == "json" else ".yaml")


def test_cli_meets_the_error_promise_on_raw_texts(tmp_path: Path) -> None:
    for index, text in enumerate(RAW):
        folder = tmp_path / str(index)
        folder.mkdir()
        _check_cli(folder, text, ".yaml")


def _finite(doc: Any) -> bool:
    if isinstance(doc, float):
        return math.isfinite(doc)
    if isinstance(doc, dict):
        return all(_finite(v) for v in doc.values())
    if isinstance(doc, list):
        return all(_finite(v) for v in doc)
    return True


@given(hostile(), st.sampled_from(["mutate", "validate"]))
def test_webhook_answers_strict_json(doc: dict[str, Any], action: str) -> None:
    if not _finite(doc):
        return  # the API server sends JSON, which has no NaN or Infinity
    data = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "u",
            "operation": "CREATE",
            "namespace": "ns",
            "resource": {
                "group": "kubernetes.dask.org",
                "version": "v1",
                "resource": "daskclusters",
            },
            "object": doc,
        },
    }
    policy = Policy()
    if action == "mutate":
        decision = decisions.mutate(doc, policy, None, namespace_skip=False)
    else:
        decision = decisions.validate(doc, policy, None, cluster=None, namespace_skip=False)
    answer = reviews.decided(data, decision)
    _strict(json.dumps(answer, allow_nan=False))
