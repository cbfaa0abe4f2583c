"""The ``gpu-parity-check`` init container and how the probe reaches it (docs/probe.md).

The probe runs in the scheduler's own image, with the scheduler container's environment and its
GPU request, so it proves the GPU *and* the software environment before the scheduler starts.
It reaches the pod in one of two forms:

* **by reference** (the default): a first, GPU-less init container from this project's small
  probe image copies ``probe.py`` into an ``emptyDir``, and ``gpu-parity-check`` runs
  ``python -I <that path>`` in the scheduler's image. The manifest carries one image reference,
  which is all a release of this project changes in it.
* **inline**: ``python -I -c <source>``, for clusters that cannot pull the probe image. About
  21 kB of Python in every DaskCluster, rewritten by every release.

Nothing newer than the Kubernetes 1.21 PodSpec that the DaskCluster CRD embeds is used: an image
volume (``volumes[].image``) would be pruned from it and leave an empty volume behind.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from functools import cache
from typing import Any

from dask_gpu_parity import __version__, probe
from dask_gpu_parity.names import (
    PROBE_DIR,
    PROBE_IMAGE_REPOSITORY,
    PROBE_IN_IMAGE,
    VERIFIER_CONTAINER,
    VERIFIER_COPY_CONTAINER,
    VERIFIER_VOLUME,
)

from .plain import as_list, as_map, copy_json

__all__ = [
    "CAPABILITIES",
    "EXPECT_CUDA",
    "EXPECT_DRIVER",
    "MIN_COMPUTE_CAPABILITY",
    "PROBE_PATH",
    "Form",
    "copy_container",
    "default_probe_image",
    "form_of",
    "init_container",
    "probe_source",
    "release_tag",
    "volume",
]

EXPECT_DRIVER = probe.ENV_EXPECT_DRIVER
EXPECT_CUDA = probe.ENV_EXPECT_CUDA
MIN_COMPUTE_CAPABILITY = probe.ENV_MIN_COMPUTE_CAPABILITY
PROBE_PATH = f"{PROBE_DIR}/probe.py"  # in the emptyDir, as both init containers mount it
_REFERENCE_COMMAND = ("python", "-I", PROBE_PATH)
# The legacy nvidia-container-runtime mounts only the driver libraries this variable names (CDI
# mounts them all with the device): a container that runs CUDA needs "compute" in it.
CAPABILITIES = "NVIDIA_DRIVER_CAPABILITIES"
# Pod fields the DaskCluster CRD (a Kubernetes 1.21 PodSpec) keeps on a container.
_COPIED = ("envFrom", "imagePullPolicy", "securityContext")
# The copy step is this project's code in this project's image: restricted Pod Security on its
# own, whatever the pod says (runAsUser: the probe image's numeric USER, also where the pod runs
# as root). Its root filesystem stays writable: it writes only to the emptyDir anyway, and the
# field would not fit the one line fix keeps it to.
_COPY_SECURITY = {
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "runAsNonRoot": True,
    "runAsUser": 65532,
    "seccompProfile": {"type": "RuntimeDefault"},
}


class Form(enum.StrEnum):
    """The forms of a ``gpu-parity-check`` this project has injected."""

    REFERENCE = "reference"  # python -I /gpu-parity/probe.py, copied by gpu-parity-probe
    INLINE = "inline"  # python -I -c <source>
    OWN_IMAGE = "own-image"  # dask-gpu-parity verify-gpu in the operator's image (0.1.0)


@cache
def probe_source() -> str:
    """The text of ``probe.py``, exactly as shipped."""
    from importlib import resources  # noqa: PLC0415 - inline delivery only (start-up of `check`)

    return (
        resources.files(probe.__name__.rpartition(".")[0]).joinpath("probe.py").read_text("utf-8")
    )


def release_tag(version: str = __version__) -> str:
    """The probe image's tag for a release: its version (``+`` is not allowed in a tag)."""
    return version.replace("+", "-")


def default_probe_image(registry: str | None = None) -> str:
    """This release's probe image, from ``registry`` (a mirror: host and optional path) if given.

    A mirror replaces the registry host and keeps the path and the release's tag, so an upgrade
    still changes exactly one reference.
    """
    image = f"{PROBE_IMAGE_REPOSITORY}:{release_tag()}"
    if not registry:
        return image
    return f"{registry.rstrip('/')}/{image.split('/', 1)[1]}"


def volume() -> dict[str, Any]:
    """The ``emptyDir`` the probe is copied into (it is about 21 kB)."""
    return {"name": VERIFIER_VOLUME, "emptyDir": {"sizeLimit": "1Mi"}}


