"""Manifests, policies and node dumps are read as kubectl reads them, or refused as it refuses them.

The expected values are kubectl's: go-yaml v2's ``resolve.go`` and ``decode.go``
(go.yaml.in/yaml/v2 v2.4.3), ``sigs.k8s.io/yaml`` v1.6.0's ``yamlToJSONTarget``, apimachinery's
``util/yaml`` decoder and unstructured JSON scheme, cli-runtime's ``FlattenListVisitor`` (all as
vendored by kubectl v1.36). ``tests/e2e/test_kubectl_reading.py`` holds the reader to kubectl
itself.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from dask_gpu_parity.manifests import FileError, Source, parse
from tests.unit.helpers import EXAMPLES
from tests.unit.reports import cli

TCP = (EXAMPLES / "gpu-cluster-tcp.yaml").read_text()
WORKER_GPU = 'nvidia.com/gpu: "1"'  # the workers' limit in gpu-cluster-tcp.yaml
WORKER_ENV = 'value: "xgboost==3.1.0"'  # the workers' EXTRA_PIP_PACKAGES


def value(scalar: str) -> Any:
    """The value of ``v: <scalar>`` as read."""
    docs = parse(Source("in.yaml", f"kind: X\nv: {scalar}\n"))
    return docs[0].data["v"]


@pytest.mark.parametrize(
    ("scalar", "expected"),
    [
        ("y", True),  # resolveMap: y Y yes Yes YES on On ON are true
        ("N", False),
        ("off", False),
        ("2026-01-15", "2026-01-15"),  # a timestamp decoded into interface{} stays its text
        ("2024-02-30", "2024-02-30"),  # no date: a string
        ("0o1", 1),  # strconv.ParseInt(s, 0, 64) takes 0o, 0x, 0b and a leading 0 (octal)
        ("0755", 493),
        ("0x1F", 31),
        ("1_000", 1000),  # underscores removed first
        ("08", 8),  # no octal: ParseInt fails, the float pattern takes it (an integral float)
        ("1e3", 1000),  # a float; an integral float is an integer in kubectl's JSON
        ("1.0", 1),
        ("0.5", 0.5),
        (".5_0", 0.5),  # strconv.ParseFloat allows _ between digits
        ("1e21", 1e21),  # Go's JSON writes 1e+21: the API server reads a float
        ("9223372036854775807", 2**63 - 1),
        ("18446744073709551615", float(2**64 - 1)),  # uint64: a float once in JSON
        ("1" * 400, "1" * 400),  # beyond float64: ParseFloat's range error, a string
        ("1" * 4301, "1" * 4301),
        ("1:30", "1:30"),  # no sexagesimal numbers
        ("=", "="),
        ("~", None),
        ("'0o1'", "0o1"),  # quoted: a string
        ("!!str 1", "1"),
        ("!!float 1", 1),
        ("!!timestamp 2024-02-29", "2024-02-29"),
        ("!!binary aGVsbG8=", "hello"),
        ("!custom 12", "12"),  # an application tag keeps the text
    ],
    ids=repr,
)
def test_plain_scalars_are_what_kubectl_sends(scalar: str, expected: Any) -> None:
    read = value(scalar)
    assert (read, type(read)) == (expected, type(expected))


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("v: !!int '0o-17'\n", "cannot decode !!str `0o-17` as a !!int"),
        ("v: !!timestamp 2024-02-30\n", "cannot decode !!str `2024-02-30` as a !!timestamp"),
        ("v: !!float 18446744073709551615\n", "as a !!float"),
        ("v: .inf\n", "json: unsupported value: +Inf"),
        ("v: .nan\n", "json: unsupported value: NaN"),
        ("~: 1\n", "unsupported map key of type: <nil>"),
        ("18446744073709551615: 1\n", "unsupported map key of type: uint64"),
        ("[a]: 1\n", "invalid map key"),
        ("1: a\n'1': b\n", "two keys become the key '1'"),
        ("v:\n  <<: [1]\n", "map merge requires map or sequence of maps"),
        ("v: *nowhere\n", "unknown anchor 'nowhere' referenced"),
        ("v: &a [*a]\n", "anchor 'a' value contains itself"),
        ('v: "\\/"\n', "found unknown escape character"),
        ("%YAML 1.1\n---\nv: 1\n", "did not find expected <document start>"),  # cut before ---
        ("--- v: 1\n", "invalid document separator: v: 1"),
        ("kind: List\nitems: 5\n", "items must be a list"),
    ],
    ids=repr,
)
def test_documents_kubectl_refuses_are_refused_in_one_line(text: str, reason: str) -> None:
    with pytest.raises(FileError) as caught:
        parse(Source("in.yaml", "kind: X\n" + text if text[0] not in "%-" else text))
    assert reason in str(caught.value)
    assert "\n" not in str(caught.value)


def test_merge_keys_apply_where_they_stand() -> None:
    """go-yaml sets merged keys when it meets ``<<``: a later merge overrides earlier keys."""
    text = "kind: X\nbase: &b {a: 1, b: 1}\nv:\n  a: 0\n  <<: [*b, {b: 2, c: 2}]\n  c: 3\n"
    assert parse(Source("in.yaml", text))[0].data["v"] == {"a": 1, "b": 1, "c": 3}


def test_non_string_keys_become_kubectls_strings() -> None:
    text = "kind: X\nv: {1: a, yes: b, 1.5: c, 0x10: d, 123456789.0: e}\n"
    keys = set(parse(Source("in.yaml", text))[0].data["v"])
    assert keys == {"1", "true", "1.5", "16", "1.2345679e+08"}  # floats as Go's float32 'g'


def test_kubectl_reads_the_first_document_of_each_separated_piece() -> None:
    """Only ``---`` lines cut the stream; go-yaml's Unmarshal reads the first document of each."""
    docs = parse(Source("in.yaml", "kind: A\n...\nkind: B\n---\nkind: C\n"))
    assert [d.data["kind"] for d in docs] == ["A", "C"]
    assert [d.index for d in docs] == [0, 1]


