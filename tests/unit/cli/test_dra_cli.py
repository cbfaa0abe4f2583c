"""``check``/``fix`` on DRA clusters: ``--device-classes``; ``--nodes`` with slices and classes."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.unit.core.dra import DRA, IMPLICIT
from tests.unit.reports import cli

SHAPE_A, SHAPE_B = str(DRA / "daskcluster-shape-a.yaml"), str(DRA / "daskcluster-shape-b.yaml")
PINNED = IMPLICIT + "gpu-580-95-5.nvidia.com"


def findings(argv: list[str]) -> list[dict[str, Any]]:
    code, out, _ = cli([*argv, "-o", "json"])
    assert code in (0, 1)
    found: list[dict[str, Any]] = json.loads(out)["findings"]
    return found


def pinned_cluster(tmp_path: Path) -> str:
    doc = yaml.safe_load((DRA / "daskcluster-shape-a.yaml").read_text())
    doc["spec"]["worker"]["spec"]["containers"][0]["resources"]["limits"] = {PINNED: "1"}
    path = tmp_path / "pinned.yaml"
    path.write_text(yaml.safe_dump(doc))
    return str(path)


def test_check_knows_nvidias_classes_without_being_given_any() -> None:
    assert {f["code"] for f in findings(["check", SHAPE_B])} == {"DGP001", "DGP009"}


def test_check_reads_device_classes_from_their_own_file(tmp_path: Path) -> None:
    path = pinned_cluster(tmp_path)
    assert [f["code"] for f in findings(["check", path])] == ["DGP027"]
    given = ["--device-classes", str(DRA / "deviceclass-pinned-580.yaml")]
    assert {f["code"] for f in findings(["check", path, *given])} == {"DGP001", "DGP009"}


def test_nodes_file_takes_nodes_slices_and_classes_listed_together(tmp_path: Path) -> None:
    listed = tmp_path / "cluster.yaml"
    objects = (DRA / "pure-dra.yaml").read_text() + "\n---\n"
    listed.write_text(objects + (DRA / "deviceclass-pinned-580.yaml").read_text())
    found = findings(["check", SHAPE_A, "--nodes", str(listed)])
    [dgp014] = [f for f in found if f["code"] == "DGP014"]
    assert f"pinned scheduler and workers to it by asking for {PINNED}" in dgp014["message"]
    assert {
        f["code"] for f in findings(["check", pinned_cluster(tmp_path), "--nodes", str(listed)])
    } == {
        "DGP001",
        "DGP009",
    }


def test_check_on_a_pure_dra_fleet_reports_the_pin_it_cannot_write() -> None:
    found = findings(["check", SHAPE_A, "--nodes", str(DRA / "pure-dra.yaml")])
    [dgp014] = [f for f in found if f["code"] == "DGP014"]
    assert dgp014["fixable"] is False
    assert "create the DeviceClass gpu-580-95-5.nvidia.com" in dgp014["message"]


def test_fix_gives_a_shape_b_scheduler_the_workers_device_class() -> None:
    code, out, _ = cli(["fix", SHAPE_B])
    assert code == 0
    fixed = yaml.safe_load(out)
    scheduler = fixed["spec"]["scheduler"]["spec"]["containers"][0]
    assert scheduler["resources"] == {"limits": {IMPLICIT + "gpu.nvidia.com": "1"}}


def test_slices_the_nodes_file_cannot_place_are_warned_about(tmp_path: Path) -> None:
    listed = yaml.safe_load((DRA / "pure-dra.yaml").read_text())
    listed["items"] = [o for o in listed["items"] if o["metadata"]["name"] != "dra-h100-0"]
    path = tmp_path / "nodes.yaml"
    path.write_text(yaml.safe_dump(listed))
    code, _, err = cli(["check", SHAPE_A, "--nodes", str(path)])
    assert code == 1
    assert err == (
        f"warning: {path}: ResourceSlice devices of node dra-h100-0 are left out: "
        "no Node dra-h100-0 was given\n"
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "apiVersion: v1\nkind: Node\nmetadata: {name: n}\n",
            "no DeviceClass objects (expected `kubectl get deviceclasses -o yaml` output)",
        ),
        (
            "apiVersion: resource.k8s.io/v1\nkind: DeviceClass\nmetadata: {}\n",
            "object 1: not a resource.k8s.io DeviceClass with a metadata.name",
        ),
        ("kind: [unclosed\n", "invalid YAML"),
    ],
    ids=["no-classes", "nameless-class", "not-yaml"],
)
def test_a_bad_device_classes_file_is_one_line_and_exit_2(
    tmp_path: Path, text: str, message: str
) -> None:
    path = tmp_path / "classes.yaml"
    path.write_text(text)
    for command in ("check", "fix"):
        code, out, err = cli([command, SHAPE_B, "--device-classes", str(path)])
        assert code == 2
        assert out == ""
        assert len(err.splitlines()) == 1
        assert message in err


def test_a_nodes_file_of_only_device_classes_is_a_usage_error() -> None:
    code, _, err = cli(["check", SHAPE_A, "--nodes", str(DRA / "deviceclasses.yaml")])
    assert code == 2
    assert "no Node objects (expected `kubectl get nodes,resourceslices,deviceclasses" in err


def test_a_nodes_pipe_is_read_once_for_its_classes_and_its_nodes(tmp_path: Path) -> None:
    fifo = tmp_path / "cluster.pipe"
    os.mkfifo(fifo)
    text = (DRA / "pure-dra.yaml").read_text() + "\n---\n"
    text += (DRA / "deviceclass-pinned-580.yaml").read_text()
    found: list[dict[str, Any]] = []

    def feed() -> None:
        with fifo.open("w") as pipe:
            pipe.write(text)

    def check() -> None:
        found.extend(findings(["check", SHAPE_A, "--nodes", str(fifo)]))

    threads = [threading.Thread(target=t, daemon=True) for t in (feed, check)]
    for thread in threads:
        thread.start()
    threads[1].join(timeout=30)
    if threads[1].is_alive():  # a second read of the pipe waits for a writer: give it EOF
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        threads[1].join(timeout=30)
        pytest.fail("check read the --nodes pipe twice")
    [dgp014] = [f for f in found if f["code"] == "DGP014"]
    assert dgp014["fixable"] is True
