"""The CUDA version a Dask resource's image needs, and which driver classes can run it.

Read, in order, from the ``gpuparity.dask.org/cuda-version`` annotation, the workers' env
(``GPU_PARITY_EXPECT_CUDA``, then ``CUDA_VERSION``, which NVIDIA's CUDA images set) and the image
tag conventions of RAPIDS (``rapidsai/base:25.10-cuda13.0-py3.12``, ``…-cuda12-…``), NVIDIA's
CUDA images (``nvcr.io/nvidia/cuda:12.8.1-runtime-ubuntu24.04``) and ``-cu12``/``-cu130``
suffixes. Whichever was used is named in every finding.

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
from typing import Any

from dask_gpu_parity.core.gpu import env_value
from dask_gpu_parity.core.inventory import DriverClass
from dask_gpu_parity.core.plain import as_map, get_in
from dask_gpu_parity.names import CUDA_ANNOTATION
from dask_gpu_parity.probe import ENV_EXPECT_CUDA

__all__ = ["DRIVER_FLOOR", "CudaNeed", "Fit", "fit", "image_cuda", "need"]

# The oldest driver branch that runs a CUDA major: RAPIDS' floors for 12 and 13 (docs.rapids.ai
# platform support), CUDA's own for 11 (minor version compatibility).
DRIVER_FLOOR = {11: 450, 12: 535, 13: 580}
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
    minor: int
    source: str  # e.g. "the image tag rapidsai/base:25.10-cuda13.0-py3.12"
    minor_known: bool = True  # False for a major-only tag such as "cuda12"

    @property
    def version(self) -> str:
        """``MAJOR.MINOR``, as the probe's ``GPU_PARITY_EXPECT_CUDA`` takes it."""
        return f"{self.major}.{self.minor}"

    @property
    def driver_floor(self) -> int | None:
        """The oldest driver branch that runs this CUDA major, when known."""
        return DRIVER_FLOOR.get(self.major)

    def __str__(self) -> str:
        return f"CUDA {self.version} ({self.source})"


def image_cuda(image: Any) -> tuple[int, int | None] | None:
    """The CUDA ``(major, minor)`` an image's tag names (minor ``None`` when it names none)."""
    name = image.split("@", 1)[0] if isinstance(image, str) else ""
    if ":" not in name.rsplit("/", 1)[-1]:
        return None  # no tag (a digest alone names no version)
    repository, tag = name.rsplit(":", 1)
    if repository.rsplit("/", 1)[-1] == "cuda" and (match := _CUDA_REPO_TAG.match(tag)):
        return int(match.group(1)), int(match.group(2))
    if match := _TAG_CUDA.search(tag) or _TAG_CU.search(tag):
        return int(match.group(1)), int(match.group(2)) if match.group(2) else None
    return None


def _version(text: Any) -> tuple[int, int] | None:
    match = _VERSION.match(text) if isinstance(text, str) else None
    return (int(match.group(1)), int(match.group(2) or 0)) if match else None


def need(resource: Mapping[str, Any], worker: Mapping[str, Any]) -> CudaNeed | None:
    """The CUDA version the resource's workers (and so its scheduler) need, when it can be told.

    Args:
        resource: the Dask resource (for the annotation).
        worker: the workers' working container (for its env and image).
    """
    annotation = as_map(get_in(resource, ("metadata", "annotations"))).get(CUDA_ANNOTATION)
    if (found := _version(annotation)) is not None:
        return CudaNeed(*found, f"the {CUDA_ANNOTATION} annotation")
    for name in (ENV_EXPECT_CUDA, "CUDA_VERSION"):
        if (found := _version(env_value(worker, name))) is not None:
            return CudaNeed(*found, f"the workers' {name}")
    image = worker.get("image")
    if (tagged := image_cuda(image)) is not None:
        major, minor = tagged
        return CudaNeed(major, minor or 0, f"the image tag {image}", minor_known=minor is not None)
    return None


class Fit(enum.Enum):
    """How a driver class runs an image's CUDA."""

    RUNS = "runs"  # the driver supports the image's CUDA or newer
    OLDER_MINOR = "older-minor"  # same major, older minor: minor-version compatibility
    NO = "no"  # driver below the major's floor, or an older CUDA major


def fit(dc: DriverClass, cuda: CudaNeed) -> Fit:
    """Whether driver class ``dc`` can run an image that needs ``cuda``."""
    branch = dc.driver.split(".", 1)[0]
    supported = _version(dc.cuda)
    if not branch.isascii() or not branch.isdigit() or supported is None:
        return Fit.NO
    floor = cuda.driver_floor
    if floor is not None and int(branch) < floor:
        return Fit.NO
    if supported >= (cuda.major, cuda.minor):
        return Fit.RUNS
    return Fit.OLDER_MINOR if supported[0] == cuda.major else Fit.NO
