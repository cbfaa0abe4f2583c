"""GPU Node objects as NVIDIA's GPU feature discovery labels them, for the admission tests.

Labels as GFD publishes them (https://github.com/NVIDIA/k8s-device-plugin/blob/1b826acc6af3079d8923bac395c3124b8861a9a6/docs/gpu-feature-discovery/README.md#L125):
the ``cuda.driver-version.*`` / ``cuda.runtime-version.*`` family, or with ``legacy`` the older
``cuda.driver.*`` / ``cuda.runtime.*`` one.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

# Driver and CUDA versions of three driver classes.
CLASSES = [("580.95.05", "13.0"), ("570.172.08", "12.8"), ("550.163.01", "12.4")]


def node(
    name: str,
    driver: str = "580.95.05",
    cuda: str = "13.0",
    *,
    product: str = "NVIDIA-A100-SXM4-80GB",
    gpus: str = "8",
    legacy: bool = False,
    taint: bool = True,
    cordoned: bool = False,
    extra: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    labels = {
        "kubernetes.io/hostname": name,
        "nvidia.com/gfd.timestamp": str(hash(name) % 10_000),
        "nvidia.com/gpu.product": product,
        **(extra or {}),
    }
    if legacy:
        major, minor, rev = [*driver.split("."), ""][:3]
        cmajor, cminor = cuda.split(".")
        labels |= {
            "nvidia.com/cuda.driver.major": major,
            "nvidia.com/cuda.driver.minor": minor,
            "nvidia.com/cuda.driver.rev": rev,
            "nvidia.com/cuda.runtime.major": cmajor,
            "nvidia.com/cuda.runtime.minor": cminor,
        }
    else:
        labels |= {
            "nvidia.com/cuda.driver-version.full": driver,
            "nvidia.com/cuda.runtime-version.full": cuda,
            "nvidia.com/cuda.driver-version.major": driver.split(".", maxsplit=1)[0],
        }
    spec: dict[str, Any] = {}
    if taint:
        spec["taints"] = [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
    if cordoned:
        spec["unschedulable"] = True
    return {
        "metadata": {"name": name, "labels": labels},
        "spec": spec,
        "status": {"allocatable": {"nvidia.com/gpu": gpus, "cpu": "8"}},
    }
