"""Readers of the DRA fixture corpus (tests/fixtures/dra) shared by the DRA tests."""

from __future__ import annotations

from typing import Any

import yaml

from dask_gpu_parity.core.deviceclasses import NVIDIA_CLASSES, DeviceClasses, device_class
from tests.unit.helpers import ROOT, cluster

DRA = ROOT / "tests" / "fixtures" / "dra"
W13 = "rapidsai/base:25.10-cuda13.0-py3.12"
W128 = "nvcr.io/nvidia/cuda:12.8.1-runtime-ubuntu24.04"
IMPLICIT = "deviceclass.resource.kubernetes.io/"


def items(name: str) -> list[dict[str, Any]]:
    """Every object of a fixture file, ``kind: List`` items unpacked."""
    found: list[dict[str, Any]] = []
    for doc in yaml.safe_load_all((DRA / name).read_text()):
        found += doc["items"] if doc.get("kind") == "List" else [doc]
    return found


def catalogue(*names: str) -> DeviceClasses:
    """NVIDIA's catalogue extended by the DeviceClasses of fixture files."""
    found = [device_class(o) for name in names for o in items(name)]
    return NVIDIA_CLASSES.extend(c for c in found if c is not None)


def workload(image: str, resource: str = "nvidia.com/gpu", replicas: int = 1) -> dict[str, Any]:
    """A DaskCluster whose scheduler already has the workers' GPU and image."""
    doc = cluster(
        worker_resources={"limits": {resource: "1"}},
        worker_container={"image": image},
        scheduler_resources={"limits": {resource: "1"}},
        scheduler_container={"image": image},
    )
    doc["spec"]["worker"]["replicas"] = replicas
    return doc
