"""The ``gpu-parity-check`` init container (docs/probe.md).

It runs ``probe.py`` in the scheduler's own image, with the scheduler container's environment and
its GPU request, so it proves the GPU *and* the software environment before the scheduler starts.
The probe source is embedded as ``python -I -c <source>``: no extra image or ConfigMap needed.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import cache
from importlib import resources
from typing import Any

from dask_gpu_parity import probe
from dask_gpu_parity.names import VERIFIER_CONTAINER

from .plain import as_list, copy_json

__all__ = [
    "EXPECT_CUDA",
    "EXPECT_DRIVER",
    "MIN_COMPUTE_CAPABILITY",
    "init_container",
    "probe_source",
]

EXPECT_DRIVER = probe.ENV_EXPECT_DRIVER
EXPECT_CUDA = probe.ENV_EXPECT_CUDA
MIN_COMPUTE_CAPABILITY = probe.ENV_MIN_COMPUTE_CAPABILITY
# Pod fields the DaskCluster CRD (a Kubernetes 1.21 PodSpec) keeps on a container.
_COPIED = ("envFrom", "imagePullPolicy", "securityContext", "volumeMounts")


@cache
def probe_source() -> str:
    """The text of ``probe.py``, exactly as shipped."""
    return (
        resources.files(probe.__name__.rpartition(".")[0]).joinpath("probe.py").read_text("utf-8")
    )


def init_container(
    scheduler: Mapping[str, Any],
    *,
    gpu_resource: str,
    gpu_count: str,
    expect_driver: str | None,
    min_compute_capability: str | None,
    expect_cuda: str | None = None,
    image: str | None,
    cpu: str,
    memory: str,
) -> dict[str, Any]:
    """The init container for a scheduler container (already given its GPU and image).

    Args:
        scheduler: the scheduler container.
        gpu_resource: the GPU resource the scheduler requests, e.g. ``nvidia.com/gpu``.
        gpu_count: its quantity, as a string.
        expect_driver: the driver version the node must have, when known.
        min_compute_capability: the minimum compute capability, when the policy sets one.
        expect_cuda: the CUDA version admission assumed the image needs, when known.
        image: our own image to run ``dask-gpu-parity verify-gpu`` instead of the embedded probe.
        cpu: CPU request.
        memory: memory request and limit.
    """
    env = [copy_json(e) for e in as_list(scheduler.get("env")) if isinstance(e, Mapping)]
    env = [
        e for e in env if e.get("name") not in (EXPECT_DRIVER, EXPECT_CUDA, MIN_COMPUTE_CAPABILITY)
    ]
    if expect_driver:
        env.append({"name": EXPECT_DRIVER, "value": expect_driver})
    if expect_cuda:
        env.append({"name": EXPECT_CUDA, "value": expect_cuda})
    if min_compute_capability:
        env.append({"name": MIN_COMPUTE_CAPABILITY, "value": min_compute_capability})
    container: dict[str, Any] = {
        "name": VERIFIER_CONTAINER,
        "image": image or scheduler.get("image"),
        "command": (
            ["dask-gpu-parity", "verify-gpu"] if image else ["python", "-I", "-c", probe_source()]
        ),
        "env": env,
        "resources": {
            "limits": {gpu_resource: gpu_count, "memory": memory},
            "requests": {gpu_resource: gpu_count, "cpu": cpu, "memory": memory},
        },
        "terminationMessagePolicy": "FallbackToLogsOnError",
    }
    if image:
        container["imagePullPolicy"] = "IfNotPresent"
    for key in _COPIED:
        if key in scheduler and not (image and key == "imagePullPolicy"):
            container[key] = copy_json(scheduler[key])
    if not container["env"]:
        del container["env"]
    return container