def test_json_numbers_are_the_numbers_kubectl_sends() -> None:
    doc = parse(
        Source("c.json", '{"kind": "X", "a": 1E0, "b": 1.5, "c": -0, "d": 12345678901234567890}')
    )
    data = doc[0].data
    assert [(data[k], type(data[k])) for k in "abcd"] == [
        (1, int), (1.5, float), (0, int), (12345678901234567890.0, float)
    ]  # fmt: skip
    # kubectl's JSON stream decoder fails on 01 before numbers are converted: the YAML fallback
    fallback = parse(Source("c.json", '{"kind": "X", "a": 1e400, "b": 01}'))
    assert fallback[0].data["a"] == "1e400"
    with pytest.raises(FileError, match=r"unsupported value: \+Inf"):
        parse(Source("c.json", '{"kind": "X", "a": 1e400}'))


# -- The CLI: no traceback on any input, whatever reads it ------------------------------------


def _policy(extra: str) -> str:
    return (
        (EXAMPLES / "policy.yaml")
        .read_text()
        .replace("metadata:\n  name: t4-schedulers\n", f"metadata:\n  name: t4-schedulers\n{extra}")
    )


def _nodes(extra: str) -> str:
    return (
        (EXAMPLES / "nodes.yaml")
        .read_text()
        .replace(
            "      kubernetes.io/hostname: a100-0\n",
            f"      kubernetes.io/hostname: a100-0\n{extra}",
            1,
        )
    )


HOSTILE = {  # scalar -> what kubectl does with it
    "date-that-is-no-date": ("2024-02-30", "read"),
    "integer-over-4300-digits": ("1" * 4301, "read"),
    "tagged-int-kubectl-cannot-decode": ("!!int '0o-17'", "refused"),
}