def copy_container(image: str) -> dict[str, Any]:
    """The GPU-less first step: copy ``probe.py`` from the probe image into the ``emptyDir``.

    It requests no GPU, and ``NVIDIA_VISIBLE_DEVICES=void`` keeps a legacy nvidia runtime set as
    the default from giving it every GPU of the node (``void``: not a GPU container at all;
    ``none`` would still mount the driver). Under CDI a container without a GPU request gets
    nothing either way.
    """
    return {
        "name": VERIFIER_COPY_CONTAINER,
        "image": image,
        "command": ["cp", PROBE_IN_IMAGE, PROBE_PATH],
        "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}],
        "resources": {"limits": {"memory": "16Mi"}, "requests": {"cpu": "10m"}},
        "securityContext": copy_json(_COPY_SECURITY),
        "volumeMounts": [{"name": VERIFIER_VOLUME, "mountPath": PROBE_DIR}],
    }


def init_container(
    scheduler: Mapping[str, Any],
    *,
    inline: bool,
    gpu_resource: str,
    gpu_count: str,
    expect_driver: str | None,
    min_compute_capability: str | None,
    cpu: str,
    memory: str,
    expect_cuda: str | None = None,
) -> dict[str, Any]:
    """``gpu-parity-check`` for a scheduler container (already given its GPU and image).

    Args:
        scheduler: the scheduler container: its image, env, envFrom, securityContext, volume
            mounts and DRA ``resources.claims`` (where a pod spec keeps them; the DaskCluster
            CRD prunes them) are the check's.
        inline: embed the probe's source instead of running the copy in the ``emptyDir``.
        gpu_resource: the GPU resource the scheduler requests, e.g. ``nvidia.com/gpu``.
        gpu_count: its quantity, as a string.
        expect_driver: the driver version the node must have, when known.
        min_compute_capability: the minimum compute capability, when the policy sets one.
        cpu: CPU request.
        memory: memory limit (the request defaults to it, as the GPU's does).
        expect_cuda: the CUDA version admission assumed the image needs, when known.
    """
    env = copy_json([e for e in as_list(scheduler.get("env")) if isinstance(e, Mapping)])
    env = [
        e for e in env if e.get("name") not in (EXPECT_DRIVER, EXPECT_CUDA, MIN_COMPUTE_CAPABILITY)
    ]
    if expect_driver:
        env.append({"name": EXPECT_DRIVER, "value": expect_driver})
    if expect_cuda:
        env.append({"name": EXPECT_CUDA, "value": expect_cuda})
    if min_compute_capability:
        env.append({"name": MIN_COMPUTE_CAPABILITY, "value": min_compute_capability})
    mounts = as_list(scheduler.get("volumeMounts"))
    mounts = copy_json(mounts) if mounts else []
    if not inline:
        mounts.append({"name": VERIFIER_VOLUME, "mountPath": PROBE_DIR, "readOnly": True})
    container: dict[str, Any] = {
        "name": VERIFIER_CONTAINER,
        "image": scheduler.get("image"),
        "command": ["python", "-I", "-c", probe_source()] if inline else list(_REFERENCE_COMMAND),
        "env": env,
        "resources": {
            "limits": {gpu_resource: gpu_count, "memory": memory},
            "requests": {"cpu": cpu},
        },
        "terminationMessagePolicy": "FallbackToLogsOnError",
        "volumeMounts": mounts,
    }
    for key in _COPIED:
        if key in scheduler:
            container[key] = copy_json(scheduler[key])
    claims = as_list(as_map(scheduler.get("resources")).get("claims"))
    if claims:  # DRA claims: the init container shares the scheduler's (KEP-4381)
        container["resources"]["claims"] = [copy_json(c) for c in claims]
    for key in ("env", "volumeMounts"):
        if not container[key]:
            del container[key]
    return container


def form_of(check: Mapping[str, Any], init: list[Any]) -> Form | None:
    """Which injected form ``gpu-parity-check`` is in, ``None`` when it is not one of ours.

    A ``gpu-parity-check`` someone wrote by hand (another command) is theirs and left alone.
    """
    command = check.get("command")
    if not isinstance(command, list):
        return None
    if command == list(_REFERENCE_COMMAND) and any(
        isinstance(c, Mapping) and c.get("name") == VERIFIER_COPY_CONTAINER for c in init
    ):
        return Form.REFERENCE
    if len(command) == 4 and command[:3] == ["python", "-I", "-c"]:
        return Form.INLINE
    if command == ["dask-gpu-parity", "verify-gpu"]:
        return Form.OWN_IMAGE
    return None
