"""The chart as a release publishes it: Artifact Hub metadata, and image digests pinned.

Artifact Hub's annotations are checked against its documentation
(https://artifacthub.io/docs/topics/annotations/helm/, the repository's
docs/helm_annotations.md) and against the chart itself: the images it lists are values.yaml's,
built for the platforms the release workflow builds. The pinned chart is the chart after
``scripts/release.py pin-digests``, rendered by helm, then packaged and pushed by helm to an OCI
registry on loopback (crane's, ``make crane``) and installed back from it by digest.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from provingground.pytest_plugin import skip_or_fail

from .helpers import CHART, NAMESPACE, RELEASE, REPO, Helm, find, one

# Artifact Hub's Helm annotations, as its documentation lists them.
ARTIFACTHUB_ANNOTATIONS = {
    "alternativeName",
    "category",
    "changes",
    "containsSecurityUpdates",
    "crds",
    "crdsExamples",
    "images",
    "license",
    "links",
    "maintainers",
    "operator",
    "operatorCapabilities",
    "prerelease",
    "recommendations",
    "screenshots",
    "signKey",
}
CATEGORIES = {
    "ai-machine-learning",
    "database",
    "integration-delivery",
    "monitoring-logging",
    "networking",
    "security",
    "storage",
    "streaming-messaging",
}
CAPABILITIES = {
    "basic install",
    "seamless upgrades",
    "full lifecycle",
    "deep insights",
    "auto pilot",
}
CHANGE_KINDS = {"added", "changed", "deprecated", "removed", "fixed", "security"}
# The example digests of the OCI image specification's manifest (manifest.md).
OPERATOR_DIGEST = "sha256:b5b2b2c507a0944348e0303114d8d93aaaa081732b86451d9bce1f432a537bc7"
PROBE_DIGEST = "sha256:9834876dcfb05cb167a5c24953eba58c4ac89b1adf57f28f2f9d09af107ee8f0"


def _chart() -> dict[str, Any]:
    return yaml.safe_load((CHART / "Chart.yaml").read_text())


def _annotation(name: str) -> Any:
    """An annotation's value: a YAML string for the lists, a plain string for the rest."""
    return yaml.safe_load(_chart()["annotations"][f"artifacthub.io/{name}"])


def _workflow_platforms() -> list[str]:
    workflow = yaml.safe_load((REPO / ".github" / "workflows" / "release.yml").read_text())
    return str(workflow["env"]["PLATFORMS"]).split(",")


def test_artifacthub_images_are_the_images_values_yaml_deploys() -> None:
    """Artifact Hub scans the images listed, so they must be the ones the chart runs: each
    image of values.yaml with its default tag, the chart's appVersion, for every platform the
    release builds."""
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    version = _chart()["appVersion"]
    deployed = [values["image"], values["probeImage"]]
    assert all(image["tag"] == "" for image in deployed)  # the tag defaults to appVersion
    listed = _annotation("images")
    assert [entry["image"] for entry in listed] == [
        f"{image['repository']}:{version}" for image in deployed
    ]
    assert [entry["name"] for entry in listed] == [
        image["repository"].rsplit("/", 1)[1] for image in deployed
    ]
    for entry in listed:
        assert entry["platforms"] == _workflow_platforms(), entry["name"]
        assert not entry.get("whitelisted", False), f"{entry['name']} is left out of scanning"


def test_artifacthub_annotations_are_documented_ones_with_valid_values() -> None:
    annotations = _chart()["annotations"]
    assert {key.removeprefix("artifacthub.io/") for key in annotations} <= ARTIFACTHUB_ANNOTATIONS
    assert all(isinstance(value, str) for value in annotations.values())  # strings, as Helm wants
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    assert _annotation("license") == project["license"]
    assert _annotation("category") in CATEGORIES
    assert str(_annotation("operatorCapabilities")).lower() in CAPABILITIES
    for flag in ("operator", "prerelease", "containsSecurityUpdates"):
        assert annotations[f"artifacthub.io/{flag}"] in ("true", "false"), flag
    assert {change["kind"] for change in _annotation("changes")} <= CHANGE_KINDS
    links = _annotation("links")
    assert all(set(link) == {"name", "url"} for link in links)
    assert all(link["url"].startswith("https://") for link in links)
    assert "support" in {link["name"] for link in links}  # Artifact Hub highlights it
    assert "artifacthub.io/signKey" not in annotations  # a PGP key URL; the chart uses cosign


