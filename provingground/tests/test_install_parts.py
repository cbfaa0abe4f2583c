"""The install path's pure parts: references, image identity, the CPU cluster, peer results."""

from __future__ import annotations

from pathlib import Path

import pytest

from provingground.binaries import BinariesMissingError, StaleCacheError, find_binaries
from provingground.install import Helm, InstallError, split_reference
from provingground.install_demo import benign_mismatch, cpu_dask_cluster
from provingground.peersuite import compare, outcomes
from provingground.realnode import BuiltImages

DIGEST = "sha256:" + "a" * 64
OTHER = "sha256:" + "b" * 64


@pytest.mark.parametrize(
    ("reference", "expected"),
    [
        # The dask-kubernetes chart's default repository, with the tag its sdist's chart carries.
        (
            "ghcr.io/dask/dask-kubernetes-operator:set-by-chartpress",
            ("ghcr.io/dask/dask-kubernetes-operator", "set-by-chartpress"),
        ),
        (
            "localhost:5000/provingground/dask:2026.8.0",
            ("localhost:5000/provingground/dask", "2026.8.0"),
        ),
    ],
)
def test_a_reference_splits_into_repository_and_tag(
    reference: str, expected: tuple[str, str]
) -> None:
    assert split_reference(reference) == expected


def test_a_reference_without_a_tag_is_refused() -> None:
    with pytest.raises(ValueError, match="has no tag"):
        split_reference("localhost:5000/provingground/dask")


def test_an_image_id_matches_by_config_or_repo_digest() -> None:
    images = BuiltImages("op:1", "probe:1", "dop:1", "dask:1", {"op:1": frozenset({DIGEST})})
    assert images.matches("op:1", DIGEST)  # containerd: an imported image's ID
    assert images.matches("op:1", f"ghcr.io/x/op@{DIGEST}")  # a pulled image's repo digest
    assert not images.matches("op:1", OTHER)
    assert not images.matches("dask:1", DIGEST)  # another reference's digest


def test_the_cpu_cluster_runs_the_given_image_on_the_given_node() -> None:
    doc = cpu_dask_cluster("cpu-x", "localhost/provingground/dask:2026.8.0", "real-node")
    assert doc["metadata"]["name"] == "cpu-x"
    assert doc["spec"]["scheduler"]["service"]["selector"]["dask.org/cluster-name"] == "cpu-x"
    for role in ("scheduler", "worker"):
        spec = doc["spec"][role]["spec"]
        assert spec["nodeSelector"] == {"kubernetes.io/hostname": "real-node"}
        (container,) = spec["containers"]
        assert container["image"] == "localhost/provingground/dask:2026.8.0"
        assert container["imagePullPolicy"] == "IfNotPresent"
        assert "nvidia.com/gpu" not in str(container["resources"])  # a CPU cluster


@pytest.mark.parametrize(
    ("row", "benign"),
    [
        # distributed's version table, as the demo's Client warns with it
        ("| python  | 3.11.7.final.0 | 3.11.2.final.0 | 3.11.2.final.0 |", True),
        ("| numpy   | 2.4.6          | None           | None           |", True),
        ("| dask    | 2026.8.0       | 2026.7.0       | 2026.7.0       |", False),
        ("| lz4     | 4.0            | None           | 4.1            |", False),
    ],
)
def test_only_the_python_patch_release_and_client_only_packages_are_no_mismatch(
    row: str, benign: bool
) -> None:
    assert benign_mismatch(row) is benign


def test_peer_results_are_read_from_junit_and_differences_marked(tmp_path: Path) -> None:
    junit = tmp_path / "junit.xml"
    junit.write_text(
        '<testsuites><testsuite name="pytest">'
        '<testcase classname="controller.test_controller" name="test_a"/>'
        '<testcase classname="controller.test_controller" name="test_b">'
        '<failure message="AssertionError: boom&#10;more">trace</failure></testcase>'
        '<testcase classname="controller.test_controller" name="test_c">'
        '<skipped message="Flaky in CI"/></testcase>'
        "</testsuite></testsuites>"
    )
    found = outcomes(junit)
    assert found == {
        "controller.test_controller::test_a": "passed",
        "controller.test_controller::test_b": "failed: AssertionError: boom",
        "controller.test_controller::test_c": "skipped: Flaky in CI",
    }
    table = compare(found, {**found, "controller.test_controller::test_b": "passed"})
    rows = table.splitlines()[2:]
    assert [r.endswith("| yes |") for r in rows] == [True, False, True]


def test_a_failed_helm_step_is_an_install_error_naming_the_step_and_helms_reason(
    tmp_path: Path,
) -> None:
    try:
        binary = find_binaries().helm
    except (BinariesMissingError, StaleCacheError) as exc:
        pytest.skip(str(exc))
    # No cluster behind the kubeconfig: helm says it cannot reach one (helm status needs the API).
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\nclusters: [{name: c, cluster: {server: "
        "'https://127.0.0.1:1'}}]\ncontexts: [{name: c, context: {cluster: c}}]\n"
        "current-context: c\n"
    )
    helm = Helm(binary, tmp_path / "home", kubeconfig)
    with pytest.raises(InstallError, match=r"^helm status dask-gpu-parity failed \(1\): \S"):
        helm.run("status", "dask-gpu-parity", "--namespace", "dgp-system", timeout=60)
    assert "version.BuildInfo" in helm.run("version")
