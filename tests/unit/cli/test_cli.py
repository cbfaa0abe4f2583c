"""The command line through ``main([...])``: formats, exit codes and bad input."""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest

from dask_gpu_parity.core.findings import RULES
from tests.unit.helpers import EXAMPLES
from tests.unit.reports import cli

run = cli  # the shared CLI runner (tests/unit/reports.py)


def test_check_examples_text() -> None:
    code, out, _ = run(["check", str(EXAMPLES)])
    assert code == 1
    assert "error DGP001 DaskCluster rapids-tcp" in out
    assert "gpu-cluster-tcp.yaml:" in out
    assert "cpu-only" not in out.replace("DaskCluster 'cpu-only'", "")
    assert out.rstrip().splitlines()[-1].startswith("14 error(s)")


def test_check_clean_manifest_exits_zero(tmp_path: Path) -> None:
    fixed = tmp_path / "fixed.yaml"
    _, out, _ = run(["fix", str(EXAMPLES / "gpu-cluster-tcp.yaml")])
    fixed.write_text(out)
    assert run(["check", str(fixed)])[0] == 0
    assert run(["check", str(fixed), "--fail-on", "warning"])[0] == 0


def test_fail_on_warning(tmp_path: Path) -> None:
    doc = (EXAMPLES / "gpu-cluster-tcp.yaml").read_text()
    policy = tmp_path / "policy.yaml"
    policy.write_text(
        "apiVersion: gpuparity.dask.org/v1alpha1\nkind: DaskGPUPolicy\nmetadata: {name: p}\n"
        "spec: {tcpSeverity: warning, placement: {strategy: none}}\n"
    )
    path = tmp_path / "c.yaml"
    path.write_text(doc)
    assert run(["check", str(path), "--policy", str(policy)])[0] == 0
    assert run(["check", str(path), "--policy", str(policy), "--fail-on", "warning"])[0] == 1


def test_json_output_shape() -> None:
    code, out, _ = run(["check", str(EXAMPLES / "gpu-cluster-tcp.yaml"), "-o", "json"])
    data = json.loads(out)
    assert code == 1
    first = data["findings"][0]
    assert set(first) == {"code", "severity", "message", "path", "fixable", "resource"}
    assert first["resource"] == {
        "kind": "DaskCluster",
        "name": "rapids-tcp",
        "namespace": "",
        "file": str(EXAMPLES / "gpu-cluster-tcp.yaml"),
        "document": 1,
        "line": 21,
    }
    assert data["summary"]["errors"] == 3
    assert data["summary"]["resources"] == 1


def test_sarif_output() -> None:
    code, out, _ = run(["check", str(EXAMPLES), "-o", "sarif"])
    assert code == 1
    log = json.loads(out)
    assert log["version"] == "2.1.0"
    run_ = log["runs"][0]
    rules = run_["tool"]["driver"]["rules"]
    assert [r["id"] for r in rules] == list(RULES)
    for result in run_["results"]:
        assert rules[result["ruleIndex"]]["id"] == result["ruleId"]
        assert result["level"] in ("error", "warning", "note")
        region = result["locations"][0]["physicalLocation"]["region"]
        assert region["startLine"] >= 1


def test_junit_output() -> None:
    _, out, _ = run(["check", str(EXAMPLES), "-o", "junit"])
    suite = ET.fromstring(out).find("testsuite")
    assert suite is not None
    cases = suite.findall("testcase")
    names = [c.get("name") for c in cases]
    assert "DaskCluster cpu-only" in names  # passing resources are test cases too
    assert suite.get("tests") == str(len(cases)) == "6"
    failed = [c.get("name") for c in cases if c.find("failure") is not None]
    assert suite.get("failures") == str(len(failed)) == "5"


def test_github_output() -> None:
    _, out, _ = run(["check", str(EXAMPLES / "gpu-cluster-tcp.yaml"), "-o", "github"])
    first = out.splitlines()[0]
    assert first.startswith("::error file=")
    assert ",line=21,title=DGP001 Scheduler has no GPU::" in first


def test_stdin_and_non_dask_documents(monkeypatch: pytest.MonkeyPatch) -> None:
    text = (
        b"apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n---\n"
        + (EXAMPLES / "cpu-cluster.yaml").read_bytes()
    )
    code, out, _ = run(["check", "-"], stdin=text, monkeypatch=monkeypatch)
    assert code == 0
    assert "0 error(s), 0 warning(s) in 1 Dask resource(s) of 2 document(s)" in out


