"""Published Dask manifests and GPU node dumps against the verdicts written first in EXPECTED.md.

Each case runs the CLI as a user would (``check -o json``, ``fix``) on a file from
``tests/fixtures/realworld`` and asserts the exit code, the finding codes that must and must not
appear, and that ``fix`` converges, is idempotent and leaves CPU-only manifests byte for byte.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from dask_gpu_parity.core.findings import RULES
from tests.unit.reports import cli

CORPUS = Path(__file__).resolve().parents[2] / "fixtures" / "realworld"
MANIFESTS = sorted(p.name for p in CORPUS.glob("*.yaml") if not p.name.startswith("nodes-"))
NODE_DUMPS = sorted(p.name for p in CORPUS.glob("nodes-*"))
ALL = frozenset(RULES)
HEADER_END = (
    "# -- end of source header; the published content follows unchanged except as Extracted says --"
)
# Nothing in the corpus has UCX, GPU tolerations, nvidia.com/* selectors, runtimeClassName, integer
# quantities or fields newer than the CRDs' PodSpec: these never appear (EXPECTED.md, Conventions).
NEVER = frozenset({"DGP004", "DGP005", "DGP006", "DGP007", "DGP008", "DGP010", "DGP012"})
INVENTORY_CODES = frozenset({"DGP013", "DGP014", "DGP020", "DGP021", "DGP022", "DGP023"})


@dataclass(frozen=True)
class Verdict:
    """What ``check`` must say about one input (EXPECTED.md)."""

    exit: int
    must: frozenset[str] = frozenset()
    must_not: frozenset[str] = frozenset()
    only: bool = False  # no code but those in ``must``
    unchanged: bool = False  # ``fix`` writes the input back byte for byte
    marks: tuple[Any, ...] = field(default=())


def _codes(*codes: str) -> frozenset[str]:
    return frozenset(codes)


def cpu(marks: tuple[Any, ...] = ()) -> Verdict:
    """A CPU-only manifest that the CRDs accept: no finding, exit 0, fix unchanged."""
    return Verdict(0, only=True, unchanged=True, marks=marks)


def odd(*extra_must_not: str) -> Verdict:
    """A published placeholder shape: schema errors only, fix unchanged."""
    return Verdict(
        1,
        must=_codes("DGP011"),
        must_not=_codes("DGP001", "DGP009", "DGP017", *extra_must_not) | NEVER,
        unchanged=True,
    )


NO_GPU_SCHEDULER = Verdict(
    1,
    must=_codes("DGP001", "DGP009"),
    must_not=_codes("DGP002", "DGP003", "DGP011") | INVENTORY_CODES | NEVER,
)
GPU_SCHEDULER = Verdict(0, must=_codes("DGP009"), only=True)

EXPECTED: dict[str, Verdict] = {
    "dk-simplecluster.yaml": cpu(),
    "dk-simplejob.yaml": cpu(),
    "dk-failedjob.yaml": cpu(),
    "dk-simpleworkergroup.yaml": cpu(),
    "dk-2022.5.0-simplecluster.yaml": cpu(),
    "dk-2022.5.0-simpleworkergroup.yaml": cpu(),
    "dk-2022.10.0-simplejob.yaml": cpu(),
    "dk-docs-daskcluster.yaml": cpu(),
    "dk-docs-daskworkergroup.yaml": cpu(),
    "dk-docs-daskjob.yaml": cpu(),
    "dk-docs-migrating.yaml": cpu(),
    # Changed after the first run (EXPECTED.md): the published probes indent initialDelaySeconds and
    # periodSeconds under tcpSocket, where the API server prunes them.
    "dk-2022.5.0-docs-daskcluster.yaml": Verdict(
        0, must=_codes("DGP012"), only=True, unchanged=True
    ),
    "dk-2022.5.0-docs-daskworkergroup.yaml": cpu(),
    "dk-2023.1.0-docs-daskcluster.yaml": cpu(),
    "dk-2023.1.0-docs-daskjob.yaml": cpu(),
    "dk-docs-daskautoscaler.yaml": cpu(),
    "lsdb-kubernetes-deployment.yaml": cpu(),
    "dk-docs-annotations.yaml": odd(),
    "dk-docs-reference-daskcluster.yaml": odd(),
    "dk-docs-reference-daskworkergroup.yaml": odd("DGP015"),
    "dk-docs-reference-daskjob.yaml": odd("DGP016"),
    "rapids-2022-dask-operator-metadata.yaml": odd(),
    "rapids-2022-dask-operator.yaml": NO_GPU_SCHEDULER,
    "rapids-v24.04.00-dask-operator.yaml": NO_GPU_SCHEDULER,
    "rapids-v24.12.00-dask-operator.yaml": NO_GPU_SCHEDULER,
    "rapids-v25.06.00-dask-operator.yaml": NO_GPU_SCHEDULER,
    "rapids-v26.04.00-dask-operator.yaml": NO_GPU_SCHEDULER,
    "rapids-v24.12.00-scheduler-gpu-optimization.yaml": GPU_SCHEDULER,
    "rapids-v26.04.00-scheduler-gpu-optimization.yaml": GPU_SCHEDULER,
    "rapids-v24.12.00-colocate-workers.yaml": GPU_SCHEDULER,
    "rapids-v26.04.00-colocate-workers.yaml": GPU_SCHEDULER,
}

_PLACEMENT = INVENTORY_CODES | NEVER
WITH_NODES: dict[tuple[str, str], Verdict] = {
    ("rapids-v24.12.00-dask-operator.yaml", "nodes-device-plugin-pr503-v100.yaml"): Verdict(
        1, _codes("DGP001", "DGP009", "DGP020"), _PLACEMENT - {"DGP020"}
    ),
    ("rapids-v26.04.00-colocate-workers.yaml", "nodes-device-plugin-pr503-v100.yaml"): Verdict(
        1, _codes("DGP009", "DGP020"), (_PLACEMENT - {"DGP020"}) | {"DGP001"}
    ),
    ("rapids-v25.06.00-dask-operator.yaml", "nodes-gfd-readme-a100.yaml"): Verdict(
        1, _codes("DGP001", "DGP009", "DGP020"), _PLACEMENT - {"DGP020"}
    ),
    ("rapids-2022-dask-operator.yaml", "nodes-gfd-readme-a100.yaml"): Verdict(
        1, _codes("DGP001", "DGP009", "DGP021"), _PLACEMENT - {"DGP021"}
    ),
    ("rapids-v26.04.00-dask-operator.yaml", "nodes-podman-desktop-7778.yaml"): Verdict(
        1, _codes("DGP001", "DGP009", "DGP023"), _PLACEMENT - {"DGP023"}
    ),
    # Changed after the capacity rule (EXPECTED.md): one GPU, taken by the scheduler; 2 workers.
    ("rapids-v26.04.00-scheduler-gpu-optimization.yaml", "nodes-podman-desktop-7778.yaml"): Verdict(
        1, _codes("DGP009", "DGP023", "DGP026"), (_PLACEMENT - {"DGP023"}) | {"DGP001"}
    ),
    ("rapids-v26.04.00-dask-operator.yaml", "nodes-gke-l4-llmkube.yaml"): Verdict(
        1, _codes("DGP001", "DGP009", "DGP023"), _PLACEMENT - {"DGP023"}
    ),
    ("dk-simplecluster.yaml", "nodes-gke-l4-llmkube.yaml"): Verdict(0, only=True, unchanged=True),
    ("lsdb-kubernetes-deployment.yaml", "nodes-device-plugin-pr503-v100.yaml"): Verdict(
        0, only=True, unchanged=True
    ),
}
BAD_NODES = [("rapids-v26.04.00-dask-operator.yaml", "nodes-gfd-readme-verbatim.txt")]


def _params(table: dict[Any, Verdict], ids: Any) -> list[Any]:
    return [
        pytest.param(key, verdict, id=ids(key), marks=verdict.marks)
        for key, verdict in table.items()
    ]


def _check(argv: list[str]) -> tuple[int, list[dict[str, Any]]]:
    code, out, err = cli(["check", *argv, "-o", "json"])
    assert "Traceback" not in err, err
    return code, json.loads(out)["findings"]


def _assert_verdict(code: int, findings: list[dict[str, Any]], verdict: Verdict) -> None:
    got = {f["code"] for f in findings}
    summary = sorted((f["code"], f["path"]) for f in findings)
    assert code == verdict.exit, summary
    assert verdict.must <= got, summary
    assert not (verdict.must_not & got), summary
    if verdict.only:
        assert got == verdict.must, summary


def _fix(path: Path, extra: list[str]) -> str:
    code, out, err = cli(["fix", str(path), *extra])
    # Errors fix cannot resolve are counted on stderr in one line; the exit code stays 0.
    assert code == 0, err
    assert len(err.splitlines()) <= 1, err
    assert "Traceback" not in err
    return out


def _assert_fix_converges(src: Path, verdict: Verdict, tmp_path: Path, extra: list[str]) -> str:
    fixed = _fix(src, extra)
    if verdict.unchanged:
        assert fixed == src.read_text(encoding="utf-8")
    once = tmp_path / src.name
    once.write_text(fixed, encoding="utf-8")
    _, findings = _check([str(once), *extra])
    assert [f for f in findings if f["fixable"]] == []
    assert _fix(once, extra) == fixed
    return fixed


def test_every_manifest_has_a_written_verdict() -> None:
    assert set(EXPECTED) == set(MANIFESTS)
    assert len(MANIFESTS) >= 30
    assert 4 <= len(NODE_DUMPS) <= 6
    assert {n for _, n in [*WITH_NODES, *BAD_NODES]} == set(NODE_DUMPS)


@pytest.mark.parametrize("name", [*MANIFESTS, *NODE_DUMPS])
def test_fixture_opens_with_its_source(name: str) -> None:
    lines = (CORPUS / name).read_text(encoding="utf-8").splitlines()
    end = lines.index(HEADER_END)
    header = "\n".join(lines[:end])
    fields = re.findall(r"^# (Source|Commit|URL|Extracted): (.+)$", header, re.M)
    assert [k for k, _ in fields] == ["Source", "Commit", "URL", "Extracted"]
    values = dict(fields)
    assert re.match(r"[\w.-]+/[\w.-]+[ ,]", values["Source"])
    assert re.fullmatch(r"[0-9a-f]{40}( \(tag \S+\))?|none \(.+\)", values["Commit"])
    assert values["URL"].startswith("https://github.com/")
    if not values["Commit"].startswith("none"):
        assert values["Commit"][:40] in values["URL"]
    assert all(line.startswith("#") for line in lines[:end])
    assert name in (CORPUS / "SOURCES.md").read_text(encoding="utf-8")


@pytest.mark.parametrize(("name", "verdict"), _params(EXPECTED, str))
def test_check_gives_the_written_verdict(name: str, verdict: Verdict) -> None:
    code, findings = _check([str(CORPUS / name)])
    _assert_verdict(code, findings, verdict)


@pytest.mark.parametrize(("name", "verdict"), _params(EXPECTED, str))
def test_fix_converges_is_idempotent_and_leaves_cpu_manifests_alone(
    name: str, verdict: Verdict, tmp_path: Path
) -> None:
    _assert_fix_converges(CORPUS / name, verdict, tmp_path, [])


@pytest.mark.parametrize(
    "name", [n for n, v in EXPECTED.items() if "DGP001" in v.must or v is GPU_SCHEDULER]
)
def test_fix_gives_the_scheduler_one_gpu_as_a_string_and_the_verifier(name: str) -> None:
    src = CORPUS / name
    (before,) = yaml.safe_load_all(src.read_text(encoding="utf-8"))
    (after,) = yaml.safe_load_all(_fix(src, []))
    pod = after["spec"]["scheduler"]["spec"]
    (container,) = pod["containers"]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert "requests" not in container["resources"]
    assert container["image"] == before["spec"]["scheduler"]["spec"]["containers"][0]["image"]
    assert "gpu-parity-check" in [c["name"] for c in pod["initContainers"]]
    assert after["spec"]["worker"] == before["spec"]["worker"]
    assert pod.get("affinity") == before["spec"]["scheduler"]["spec"].get("affinity")


@pytest.mark.parametrize(("pair", "verdict"), _params(WITH_NODES, lambda k: f"{k[0]}--{k[1]}"))
def test_check_with_nodes_gives_the_written_verdict(
    pair: tuple[str, str], verdict: Verdict
) -> None:
    name, nodes = pair
    code, findings = _check([str(CORPUS / name), "--nodes", str(CORPUS / nodes)])
    _assert_verdict(code, findings, verdict)


@pytest.mark.parametrize(("pair", "verdict"), _params(WITH_NODES, lambda k: f"{k[0]}--{k[1]}"))
def test_fix_with_nodes_converges(pair: tuple[str, str], verdict: Verdict, tmp_path: Path) -> None:
    name, nodes = pair
    _assert_fix_converges(CORPUS / name, verdict, tmp_path, ["--nodes", str(CORPUS / nodes)])


@pytest.mark.parametrize("pair", BAD_NODES, ids=lambda k: f"{k[0]}--{k[1]}")
def test_a_node_dump_published_with_elisions_is_one_line_and_exit_2(pair: tuple[str, str]) -> None:
    name, nodes = pair
    code, out, err = cli(["check", str(CORPUS / name), "--nodes", str(CORPUS / nodes)])
    assert code == 2
    assert out == ""
    assert len(err.strip().splitlines()) == 1
    assert "Traceback" not in err


@pytest.mark.parametrize("name", [n for n, v in EXPECTED.items() if v is NO_GPU_SCHEDULER])
def test_a_scheduler_without_gpu_is_a_fixable_error_at_its_resources(name: str) -> None:
    _, findings = _check([str(CORPUS / name)])
    (finding,) = [f for f in findings if f["code"] == "DGP001"]
    assert finding["path"] == "/spec/scheduler/spec/containers/0/resources"
    assert (finding["severity"], finding["fixable"]) == ("error", True)


MAJOR_ONLY_TAG = [
    ("rapids-v26.04.00-colocate-workers.yaml", "nodes-device-plugin-pr503-v100.yaml", "DGP020"),
    ("rapids-v26.04.00-dask-operator.yaml", "nodes-podman-desktop-7778.yaml", "DGP023"),
    ("rapids-v26.04.00-dask-operator.yaml", "nodes-gke-l4-llmkube.yaml", "DGP023"),
]


@pytest.mark.parametrize(
    ("name", "nodes", "code"),
    [pytest.param(*case, id=f"{case[0]}--{case[1]}") for case in MAJOR_ONLY_TAG],
)
def test_a_major_only_image_tag_is_named_as_its_major(name: str, nodes: str, code: str) -> None:
    """``…/base:26.04-cuda12-py3.13`` says CUDA 12, not 12.0 (docs/findings.md, DGP020)."""
    _, findings = _check([str(CORPUS / name), "--nodes", str(CORPUS / nodes)])
    (finding,) = [f for f in findings if f["code"] == code]
    assert "cuda12-py3.13" in finding["message"]
    assert "CUDA 12" in finding["message"]
    assert "12.0" not in finding["message"]


def test_the_folder_gives_the_union_of_its_files() -> None:
    code, findings = _check([str(CORPUS)])
    got = sorted((Path(f["resource"]["file"]).name, f["code"], f["path"]) for f in findings)
    want: list[tuple[str, str, str]] = []
    for name in MANIFESTS:
        want += [(name, f["code"], f["path"]) for f in _check([str(CORPUS / name)])[1]]
    assert code == 1
    assert got == sorted(want)
