"""Reading `.images/images.json`: what the node harness and the install tests rely on."""

from __future__ import annotations

import json

import pytest

from provingground.images import CatalogError, Image, catalog

DIGEST = "sha256:" + "12" * 32


def _write(tmp_path, images, *, archives=True):
    for entry in images.values():
        if archives:
            (tmp_path / entry["archive"]).write_bytes(b"tar")
    path = tmp_path / "images.json"
    path.write_text(json.dumps({"images": images, "bases": {}, "buildkit": "v0.34.2"}))
    return path


def _entry(**changes):
    entry = {
        "reference": "ghcr.io/dask-gpu-parity/dask-gpu-parity:0.1.0",
        "archive": "operator.tar",
        "digest": DIGEST,
        "compressed_bytes": 91_000_000,
        "unpacked_bytes": 349_000_000,
        "build_seconds": 50.7,
        "base": {"python:3.11-slim-bookworm": DIGEST},
    }
    return {**entry, **changes}


def test_the_catalog_gives_each_image_its_archive_and_reference(tmp_path):
    path = _write(tmp_path, {"operator": _entry()})
    (image,) = catalog(path).values()
    assert image.name == "operator"
    assert image.reference == "ghcr.io/dask-gpu-parity/dask-gpu-parity:0.1.0"
    assert image.archive == (tmp_path / "operator.tar").resolve()
    assert image.digest == DIGEST


def test_an_entry_written_by_to_json_reads_back_the_same(tmp_path):
    image = Image("probe", "r/p:1", tmp_path / "probe.tar", DIGEST, 1, 2, 0.25, {})
    path = _write(tmp_path, {"probe": image.to_json(tmp_path)})
    assert catalog(path)["probe"] == Image(
        "probe", "r/p:1", (tmp_path / "probe.tar").resolve(), DIGEST, 1, 2, 0.2, {}
    )


def test_a_missing_catalog_says_to_run_make_images(tmp_path):
    with pytest.raises(CatalogError, match=r"not found; run `make images`"):
        catalog(tmp_path / "images.json")


def test_a_missing_archive_is_refused_unless_asked_not_to_check(tmp_path):
    path = _write(tmp_path, {"operator": _entry()}, archives=False)
    with pytest.raises(CatalogError, match=r"operator.tar missing; run `make images`"):
        catalog(path)
    assert catalog(path, check_archives=False)["operator"].archive.name == "operator.tar"


@pytest.mark.parametrize(
    "entry",
    [
        _entry(reference="ghcr.io/dask-gpu-parity/dask-gpu-parity"),  # no tag
        _entry(digest="sha256:12"),
        {k: v for k, v in _entry().items() if k != "archive"},
        _entry(compressed_bytes="many"),
    ],
)
def test_a_malformed_entry_is_one_clear_error(tmp_path, entry):
    path = _write(tmp_path, {"operator": entry}, archives=False)
    with pytest.raises(CatalogError, match="malformed image catalog"):
        catalog(path, check_archives=False)


def test_a_registry_port_is_not_mistaken_for_a_tag(tmp_path):
    path = _write(
        tmp_path, {"dask": _entry(reference="localhost:5000/provingground/dask")}, archives=False
    )
    with pytest.raises(CatalogError, match="has no tag"):
        catalog(path, check_archives=False)
