"""Small builders shared by the unit tests."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"


def example(name: str) -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((EXAMPLES / name).read_text())
    return data


def nodes() -> list[dict[str, Any]]:
    items: list[dict[str, Any]] = yaml.safe_load((EXAMPLES / "nodes.yaml").read_text())["items"]
    return items


def cluster(
    *,
    worker_resources: dict[str, Any] | None = None,
    scheduler_resources: dict[str, Any] | None = None,
    worker_extra: dict[str, Any] | None = None,
    scheduler_extra: dict[str, Any] | None = None,
    worker_container: dict[str, Any] | None = None,
    scheduler_container: dict[str, Any] | None = None,
    annotations: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A minimal valid DaskCluster; GPU workers unless ``worker_resources`` says otherwise."""
    scheduler = {"name": "scheduler", "image": "rapids:1", "args": ["dask-scheduler"]}
    if scheduler_resources is not None:
        scheduler["resources"] = scheduler_resources
    scheduler.update(scheduler_container or {})
    worker = {
        "name": "worker",
        "image": "rapids:1",
        "args": ["dask-cuda-worker"],
        "resources": {"limits": {"nvidia.com/gpu": "1"}}
        if worker_resources is None
        else worker_resources,
    }
    worker.update(worker_container or {})
    doc: dict[str, Any] = {
        "apiVersion": "kubernetes.dask.org/v1",
        "kind": "DaskCluster",
        "metadata": {"name": "c", "namespace": "ns"},
        "spec": {
            "scheduler": {
                "spec": {"containers": [scheduler], **(scheduler_extra or {})},
                "service": {
                    "ports": [{"name": "tcp-comm", "port": 8786, "targetPort": "tcp-comm"}]
                },
            },
            "worker": {"replicas": 1, "spec": {"containers": [worker], **(worker_extra or {})}},
        },
    }
    if annotations:
        doc["metadata"]["annotations"] = annotations
    return copy.deepcopy(doc)