def test_artifacthub_crds_are_the_charts_crds() -> None:
    crds = [yaml.safe_load(path.read_text()) for path in sorted((CHART / "crds").glob("*.yaml"))]
    listed = _annotation("crds")
    assert [(c["kind"], c["name"]) for c in listed] == [
        (crd["spec"]["names"]["kind"], crd["metadata"]["name"]) for crd in crds
    ]
    for entry, crd in zip(listed, crds, strict=True):
        served = [v["name"] for v in crd["spec"]["versions"] if v.get("storage")]
        assert [entry["version"]] == served
        assert entry["displayName"]
        assert entry["description"]
    for example in _annotation("crdsExamples"):
        group, version = example["apiVersion"].split("/")
        assert (example["kind"], group, version) in {
            (c["spec"]["names"]["kind"], c["spec"]["group"], entry["version"])
            for c, entry in zip(crds, listed, strict=True)
        }


# -- The pinned chart, rendered ---------------------------------------------------------------


@pytest.fixture(scope="module")
def pinned_chart(tmp_path_factory: pytest.TempPathFactory) -> Path:
    chart = Path(shutil.copytree(CHART, tmp_path_factory.mktemp("pinned") / "dask-gpu-parity"))
    script = [sys.executable, str(REPO / "scripts" / "release.py"), "pin-digests"]
    digests = ["--operator", OPERATOR_DIGEST, "--probe", PROBE_DIGEST]
    pinned = subprocess.run(
        [*script, "--chart", str(chart), *digests], capture_output=True, text=True, check=False
    )
    assert pinned.returncode == 0, pinned.stderr
    return chart


def _render(helm: Helm, chart: Path, *sets: str) -> list[dict[str, Any]]:
    args = ["template", RELEASE, str(chart), "--namespace", NAMESPACE]
    for value in sets:
        args += ["--set", value]
    return [d for d in yaml.safe_load_all(helm.run(*args).stdout) if d]


def test_the_pinned_chart_runs_and_names_both_images_by_digest(
    helm: Helm, pinned_chart: Path
) -> None:
    version = _chart()["appVersion"]
    operator = f"ghcr.io/dask-gpu-parity/dask-gpu-parity:{version}@{OPERATOR_DIGEST}"
    probe = f"ghcr.io/dask-gpu-parity/dask-gpu-parity-probe:{version}@{PROBE_DIGEST}"
    objects = _render(helm, pinned_chart)
    deployments = find(objects, "Deployment")
    assert len(deployments) == 2  # the webhooks and the drift watch
    for deployment in deployments:
        pod = deployment["spec"]["template"]["spec"]
        images = [c["image"] for c in pod.get("initContainers", []) + pod["containers"]]
        assert images, deployment["metadata"]["name"]
        assert set(images) == {operator}, deployment["metadata"]["name"]
    policy = one(objects, "DaskGPUPolicy", RELEASE)
    assert policy["spec"]["verifier"]["image"] == probe
    helm.run("lint", "--strict", "--quiet", str(pinned_chart))


def test_the_unpinned_chart_names_the_images_by_tag_only(helm: Helm) -> None:
    """The digests come from the release, never from the repository's chart."""
    rendered = helm.run("template", RELEASE, str(CHART), "--namespace", NAMESPACE).stdout
    assert "@sha256:" not in rendered


# -- Pushed to an OCI registry and installed back by digest, as docs/releasing.md does ---------


