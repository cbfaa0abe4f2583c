"""The CUDA version a Dask resource's image needs, and which driver classes can run it.

Read, in order, from the ``gpuparity.dask.org/cuda-version`` annotation, the workers' env
(``GPU_PARITY_EXPECT_CUDA``, then ``CUDA_VERSION``, which NVIDIA's CUDA images set) and the image
tag conventions of RAPIDS (``rapidsai/base:25.10-cuda13.0-py3.12``, ``…-cuda12-…``), NVIDIA's
CUDA images (``nvcr.io/nvidia/cuda:12.8.1-runtime-ubuntu24.04``) and ``-cu12``/``-cu130``
suffixes. Whichever was used is named in every finding.

A major-only version (``cuda12``: every RAPIDS image since 25.12) names no minor. RAPIDS builds
those tags on the newest minor of the major (rapidsai/docker ``matrix.yaml``: "Use the latest
supported minor/patch version for each supported CUDA major version"; 25.10 retagged its
``cuda12.9`` and ``cuda13.0`` builds), so placement assumes that minor (:data:`MAJOR_ONLY_MINOR`)
and says it assumed it; the verifier is not told a minor nobody named.

A driver class runs the image when its driver meets the minimum for the image's CUDA major
(RAPIDS' platform support: CUDA 12 needs driver 535 or newer, CUDA 13 needs 580) and the CUDA
version the driver supports (GFD's ``cuda.runtime-version``) is the image's or newer. An older
minor of the same major runs under minor-version compatibility, with a caveat: PTX built by the
newer toolkit fails to JIT (``cudaErrorUnsupportedPtxVersion``).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from dask_gpu_parity.core.gpu import env_value
from dask_gpu_parity.core.inventory import DriverClass
from dask_gpu_parity.core.plain import as_map, get_in
from dask_gpu_parity.names import CUDA_ANNOTATION
from dask_gpu_parity.probe import ENV_EXPECT_CUDA

__all__ = ["DRIVER_FLOOR", "MAJOR_ONLY_MINOR", "CudaNeed", "Fit", "fit", "image_cuda", "need"]

# The oldest driver branch that runs a CUDA major: RAPIDS' floors for 12 and 13 (docs.rapids.ai
# platform support), CUDA's own for 11 (minor version compatibility).
DRIVER_FLOOR = {11: 450, 12: 535, 13: 580}
# The minor RAPIDS builds its major-only tags on: the newest of each major in rapidsai/docker's
# matrix.yaml (12.9.1 and 13.3.0 at e79d3ede, 2026-06-24; 12.9 is the last CUDA 12 minor, CUDA
# 13's grows with each release: 13.0 in 25.12, 13.1 in 26.02, 13.3 in 26.08).
MAJOR_ONLY_MINOR = {12: 9, 13: 3}
_VERSION = re.compile(r"^\s*(\d{1,2})(?:\.(\d{1,2}))?(?:\.\d+)?\s*$")
# "cuda13.0", "cuda12", "cuda-12.8" inside a tag: RAPIDS and most CUDA-based images.
_TAG_CUDA = re.compile(r"(?:^|[-_.])cuda-?(\d{2})(?:\.(\d{1,2}))?(?=$|[-_.])", re.IGNORECASE)
# "cu12", "cu121", "cu130" suffixes (PyTorch, CuPy, NGC wheels-style tags).
_TAG_CU = re.compile(r"(?:^|[-_.])cu(\d{2})(\d)?(?=$|[-_.])", re.IGNORECASE)
# NVIDIA's own CUDA images: the repository is ".../cuda", the tag starts with the version.
_CUDA_REPO_TAG = re.compile(r"^(\d{2})\.(\d{1,2})(?:\.\d+)?(?=$|[-_])")


@dataclass(frozen=True, order=True)
class CudaNeed:
    """The CUDA version an image needs, and where that was read."""

    major: int
    minor: int  # for a major-only version, the minor assumed (MAJOR_ONLY_MINOR, else 0)
    source: str  # e.g. "the image tag rapidsai/base:25.10-cuda13.0-py3.12"
    minor_known: bool = True  # False for a major-only tag such as "cuda12"

    @classmethod
    def major_only(cls, major: int, source: str) -> CudaNeed:
        """A need that names only the major: the newest minor RAPIDS builds it on is assumed."""
        return cls(major, MAJOR_ONLY_MINOR.get(major, 0), source, minor_known=False)

    @property
    def version(self) -> str:
        """``MAJOR.MINOR``, as the probe's ``GPU_PARITY_EXPECT_CUDA`` takes it."""
        return f"{self.major}.{self.minor}"

    @property
    def named(self) -> str:
        """The version as its source names it: ``12.9``, or ``12`` for a major-only one."""
        return self.version if self.minor_known else str(self.major)

    @property
    def driver_floor(self) -> int | None:
        """The oldest driver branch that runs this CUDA major, when known."""
        return DRIVER_FLOOR.get(self.major)

    def __str__(self) -> str:
        if self.minor_known:
            return f"CUDA {self.version} ({self.source})"
        assumed = f", assumed {self.version} as RAPIDS builds it" if self.minor else ""
        return f"CUDA {self.major} ({self.source}: no minor{assumed})"