def test_fix_stdin_to_stdout(monkeypatch: pytest.MonkeyPatch) -> None:
    text = (EXAMPLES / "gpu-cluster-tcp.yaml").read_bytes()
    code, out, _ = run(["fix", "-"], stdin=text, monkeypatch=monkeypatch)
    assert code == 0
    assert "gpu-parity-check" in out
    assert out.startswith("# A GPU DaskCluster over TCP")


def test_fix_in_place_rewrites_only_dask_files(tmp_path: Path) -> None:
    for name in ("gpu-cluster-tcp.yaml", "cpu-cluster.yaml", "policy.yaml"):
        shutil.copy(EXAMPLES / name, tmp_path / name)
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    code, _, err = run(["fix", "--in-place", str(tmp_path)])
    assert code == 0
    assert err.splitlines() == [
        f"fixed {tmp_path / 'gpu-cluster-tcp.yaml'}",
        "1 file(s) fixed, 2 left unchanged",
    ]
    after = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    assert after["cpu-cluster.yaml"] == before["cpu-cluster.yaml"]
    assert after["policy.yaml"] == before["policy.yaml"]
    assert after["gpu-cluster-tcp.yaml"] != before["gpu-cluster-tcp.yaml"]
    assert sorted(after) == sorted(before)  # no temporary files left behind
    assert run(["check", str(tmp_path)])[0] == 0


def test_fix_json_file(tmp_path: Path) -> None:
    import yaml

    path = tmp_path / "c.json"
    path.write_text(json.dumps(yaml.safe_load((EXAMPLES / "gpu-cluster-tcp.yaml").read_text())))
    code, out, _ = run(["fix", str(path)])
    assert code == 0
    data = json.loads(out)
    limits = data["spec"]["scheduler"]["spec"]["containers"][0]["resources"]["limits"]
    assert limits == {"nvidia.com/gpu": "1"}


def test_fix_reports_what_needs_a_hand(tmp_path: Path) -> None:
    code, _, err = run(
        ["fix", str(EXAMPLES / "gpu-cluster-ucx.yaml"), "--nodes", str(EXAMPLES / "nodes.yaml")]
    )
    assert code == 0
    assert "1 error(s) need a change by hand" in err


def test_list_documents_from_kubectl(tmp_path: Path) -> None:
    import yaml

    doc = yaml.safe_load((EXAMPLES / "gpu-cluster-tcp.yaml").read_text())
    path = tmp_path / "list.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [doc]}))
    code, out, _ = run(["check", str(path), "-o", "json"])
    assert code == 1
    assert json.loads(out)["findings"][0]["resource"]["name"] == "rapids-tcp"
    _, fixed, _ = run(["fix", str(path)])
    path.write_text(fixed)
    assert run(["check", str(path)])[0] == 0


BOMB = b"""a: &a ["x","x","x","x","x","x","x","x","x"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
"""


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (b"\x00\x01\x02binary\xff", "binary data, not YAML or JSON text"),
        (b"kind: \xff\xfe", "not UTF-8 text"),
        (b"a: [unclosed\n", "invalid YAML"),
        (b"key: value\n  bad: indent\n", "invalid YAML"),
        (BOMB, "YAML bomb"),
    ],
    ids=["binary", "not-utf8", "unclosed", "bad-indent", "bomb"],
)
@pytest.mark.parametrize("command", ["check", "fix"])
def test_bad_input_is_a_finding_of_its_file(
    tmp_path: Path, content: bytes, message: str, command: str
) -> None:
    """check: an error finding (exit 1), in the report; fix: one line, exit 2, nothing written."""
    path = tmp_path / "bad.yaml"
    path.write_bytes(content)
    code, out, err = run(
        [command, str(path), "--in-place"] if command == "fix" else [command, str(path)]
    )
    assert "Traceback" not in err + out
    assert path.read_bytes() == content
    if command == "check":
        assert code == 1
        assert err == ""
        assert message in out
        assert out.count("\n") == 2  # the finding, the counts
        assert "1 file(s) could not be checked" in out
    else:
        assert code == 2
        assert message in err
        assert err.splitlines()[0].startswith("error: ")


