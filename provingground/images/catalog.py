"""Read ``.images/images.json``: which image archive holds which reference.

``make images`` writes the catalog; the node harness and the install tests read it with
:func:`catalog` to import the archives (``ctr -n k8s.io images import``) and to name the images,
so no reference is spelled anywhere else.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["IMAGE_NAMES", "CatalogError", "Image", "catalog", "default_catalog_path"]

IMAGE_NAMES = ("operator", "probe", "dask-operator", "dask")
REPO_ROOT = Path(__file__).resolve().parents[2]


class CatalogError(ValueError):
    """The catalog is missing, malformed or names an archive that is not there."""


@dataclass(frozen=True)
class Image:
    """One built image.

    Attributes:
        name: The catalog's name (``operator``, ``probe``, ``dask-operator``, ``dask``).
        reference: The image reference the archive is imported as (``repo:tag``).
        archive: The OCI image archive (absolute path).
        digest: The image manifest's digest (``sha256:...``).
        compressed_bytes: The manifest's config and layers as stored (what a pull downloads).
        unpacked_bytes: The regular files of all layers, uncompressed.
        build_seconds: How long the last ``make images`` took to build it.
        base: The stand-in bases the build used (``FROM`` name: manifest digest).
    """

    name: str
    reference: str
    archive: Path
    digest: str
    compressed_bytes: int
    unpacked_bytes: int
    build_seconds: float
    base: dict[str, str]

    def to_json(self, relative_to: Path) -> dict[str, Any]:
        """The catalog entry, with the archive's path relative to the catalog's folder."""
        return {
            "reference": self.reference,
            "archive": str(self.archive.relative_to(relative_to)),
            "digest": self.digest,
            "compressed_bytes": self.compressed_bytes,
            "unpacked_bytes": self.unpacked_bytes,
            "build_seconds": round(self.build_seconds, 1),
            "base": self.base,
        }


def default_catalog_path() -> Path:
    """``.images/images.json`` at the repository's top level."""
    return REPO_ROOT / ".images" / "images.json"


def catalog(path: Path | None = None, *, check_archives: bool = True) -> dict[str, Image]:
    """Read the catalog ``make images`` wrote.

    Args:
        path: The ``images.json`` file (default: ``.images/images.json`` of this repository).
        check_archives: Refuse a catalog whose archives are not all present.

    Returns:
        The images by name (``operator``, ``probe``, ``dask-operator``, ``dask``).

    Raises:
        CatalogError: The file is missing or malformed, or an archive is missing; the message
            says to run ``make images``.
    """
    path = path or default_catalog_path()
    try:
        data = json.loads(path.read_text())
        images = data["images"]
        found = {name: _image(name, entry, path.parent) for name, entry in images.items()}
    except FileNotFoundError:
        raise CatalogError(f"{path}: not found; run `make images`") from None
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise CatalogError(
            f"{path}: malformed image catalog ({exc!r}); run `make images` again"
        ) from None
    if check_archives:
        missing = [img.archive.name for img in found.values() if not img.archive.is_file()]
        if missing:
            raise CatalogError(
                f"{path}: archive(s) {', '.join(missing)} missing; run `make images`"
            )
    return found


def _image(name: str, entry: dict[str, Any], folder: Path) -> Image:
    reference = entry["reference"]
    if not isinstance(reference, str) or ":" not in reference.rsplit("/", 1)[-1]:
        raise ValueError(f"image {name!r}: reference {reference!r} has no tag")
    digest = entry["digest"]
    if not (isinstance(digest, str) and digest.startswith("sha256:") and len(digest) == 71):
        raise ValueError(f"image {name!r}: digest {digest!r} is not sha256:<64 hex>")
    return Image(
        name=name,
        reference=reference,
        archive=(folder / entry["archive"]).resolve(),
        digest=digest,
        compressed_bytes=int(entry["compressed_bytes"]),
        unpacked_bytes=int(entry["unpacked_bytes"]),
        build_seconds=float(entry["build_seconds"]),
        base={str(k): str(v) for k, v in entry.get("base", {}).items()},
    )