def image_cuda(image: Any) -> tuple[int, int | None] | None:
    """The CUDA ``(major, minor)`` an image's tag names (minor ``None`` when it names none)."""
    return _image_cuda(image) if isinstance(image, str) else None


@lru_cache(maxsize=1024)
def _image_cuda(image: str) -> tuple[int, int | None] | None:
    """:func:`image_cuda` of a string; cached: manifests name the same few images again."""
    name = image.split("@", 1)[0]
    if ":" not in name.rsplit("/", 1)[-1]:
        return None  # no tag (a digest alone names no version)
    repository, tag = name.rsplit(":", 1)
    if repository.rsplit("/", 1)[-1] == "cuda" and (match := _CUDA_REPO_TAG.match(tag)):
        return int(match.group(1)), int(match.group(2))
    if match := _TAG_CUDA.search(tag) or _TAG_CU.search(tag):
        return int(match.group(1)), int(match.group(2)) if match.group(2) else None
    return None


def _version(text: Any) -> tuple[int, int | None] | None:
    match = _VERSION.match(text) if isinstance(text, str) else None
    if not match:
        return None
    return int(match.group(1)), int(match.group(2)) if match.group(2) else None


def _need(found: tuple[int, int | None], source: str) -> CudaNeed:
    major, minor = found
    return CudaNeed.major_only(major, source) if minor is None else CudaNeed(major, minor, source)


def need(resource: Mapping[str, Any], worker: Mapping[str, Any]) -> CudaNeed | None:
    """The CUDA version the resource's workers (and so its scheduler) need, when it can be told.

    Args:
        resource: the Dask resource (for the annotation).
        worker: the workers' working container (for its env and image).
    """
    annotation = as_map(get_in(resource, ("metadata", "annotations"))).get(CUDA_ANNOTATION)
    if (found := _version(annotation)) is not None:
        return _need(found, f"the {CUDA_ANNOTATION} annotation")
    for name in (ENV_EXPECT_CUDA, "CUDA_VERSION"):
        if (found := _version(env_value(worker, name))) is not None:
            return _need(found, f"the workers' {name}")
    image = worker.get("image")
    if (tagged := image_cuda(image)) is not None:
        return _need(tagged, f"the image tag {image}")
    return None


class Fit(enum.Enum):
    """How a driver class runs an image's CUDA."""

    RUNS = "runs"  # the driver supports the image's CUDA or newer
    OLDER_MINOR = "older-minor"  # same major, older minor: minor-version compatibility
    NO = "no"  # driver below the major's floor, or an older CUDA major


def fit(dc: DriverClass, cuda: CudaNeed) -> Fit:
    """Whether driver class ``dc`` can run an image that needs ``cuda``."""
    branch = dc.driver.split(".", 1)[0]
    found = _version(dc.cuda)
    if not branch.isascii() or not branch.isdigit() or found is None:
        return Fit.NO
    supported = (found[0], found[1] or 0)
    floor = cuda.driver_floor
    if floor is not None and int(branch) < floor:
        return Fit.NO
    if supported >= (cuda.major, cuda.minor):
        return Fit.RUNS
    return Fit.OLDER_MINOR if supported[0] == cuda.major else Fit.NO