@pytest.mark.parametrize(
    "content", ["", "- a\n- b\n", "just a scalar\n", "---\n- op: add\n---\n7\n"], ids=str
)
def test_documents_that_are_no_objects_are_skipped(tmp_path: Path, content: str) -> None:
    """Empty, a list (a kustomize JSON patch, .pre-commit-hooks.yaml), a scalar: no manifest."""
    path = tmp_path / "not-a-manifest.yaml"
    path.write_text(content)
    code, out, _ = run(["check", str(path)])
    assert code == 0
    assert "in 0 Dask resource(s) of 0 document(s)" in out
    assert run(["fix", str(path)])[1] == content


def test_malformed_dask_cluster_is_a_finding_not_a_crash(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(
        "apiVersion: kubernetes.dask.org/v1\nkind: DaskCluster\nmetadata: {name: x}\n"
        "spec:\n  scheduler: {spec: {containers: {name: s}}, service: {}}\n"
        "  worker: {spec: {containers: 7}}\n"
    )
    code, out, err = run(["check", str(path), "-o", "json"])
    assert code == 1
    messages = {(f["code"], f["path"]) for f in json.loads(out)["findings"]}
    assert ("DGP011", "/spec/scheduler/spec/containers") in messages
    assert ("DGP011", "/spec/worker/spec/containers") in messages
    assert err == ""


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["check", "/nonexistent/x.yaml"], "no such file or directory"),
        (["check"], "the following arguments are required: PATH"),
        (["check", "x", "-o", "xml"], "invalid choice: 'xml'"),
        (["frobnicate"], "invalid choice: 'frobnicate'"),
        (["fix", "-", "--in-place"], "--in-place cannot rewrite stdin"),
    ],
    ids=["missing-file", "no-path", "bad-format", "bad-command", "in-place-stdin"],
)
def test_usage_errors(argv: list[str], message: str) -> None:
    code, _, err = run(argv)
    assert code == 2
    assert message in err


@pytest.mark.parametrize(
    ("policy", "message"),
    [
        ("spec: {mode: sometimes}", "spec.mode: expected one of enforce, warn, audit, off"),
        ("spec: {scheduler: {gpuCount: 0}}", "spec.scheduler.gpuCount: must be at least 1"),
        ("spec: {scheduler: {gpuResource: amd.com/gpu}}", "spec.scheduler.gpuResource"),
        ("spec: {verifier: {minComputeCapability: 8}}", "spec.verifier.minComputeCapability"),
        ("spec: {colour: blue}", "spec.colour: unknown field"),
        ("spec: {namespaceSelector: {matchExpressions: [{key: a, operator: Near}]}}", "operator"),
    ],
    ids=["mode", "gpu-count", "gpu-resource", "compute-capability", "unknown-field", "selector"],
)
def test_invalid_policy_names_the_field(tmp_path: Path, policy: str, message: str) -> None:
    path = tmp_path / "p.yaml"
    path.write_text(
        "apiVersion: gpuparity.dask.org/v1alpha1\nkind: DaskGPUPolicy\n"
        f"metadata: {{name: p}}\n{policy}\n"
    )
    code, _, err = run(["check", str(EXAMPLES / "cpu-cluster.yaml"), "--policy", str(path)])
    assert code == 2
    assert message in err
    assert "invalid DaskGPUPolicy" in err


def test_nodes_file_must_hold_nodes() -> None:
    code, _, err = run(
        ["check", str(EXAMPLES / "cpu-cluster.yaml"), "--nodes", str(EXAMPLES / "policy.yaml")]
    )
    assert code == 2
    assert "no Node objects" in err


def _findings(argv: list[str]) -> list[dict[str, Any]]:
    findings: list[dict[str, Any]] = json.loads(run([*argv, "-o", "json"])[1])["findings"]
    return findings


def test_nodes_enable_placement_rules() -> None:
    without = {f["code"] for f in _findings(["check", str(EXAMPLES / "gpu-cluster-ucx.yaml")])}
    with_nodes = {
        f["code"]
        for f in _findings(
            [
                "check",
                str(EXAMPLES / "gpu-cluster-ucx.yaml"),
                "--nodes",
                str(EXAMPLES / "nodes.yaml"),
            ]
        )
    }
    assert "DGP013" not in without
    assert "DGP013" in with_nodes


def test_worker_group_checked_against_cluster_in_the_same_input() -> None:
    found = _findings(
        ["check", str(EXAMPLES / "cpu-cluster.yaml"), str(EXAMPLES / "gpu-workergroup.yaml")]
    )
    assert [f["code"] for f in found] == ["DGP015"]
    assert run(["check", str(EXAMPLES / "gpu-workergroup.yaml")])[0] == 0


