"""scripts/release.py, the release workflow's tag check and digest pinning, on copies of the chart.

The digests are the example digests of the OCI image specification's manifest
(https://github.com/opencontainers/image-spec/blob/main/manifest.md, "Example Image Manifest"):
``sha256:`` and 64 lowercase hex digits, as registries return them.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import sys
import tomllib
from pathlib import Path
from types import ModuleType

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
CHART = ROOT / "charts" / "dask-gpu-parity"
OPERATOR = "sha256:b5b2b2c507a0944348e0303114d8d93aaaa081732b86451d9bce1f432a537bc7"
PROBE = "sha256:9834876dcfb05cb167a5c24953eba58c4ac89b1adf57f28f2f9d09af107ee8f0"
LATER = "sha256:3c3a4604a545cdc127456d94e421cd355bca5b528f4a9c1905b15da2eb4a4c6b"
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("release_script", ROOT / "scripts" / "release.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


release = _load()


@pytest.fixture
def chart(tmp_path: Path) -> Path:
    return Path(shutil.copytree(CHART, tmp_path / "dask-gpu-parity"))


def _files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir()) if p.is_file()}


def _pin(chart: Path, operator: str = OPERATOR, probe: str = PROBE) -> int:
    return release.main(
        ["pin-digests", "--chart", str(chart), "--operator", operator, "--probe", probe]
    )


def _annotation_images(chart: Path) -> dict[str, str]:
    meta = yaml.safe_load((chart / "Chart.yaml").read_text())
    return {
        i["name"]: i["image"] for i in yaml.safe_load(meta["annotations"]["artifacthub.io/images"])
    }


def test_pinning_changes_the_two_digests_and_the_two_annotation_images_and_nothing_else(
    chart: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = {
        name: (chart / name).read_text().splitlines() for name in ("values.yaml", "Chart.yaml")
    }
    assert _pin(chart) == 0
    after = {
        name: (chart / name).read_text().splitlines() for name in ("values.yaml", "Chart.yaml")
    }
    changed = {
        name: [(old, new) for old, new in zip(before[name], after[name], strict=True) if old != new]
        for name in before
    }
    assert changed["values.yaml"] == [
        ('  digest: ""', f'  digest: "{OPERATOR}"'),
        ('  digest: ""', f'  digest: "{PROBE}"'),
    ]
    operator = f"ghcr.io/dask-gpu-parity/dask-gpu-parity:{VERSION}"
    probe = f"ghcr.io/dask-gpu-parity/dask-gpu-parity-probe:{VERSION}"
    assert changed["Chart.yaml"] == [
        (f"      image: {operator}", f"      image: {operator}@{OPERATOR}"),
        (f"      image: {probe}", f"      image: {probe}@{PROBE}"),
    ]
    values = yaml.safe_load((chart / "values.yaml").read_text())
    assert (values["image"]["digest"], values["probeImage"]["digest"]) == (OPERATOR, PROBE)
    assert _annotation_images(chart) == {
        "dask-gpu-parity": f"{operator}@{OPERATOR}",
        "dask-gpu-parity-probe": f"{probe}@{PROBE}",
    }
    assert capsys.readouterr().out.splitlines() == [
        f"Pinned {operator}@{OPERATOR}",
        f"Pinned {probe}@{PROBE}",
    ]
    assert sorted(p.name for p in chart.iterdir() if p.name.startswith(".")) == [".helmignore"]


def test_pinning_again_replaces_the_digests_and_is_idempotent(chart: Path) -> None:
    assert _pin(chart) == 0
    assert _pin(chart, operator=LATER) == 0
    once = _files(chart)
    assert yaml.safe_load((chart / "values.yaml").read_text())["image"]["digest"] == LATER
    assert _annotation_images(chart)["dask-gpu-parity"].endswith(f"@{LATER}")
    assert _pin(chart, operator=LATER) == 0
    assert _files(chart) == once


@pytest.mark.parametrize(
    "digest",
    [
        pytest.param(OPERATOR.upper().replace("SHA256", "sha256"), id="uppercase-hex"),
        pytest.param(OPERATOR[:-1], id="63-digits"),
        pytest.param(OPERATOR + "0", id="65-digits"),
        pytest.param(OPERATOR.removeprefix("sha256:"), id="no-algorithm"),
        pytest.param("sha512:" + "ab" * 64, id="sha512"),
        pytest.param(f"ghcr.io/dask-gpu-parity/dask-gpu-parity@{OPERATOR}", id="a-reference"),
        pytest.param(OPERATOR + "\n", id="trailing-newline"),
        pytest.param("", id="empty"),
    ],
)
def test_a_malformed_digest_is_refused_with_one_line_and_nothing_written(
    chart: Path, digest: str, capsys: pytest.CaptureFixture[str]
) -> None:
    before = _files(chart)
    assert _pin(chart, probe=digest) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("release.py: The probe digest ")
    assert err.rstrip().endswith("expected sha256: and 64 lowercase hex digits")
    assert _files(chart) == before


@pytest.mark.parametrize(
    ("file", "edit", "message"),
    [
        pytest.param(
            "values.yaml",
            ('  digest: ""\n  # -- Image pull policy.', "  # -- Image pull policy."),
            "values.yaml has no image.digest: add it",
            id="no-operator-digest",
        ),
        pytest.param(
            "values.yaml",
            ("probeImage:\n", "probe:\n"),
            "values.yaml has no top-level probeImage: block",
            id="no-probe-block",
        ),
        pytest.param(
            "Chart.yaml",
            (
                "      image: ghcr.io/dask-gpu-parity/dask-gpu-parity-probe:",
                "      image: ghcr.io/elsewhere/dask-gpu-parity-probe:",
            ),
            "Chart.yaml's artifacthub.io/images names "
            f"ghcr.io/dask-gpu-parity/dask-gpu-parity-probe:{VERSION} 0 times, expected once",
            id="annotation-lacks-the-probe",
        ),
    ],
)
def test_a_chart_without_a_field_to_pin_is_refused_and_left_as_it_was(
    chart: Path, file: str, edit: tuple[str, str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    """Nothing is written when any field is missing: never values.yaml without Chart.yaml, nor
    one image pinned without the other."""
    old, new = edit
    text = (chart / file).read_text()
    assert old in text
    (chart / file).write_text(text.replace(old, new, 1))
    before = _files(chart)
    assert _pin(chart) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert message in err
    assert _files(chart) == before


def test_a_missing_chart_folder_is_one_line_and_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _pin(tmp_path / "nowhere") == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "values.yaml not found" in err


def test_the_tag_of_this_version_passes_and_prints_it_for_github_output(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert release.main(["check-version", f"v{VERSION}"]) == 0
    assert capsys.readouterr().out == f"version={VERSION}\n"


def test_a_tag_of_another_version_fails_naming_every_source_that_differs(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert release.main(["check-version", "v99.0.0"]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    for source in ("pyproject.toml project.version", "Chart.yaml version", "Chart.yaml appVersion"):
        assert f"{source} is {VERSION}" in err
    assert err.rstrip().endswith(f"bump them to 99.0.0 or tag v{VERSION}")


@pytest.mark.parametrize("tag", ["0.1.0", "v0.1", "release-0.1.0", "v0.1.0 ", "vv0.1.0", ""])
def test_a_tag_that_is_no_release_tag_is_exit_2(
    tag: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert release.main(["check-version", tag]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert "is not a release tag: expected v and X.Y.Z" in err


def _sources(root: Path, *, project: str, chart: str, app: str, images: str | None = None) -> Path:
    """A repository root with this chart at the given versions (images: the annotation's tag)."""
    folder = Path(shutil.copytree(CHART, root / "charts" / "dask-gpu-parity"))
    (root / "pyproject.toml").write_text(f'[project]\nname = "x"\nversion = "{project}"\n')
    text = (folder / "Chart.yaml").read_text()
    text = re.sub(r"^version: .*$", f"version: {chart}  # the chart's version", text, flags=re.M)
    text = re.sub(r"^appVersion: .*$", f"appVersion: '{app}'", text, flags=re.M)
    text = re.sub(rf"(image: \S+):{re.escape(VERSION)}$", rf"\1:{images or app}", text, flags=re.M)
    (folder / "Chart.yaml").write_text(text)
    return root


@pytest.mark.parametrize(
    ("project", "chart", "app", "wrong"),
    [
        pytest.param("1.2.3-rc.1", "1.2.3-rc.1", "1.2.3-rc.1", [], id="pre-release-agrees"),
        pytest.param(
            "1.2.3-rc.1", "1.2.2", "1.2.3-rc.1", ["Chart.yaml version is 1.2.2"], id="chart"
        ),
        pytest.param(
            "1.2.3-rc.1", "1.2.3-rc.1", "1.2.3", ["Chart.yaml appVersion is 1.2.3"], id="app"
        ),
    ],
)
def test_the_check_reads_chart_yaml_as_yaml_does(
    tmp_path: Path, project: str, chart: str, app: str, wrong: list[str]
) -> None:
    root = _sources(tmp_path, project=project, chart=chart, app=app)
    meta = yaml.safe_load((root / "charts" / "dask-gpu-parity" / "Chart.yaml").read_text())
    assert (meta["version"], meta["appVersion"]) == (chart, app)
    if not wrong:
        assert release.check_version("v1.2.3-rc.1", root) == "1.2.3-rc.1"
        return
    with pytest.raises(release.VersionMismatchError) as caught:
        release.check_version("v1.2.3-rc.1", root)
    assert [part for part in wrong if part not in str(caught.value)] == []
    assert "pyproject.toml project.version is" not in str(caught.value)


def test_the_check_stops_a_release_whose_chart_cannot_be_pinned(tmp_path: Path) -> None:
    """A version bump that left the Artifact Hub images at the old tag fails the check, before
    any image is pushed, rather than the pinning after."""
    root = _sources(tmp_path, project="1.2.3", chart="1.2.3", app="1.2.3", images="1.2.2")
    with pytest.raises(release.ReleaseError) as caught:
        release.check_version("v1.2.3", root)
    assert "artifacthub.io/images names ghcr.io/dask-gpu-parity/dask-gpu-parity:1.2.3 0 times" in (
        str(caught.value)
    )