@pytest.mark.parametrize("case", HOSTILE)
@pytest.mark.parametrize("where", ["check", "fix", "--policy", "--nodes"])
def test_hostile_scalars_never_end_the_run_with_a_traceback(
    tmp_path: Path, case: str, where: str
) -> None:
    scalar, kubectl = HOSTILE[case]
    cluster, policy, nodes = tmp_path / "c.yaml", tmp_path / "p.yaml", tmp_path / "n.yaml"
    cluster.write_text(TCP)
    policy.write_text(_policy("  annotations:\n    note: x\n"))
    nodes.write_text((EXAMPLES / "nodes.yaml").read_text())
    if where in ("check", "fix"):
        cluster.write_text(TCP.replace(WORKER_ENV, f"value: {scalar}"))
    elif where == "--policy":
        policy.write_text(_policy(f"  annotations:\n    note: {scalar}\n"))
    else:
        nodes.write_text(_nodes(f"      example.com/note: {scalar}\n"))
    args = ["check", str(cluster), "--policy", str(policy), "--nodes", str(nodes)]
    if where == "fix":
        args = ["fix", "-i", str(cluster)]
    code, out, err = cli(args)
    assert "Traceback" not in out + err
    if kubectl == "read" and where == "fix":  # fixed, the value kept as written
        assert (code, err.splitlines()[-1]) == (0, "1 file(s) fixed, 0 left unchanged")
        assert f"value: {scalar}\n" in cluster.read_text()
    elif kubectl == "read":
        assert "DGP901" not in out
        assert not err
        assert code == 1  # the example's findings
    elif where == "check":
        assert (code, err) == (1, "")
        assert "DGP901 document 1: cannot decode !!str `0o-17` as a !!int" in out
    else:  # fix, or an argument of its own: one line, exit 2
        assert code == 2
        assert len(err.splitlines()) == (2 if where == "fix" else 1)  # fix adds its counts
        assert "cannot decode !!str `0o-17` as a !!int" in err.splitlines()[0]


def _codes(out: str) -> list[tuple[str, str]]:
    return [(f["code"], f["path"]) for f in json.loads(out)["findings"]]


def test_an_env_value_that_looks_like_a_date_is_the_string_kubectl_sends(tmp_path: Path) -> None:
    plain = _codes(cli(["check", str(EXAMPLES / "gpu-cluster-tcp.yaml"), "-o", "json"])[1])
    path = tmp_path / "c.yaml"
    path.write_text(TCP.replace(WORKER_ENV, "value: 2026-01-15"))
    assert _codes(cli(["check", str(path), "-o", "json"])[1]) == plain


@pytest.mark.parametrize(
    ("name", "text"),
    [
        ("c.yaml", TCP.replace(WORKER_GPU, "nvidia.com/gpu: 0o1")),
        (
            "c.json",
            json.dumps(yaml.safe_load(TCP)).replace(
                '"nvidia.com/gpu": "1"', '"nvidia.com/gpu": 1E0'
            ),
        ),
    ],
    ids=["yaml-octal", "json-exponent"],
)
def test_a_gpu_count_kubectl_sends_as_a_number_is_reported_as_one(
    tmp_path: Path, name: str, text: str
) -> None:
    """kubectl sends the integer 1, which the DaskCluster CRD (quantities are strings) rejects."""
    path = tmp_path / name
    path.write_text(text)
    gpu = "/spec/worker/spec/containers/0/resources/limits/nvidia.com~1gpu"
    assert ("DGP010", gpu) in _codes(cli(["check", str(path), "-o", "json"])[1])


def test_a_typed_list_is_applied_item_by_item(tmp_path: Path) -> None:
    """``kind: DaskClusterList``: kubectl applies its items; items without kind get the list's."""
    cluster = yaml.safe_load(TCP)
    bare = {k: v for k, v in cluster.items() if k not in ("apiVersion", "kind")}
    listed = {"apiVersion": "kubernetes.dask.org/v1", "kind": "DaskClusterList"}
    path = tmp_path / "list.yaml"
    path.write_text(yaml.safe_dump({**listed, "items": [cluster, bare]}))
    report = json.loads(cli(["check", str(path), "-o", "json"])[1])
    assert report["summary"]["resources"] == 2
    assert cli(["fix", "-i", str(path)])[0] == 0
    assert cli(["check", str(path)])[0] == 0


def test_a_kustomization_with_a_date_that_is_no_date_ends_no_run(tmp_path: Path) -> None:
    """The folder walk reads kustomization.yaml for its patch files; a bad value skips that."""
    (tmp_path / "kustomization.yaml").write_text("resources: [c.yaml]\nnote: 2024-02-30\n")
    (tmp_path / "c.yaml").write_text(TCP)
    code, out, err = cli(["check", str(tmp_path)])
    assert (code, err) == (1, "")
    assert "DGP001" in out


def test_a_kubeconfig_with_a_date_that_is_no_date_is_one_clear_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from dask_gpu_parity.cli.operator import api_server
    from dask_gpu_parity.manifests import InputError

    config = tmp_path / "config"
    config.write_text("current-context: x\nnote: 2024-02-30\n")
    monkeypatch.setenv("KUBECONFIG", str(config))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    with pytest.raises(InputError, match="cannot read the kubeconfig"):
        api_server()