def test_lines_point_into_the_right_document_of_a_stream(tmp_path: Path) -> None:
    cpu = (EXAMPLES / "cpu-cluster.yaml").read_text()
    tcp = (EXAMPLES / "gpu-cluster-tcp.yaml").read_text()
    path = tmp_path / "stream.yaml"
    path.write_text(cpu + "---\n" + tcp + "---\n" + tcp)
    found = _findings(["check", str(path)])
    offset = cpu.count("\n") + 1
    first = next(f for f in found if f["resource"]["document"] == 2)
    second = next(f for f in found if f["resource"]["document"] == 3)
    assert first["code"] == "DGP001"
    assert first["resource"]["line"] == offset + 21
    assert second["resource"]["line"] == offset + tcp.count("\n") + 1 + 21
    lines = path.read_text().splitlines()
    assert lines[first["resource"]["line"] - 1].strip() == "resources:"


# --- the verifier: review size, upgrades, flags --------------------------------------------------

GOLDEN = EXAMPLES.parent / "tests" / "fixtures" / "golden"


@pytest.mark.parametrize(
    "name", ["gpu-cluster-tcp.yaml", "gpu-cluster-ucx.yaml", "gpu-daskjob.yaml"]
)
def test_fix_adds_at_most_30_lines_per_gpu_cluster(name: str) -> None:
    """What a reviewer reads in the pull request: one line per field of what was added."""
    before = (EXAMPLES / name).read_text().splitlines()
    code, out, _ = run(["fix", str(EXAMPLES / name)])
    assert code == 0
    after = out.splitlines()
    assert after[: len(before) - 10] != after  # something was added
    added = len(after) - len(before)
    assert 0 < added <= 30, out


def test_fix_of_examples_is_idempotent(tmp_path: Path) -> None:
    for path in EXAMPLES.glob("*.yaml"):
        shutil.copy(path, tmp_path / path.name)
    assert run(["fix", "--in-place", str(tmp_path)])[0] == 0
    once = {p.name: p.read_text() for p in tmp_path.iterdir()}
    code, _, err = run(["fix", "--in-place", str(tmp_path)])
    assert code == 0
    assert err.splitlines()[0].startswith("0 file(s) fixed")
    assert {p.name: p.read_text() for p in tmp_path.iterdir()} == once


def test_check_reports_the_previous_releases_verifier_and_fix_converges(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    shutil.copy(GOLDEN / "previous-release.in.yaml", path)
    findings = _findings(["check", str(path), "--nodes", str(EXAMPLES / "nodes.yaml")])
    assert [(f["code"], f["fixable"]) for f in findings] == [("DGP018", True)]
    argv = ["fix", "-i", str(path), "--nodes", str(EXAMPLES / "nodes.yaml")]
    assert run(argv)[0] == 0
    assert _findings(["check", str(path), "--nodes", str(EXAMPLES / "nodes.yaml")]) == []
    assert run(argv)[2].startswith("0 file(s) fixed")


def test_verifier_flags_override_the_policy() -> None:
    tcp = str(EXAMPLES / "gpu-cluster-tcp.yaml")
    out = run(["fix", tcp, "--probe-registry", "registry.example.com/mirror"])[1]
    assert "image: registry.example.com/mirror/dask-gpu-parity/dask-gpu-parity-probe:" in out
    out = run(["fix", tcp, "--probe-image", "r.example/probe@sha256:" + "0" * 64])[1]
    assert "image: r.example/probe@sha256:" in out
    out = run(["fix", tcp, "--verifier", "inline", "--policy", str(EXAMPLES / "policy.yaml")])[1]
    assert "gpu-parity-probe" not in out
    assert '"""gpu-parity-check: prove that' in out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--probe-image", "r.example/probe"], "--probe-image: expected an image reference"),
        (["--probe-registry", "https://r"], "--probe-registry: expected a registry host"),
        (["--probe-image", "r/p:1", "--probe-registry", "r"], "not allowed with argument"),
        (["--verifier", "volume"], "invalid choice: 'volume'"),
    ],
    ids=["unpinned-image", "registry-url", "both", "delivery"],
)
def test_verifier_flag_errors(argv: list[str], message: str) -> None:
    code, _, err = run(["check", str(EXAMPLES / "gpu-cluster-tcp.yaml"), *argv])
    assert code == 2
    assert message in err