def _crane() -> Path:
    """crane at the Makefile's version (`make crane`), from the cache beside helm's."""
    version = re.search(r"^CRANE_VERSION := (\S+)$", (REPO / "Makefile").read_text(), re.M)
    assert version is not None
    cache = Path(os.environ.get("DGP_CACHE") or Path.home() / ".cache" / "dask-gpu-parity")
    crane = cache / "bin" / f"crane-{version[1]}" / "crane"
    if not crane.is_file():
        skip_or_fail(f"{crane} not found: run `make crane`", "`make test` builds it")
    return crane


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """crane's in-memory OCI registry on a free loopback port, for this module's tests."""
    crane = _crane()
    log = tmp_path_factory.mktemp("registry") / "registry.log"  # one line per request
    with log.open("w") as out:
        server = subprocess.Popen(
            [str(crane), "registry", "serve", "--address", "127.0.0.1:0"], stderr=out
        )
    try:
        deadline = time.monotonic() + 10
        while not (port := re.search(r"serving on port (\d+)", log.read_text())):
            assert server.poll() is None, f"crane registry serve stopped: {log.read_text()}"
            assert time.monotonic() < deadline, "crane registry serve did not start in 10 s"
            time.sleep(0.05)
        yield f"127.0.0.1:{port[1]}"
    finally:
        server.terminate()
        server.wait(timeout=10)


def _workflow_push_step() -> str:
    workflow = yaml.safe_load((REPO / ".github" / "workflows" / "release.yml").read_text())
    (step,) = [s for s in workflow["jobs"]["chart"]["steps"] if s.get("name") == "Push the chart"]
    return str(step["run"])


def test_the_pinned_chart_pushed_as_oci_installs_back_by_the_digest_helm_printed(
    helm: Helm, pinned_chart: Path, registry: str, tmp_path: Path
) -> None:
    """What the chart job does after pinning (package, push, read the digest the way the push step
    reads it), then what a user does (crane digest, helm template and show values by digest)."""
    version = _chart()["version"]
    helm.run("package", str(pinned_chart), "--destination", str(tmp_path))
    package = tmp_path / f"dask-gpu-parity-{version}.tgz"
    pushed = helm.run("push", str(package), f"oci://{registry}/charts", "--plain-http")
    log = tmp_path / "push.log"
    log.write_text(pushed.stdout + pushed.stderr)
    (sed,) = [line.strip() for line in _workflow_push_step().splitlines() if "sed -n" in line]
    command = sed.removeprefix("digest=$(").removesuffix(")").replace("push.log", str(log))
    digest = subprocess.run(
        ["bash", "-c", command], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert re.fullmatch(r"sha256:[0-9a-f]{64}", digest), log.read_text()
    crane = [str(_crane()), "digest", "--insecure", f"{registry}/charts/dask-gpu-parity:{version}"]
    assert (
        subprocess.run(crane, capture_output=True, text=True, check=True).stdout.strip() == digest
    )
    reference = f"oci://{registry}/charts/dask-gpu-parity@{digest}"
    rendered = helm.run("template", RELEASE, reference, "--namespace", NAMESPACE, "--plain-http")
    images = set(re.findall(r"image: \"?([^\s\"]+)", rendered.stdout))
    app = _chart()["appVersion"]
    assert images == {
        f"ghcr.io/dask-gpu-parity/dask-gpu-parity:{app}@{OPERATOR_DIGEST}",
        f"ghcr.io/dask-gpu-parity/dask-gpu-parity-probe:{app}@{PROBE_DIGEST}",
    }
    values = yaml.safe_load(helm.run("show", "values", reference, "--plain-http").stdout)
    assert (values["image"]["digest"], values["probeImage"]["digest"]) == (
        OPERATOR_DIGEST,
        PROBE_DIGEST,
    )
    missing = reference[: -len(digest)] + "sha256:" + "0" * 64
    absent = helm.run("template", RELEASE, missing, "--plain-http", check=False)
    assert absent.returncode != 0
    assert "not found" in absent.stderr
