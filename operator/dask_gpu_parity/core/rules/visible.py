"""DGP029: a container that requests no GPU but runs a CUDA image beside GPU pods.

RAPIDS' and NVIDIA's CUDA images set ``NVIDIA_VISIBLE_DEVICES=all``; under a node's default
NVIDIA runtime a container of such an image sees every GPU of its node, including those the
device plugin gave to other pods, whether or not it requested one (NVIDIA/k8s-device-plugin#61;
KubeRay's heads meet the same, ray-project/kuberay#2098). The usual fix is
``NVIDIA_VISIBLE_DEVICES=void``. Judged in GPU clusters only (their pods land on GPU nodes): the
job runner's containers (a DaskJob's runner, a chart's Jupyter) and the sidecars of the scheduler
and worker pods; never a container that requests a GPU. A value the user wrote is reported,
not overwritten.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from dask_gpu_parity.core.cuda import image_cuda
from dask_gpu_parity.core.findings import Finding
from dask_gpu_parity.core.names_env import NO_GPU, VISIBLE_DEVICES
from dask_gpu_parity.core.podfacts import ContainerFacts
from dask_gpu_parity.core.view import PodView

from .context import Context

__all__ = ["cpu_containers_see_gpus"]

_CUDA_REPOSITORIES = ("rapidsai/", "nvidia/cuda", "nvcr.io/nvidia/")
_HIDDEN = frozenset({"void", "none", ""})
# Python modules whose import or use needs a CUDA device: a command naming one runs GPU code.
_GPU_CODE = re.compile(r"\b(?:cudf|dask_cudf|cupy|cuml|cugraph|cuspatial|rmm|dask_cuda|cuda)\b")


def runs_gpu_code(container: Mapping[str, Any]) -> bool:
    """Whether a container's command or args name a CUDA library (it needs a GPU itself)."""
    words = []
    for key in ("command", "args"):
        value = container.get(key)
        if isinstance(value, list):
            words += [w for w in value if isinstance(w, str)]
    return any(_GPU_CODE.search(w) for w in words)


def cuda_image(container: Mapping[str, Any]) -> bool:
    """Whether a container's image is a CUDA image (a CUDA tag, RAPIDS' or NVIDIA's repository)."""
    image = container.get("image")
    if not isinstance(image, str) or not image:
        return False
    return image_cuda(image) is not None or any(r in image for r in _CUDA_REPOSITORIES)


def _candidates(ctx: Context) -> Iterator[tuple[str, PodView, ContainerFacts]]:
    """(role, pod, container as written) of every container DGP029 judges."""
    view = ctx.view
    if view.job_runner is not None:
        for facts in view.job_runner.written.containers:
            yield "job runner", view.job_runner, facts
    for role, pod in (("scheduler", view.scheduler), ("worker", view.worker)):
        for facts in pod.written.containers:
            if facts.position != pod.index:
                yield f"{role} sidecar", pod, facts


def cpu_containers_see_gpus(ctx: Context) -> list[Finding]:
    """DGP029 for CUDA-image containers without a GPU; ``NVIDIA_VISIBLE_DEVICES=void`` set.

    The rules before this one change no container it judges: their requests are as written.
    """
    findings = []
    for role, pod, facts in _candidates(ctx):
        index = facts.position
        container = pod.spec["containers"][index]
        if not isinstance(container, dict) or not cuda_image(container):
            continue
        if facts.gpus:
            continue
        env = container.get("env")
        written = (
            next(
                (e for e in env if isinstance(e, Mapping) and e.get("name") == VISIBLE_DEVICES),
                None,
            )
            if isinstance(env, list)
            else None
        )
        if written is not None and written.get("value") in _HIDDEN and "valueFrom" not in written:
            continue
        name = container.get("name", index)
        at = f"{pod.ptr}/containers/{index}/env"
        gpu_instead = (
            "if it deserialises GPU results itself (a client that computes cuDF or CuPy "
            'results), request a GPU in limits instead (nvidia.com/gpu: "1")'
        )
        head = (
            f"The {role} container {name!r} requests no GPU but runs the CUDA image "
            f"{container['image']}: under a node's default NVIDIA runtime it sees every GPU of "
            "the node, including those given to other pods"
        )
        if runs_gpu_code(container):
            findings.append(
                Finding.of(
                    "DGP029",
                    at,
                    f"{head}, and its command runs CUDA libraries, so it needs a GPU of its own: "
                    'request one in limits (nvidia.com/gpu: "1"); not changed',
                    fixable=False,
                )
            )
            continue
        if written is not None:
            findings.append(
                Finding.of(
                    "DGP029",
                    at,
                    f"{head}, and its env sets {VISIBLE_DEVICES} to another value itself (not "
                    f"changed): set it to {NO_GPU}, or, {gpu_instead}",
                    fixable=False,
                )
            )
            continue
        if not isinstance(env, list):
            if env is not None:  # malformed: reported by the schema rule, left alone
                continue
            container["env"] = []
        container["env"].append({"name": VISIBLE_DEVICES, "value": NO_GPU})
        message = f"{head}; set {VISIBLE_DEVICES}={NO_GPU} so that it sees none; {gpu_instead}"
        findings.append(Finding.of("DGP029", at, message))
    return findings
