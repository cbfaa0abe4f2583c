"""Every report format, for every fixture and edge case: valid, escaped, nothing lost."""

from __future__ import annotations

import io
import json
import os
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dask_gpu_parity.cli import main
from dask_gpu_parity.core.findings import Finding
from dask_gpu_parity.manifests.report import Located, render, summary
from tests.unit.helpers import EXAMPLES, ROOT
from tests.unit.reports import assert_gitlab, assert_junit, assert_sarif, cli, sarif_validator

GOLDEN = ROOT / "tests" / "fixtures" / "golden"
FIXTURES = sorted([*EXAMPLES.glob("*.yaml"), *GOLDEN.glob("*.yaml")])
TCP = (EXAMPLES / "gpu-cluster-tcp.yaml").read_text()
HOSTILE_NAME = "evil\n::error file=x.yaml::forged\x1b[2J\u202e\x00"
FORMATS = ["text", "json", "sarif", "junit", "github", "gitlab"]


@pytest.mark.parametrize("fixture", FIXTURES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_fixture_gives_valid_sarif_junit_and_gitlab(
    fixture: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(ROOT)
    rel = str(fixture.relative_to(ROOT))
    code, sarif, _ = cli(["check", rel, "-o", "sarif", "--nodes", "examples/nodes.yaml"])
    results = assert_sarif(sarif, ROOT)
    assert code == int(any(r["level"] == "error" for r in results))
    for result in results:
        assert result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == rel
    assert_junit(cli(["check", rel, "-o", "junit"])[1])
    assert_gitlab(cli(["check", rel, "-o", "gitlab"])[1])


def _edge_cases(root: Path, outside: Path) -> list[str]:
    """Files whose names and contents break naive reports; returns the paths to pass."""
    hostile = TCP.replace("name: rapids-tcp", f"name: {json.dumps(HOSTILE_NAME)}")
    names = [
        "with space.yaml",
        "hash#1.yaml",
        "per%cent.yaml",
        "ünïcödé-集群.yaml",
        "colon:first.yaml",
        "ctl\x1b[31m.yaml",
        "new\nline.yaml",
        os.fsdecode(b"latin1-\xe9.yaml"),  # a name that is not UTF-8
    ]
    folder = root / "dir with space"
    folder.mkdir()
    for name in names:
        (folder / name).write_text(TCP)
    (folder / "hostile.yaml").write_text(hostile)
    # Two DGP004 findings on one resource: two nodeSelector keys, one pointer.
    two = TCP.replace(
        "nvidia.com/gpu.product: NVIDIA-A100-SXM4-80GB",
        "nvidia.com/gpu.product: NVIDIA-A100-SXM4-80GB\n        nvidia.com/gpu.memory: '81920'",
    )
    (folder / "two-selectors.yaml").write_text(two + "---\n" + two)
    (folder / "broken.yaml").write_text("a: [unclosed\n")
    (folder / "binary.json").write_bytes(b"\x00\x01")
    (outside / "absolute path.yaml").write_text(TCP)
    return ["dir with space", str(outside / "absolute path.yaml")]


@pytest.mark.parametrize("fmt", FORMATS)
def test_edge_cases_in_every_format(
    tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
    fmt: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    work = tmp_path / "repo"
    work.mkdir()
    paths = _edge_cases(work, tmp_path_factory.mktemp("outside"))
    monkeypatch.chdir(work)
    code, out, err = cli(["check", *paths, "-o", fmt])
    assert code == 1
    assert err == ""
    assert "Traceback" not in out
    if fmt == "sarif":
        results = assert_sarif(out, work)
        codes = [r["ruleId"] for r in results]
        assert codes.count("DGP901") == 1
        assert codes.count("DGP900") == 1
        uris = {
            r["locations"][0]["physicalLocation"]["artifactLocation"].get("uri") for r in results
        }
        assert "dir%20with%20space/hash%231.yaml" in uris
        assert "dir%20with%20space/per%25cent.yaml" in uris
        assert "dir%20with%20space/colon%3Afirst.yaml" in uris
        assert "dir%20with%20space/new%0Aline.yaml" in uris
        assert "dir%20with%20space/latin1-%E9.yaml" in uris
        assert any(
            u and u.startswith("file:///") and u.endswith("absolute%20path.yaml") for u in uris
        )
        dgp004 = [r for r in results if r["ruleId"] == "DGP004"]
        assert len({r["partialFingerprints"]["dgp/v2"] for r in dgp004}) == len(dgp004)
    elif fmt == "junit":
        root = assert_junit(out)
        assert "forged" in ET.tostring(root, encoding="unicode")
    elif fmt == "gitlab":
        issues = assert_gitlab(out)
        assert {i["check_name"] for i in issues} >= {
            "dask-gpu-parity/DGP900",
            "dask-gpu-parity/DGP901",
            "dask-gpu-parity/DGP001",
        }
    elif fmt == "json":
        findings = json.loads(out)["findings"]
        assert HOSTILE_NAME in {f["resource"]["name"] for f in findings}  # data, unescaped
    else:  # text and github: one line per finding, nothing a terminal or runner would act on
        assert "\x1b" not in out
        assert "\u202e" not in out
        assert "\x00" not in out
        lines = out.splitlines()
        assert not [line for line in lines if line.startswith("::error file=x.yaml")]
        assert (
            all(line.startswith(("::", "dir with space", "/")) for line in lines[:-1])
            or fmt == "text"
        )
        if fmt == "text":
            assert "\\x1b[2J" in out
            assert lines[-1].endswith("fixable with `dask-gpu-parity fix`")


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("label", ["", "charts/app/rendered manifest.yaml"], ids=["bare", "named"])
def test_stdin_in_every_format(fmt: str, label: str, monkeypatch: pytest.MonkeyPatch) -> None:
    argv = ["check", "-", "-o", fmt] + (["--stdin-filename", label] if label else [])
    code, out, _ = cli(argv, stdin=TCP.encode(), monkeypatch=monkeypatch)
    assert code == 1
    shown = label or "<stdin>"
    if fmt == "sarif":
        results = assert_sarif_lenient(out)
        artifact = results[0]["locations"][0]["physicalLocation"]["artifactLocation"]
        if label:
            assert artifact == {
                "uri": "charts/app/rendered%20manifest.yaml",
                "uriBaseId": "%SRCROOT%",
            }
        else:
            assert artifact == {"description": {"text": "standard input"}}
    elif fmt == "junit":
        assert assert_junit(out).find(".//testcase").get("file") == shown  # type: ignore[union-attr]
    elif fmt == "gitlab":
        assert assert_gitlab(out)[0]["location"]["path"] == shown
    elif fmt in ("text", "github"):
        assert shown in out


def assert_sarif_lenient(text: str) -> list[dict]:
    """SARIF for stdin: valid; its file need not exist."""
    from tests.unit.reports import sarif_validator

    log = json.loads(text)
    sarif_validator().validate(log)
    return log["runs"][0]["results"]  # type: ignore[no-any-return]


def test_file_errors_keep_the_other_files_in_every_format(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The issue's example: a Helm template beside a manifest; also an unreadable folder."""
    shutil.copy(EXAMPLES / "gpu-cluster-tcp.yaml", tmp_path / "cluster.yaml")
    template = tmp_path / "service.yaml"
    template.write_text(
        'apiVersion: v1\nkind: Service\nmetadata:\n  name: {{ include "x.fullname" . }}\n'
        "spec:\n  ports:\n  {{- range .Values.ports }}\n  - port: {{ . }}\n  {{- end }}\n"
    )
    locked = tmp_path / "locked"
    locked.mkdir()
    real_scandir = os.scandir

    def scandir(path: object) -> object:
        if str(path).endswith("locked"):
            raise PermissionError(13, "Permission denied")
        return real_scandir(path)  # type: ignore[call-overload]

    monkeypatch.setattr(os, "scandir", scandir)
    monkeypatch.chdir(tmp_path)
    for fmt in FORMATS:
        code, out, err = cli(["check", "service.yaml", "cluster.yaml", "locked", "-o", fmt])
        assert (code, err) == (1, ""), fmt
        assert "DGP901" in out, fmt
        assert "DGP900" in out, fmt
        assert "DGP001" in out, fmt
    _, text, _ = cli(["check", "service.yaml", "cluster.yaml", "locked"])
    assert "service.yaml:8: error DGP901 invalid YAML" in text
    assert "looks like a Helm template" in text
    assert "locked: error DGP900 cannot list folder: Permission denied" in text
    assert cli(["check", "service.yaml", "--exit-zero"])[0] == 0


def test_exit_zero_keeps_usage_errors() -> None:
    code, out, _ = cli(["check", str(EXAMPLES), "--exit-zero", "-o", "json"])
    assert code == 0
    assert json.loads(out)["summary"]["errors"] > 0
    assert cli(["check", "/nonexistent", "--exit-zero"])[0] == 2


def test_broken_pipe_is_one_line_and_exit_2() -> None:
    class Closed:
        def write(self, _text: str) -> int:
            raise BrokenPipeError(32, "Broken pipe")

        def flush(self) -> None:
            pass

    err = io.StringIO()
    assert main(["check", str(EXAMPLES)], out=Closed(), err=err) == 2  # type: ignore[arg-type]
    assert err.getvalue() == "error: cannot write the output: Broken pipe\n"


_TEXTS = st.text(
    st.characters(codec="utf-8", exclude_categories=("Cs",))
    | st.sampled_from(
        ["\n", "\r", "\x1b", "\x00", "\u2028", "\u202e", "%", ",", ":", "#", "]", ">", "&", "<"]
    ),
    max_size=40,
)


# Each example validates SARIF against the full schema: the profile's count, at most 200.
@settings(max_examples=min(settings().max_examples, 200))
@given(
    names=st.lists(st.tuples(_TEXTS, _TEXTS, _TEXTS, st.integers(0, 10**6)), min_size=1, max_size=4)
)
def test_any_name_or_message_keeps_every_format_well_formed(
    names: list[tuple[str, str, str, int]],
) -> None:
    items = [
        Located(
            finding=Finding.of("DGP001", "/spec", message or "m"),
            kind="DaskCluster",
            name=name,
            namespace="ns",
            file=file or "f.yaml",
            document=1,
            line=line,
            path=file or "f.yaml",
        )
        for name, message, file, line in names
    ]
    counts = summary(items, len(items), len(items), len(items))
    text = render("text", items, counts)
    assert text.count("\n") == len(items) + 1
    assert all(line.isprintable() for line in text.splitlines())
    github = render("github", items, counts)
    assert github.count("\n") == len(items)
    assert all(line.startswith("::error file=") for line in github.splitlines())
    assert_junit(render("junit", items, counts, [(i.file, i.resource) for i in items]))
    log = json.loads(render("sarif", items, counts))
    sarif_validator().validate(log)
    assert len({r["partialFingerprints"]["dgp/v2"] for r in log["runs"][0]["results"]}) == len(
        items
    )
    assert_gitlab(render("gitlab", items, counts))
