"""Dask manifests the demo and e2e tests share, and helpers to classify example files."""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import yaml

from .pools import GPU_TAINT, POOLS

__all__ = [
    "DASK_IMAGE",
    "cluster_spec",
    "gpu_dask_cluster",
    "has_gpu_workers",
    "load_gpu_examples",
    "worker_replicas",
]

DASK_IMAGE = "rapidsai/base:25.08-cuda12.8-py3.12"
_GPU_KEYS = ("nvidia.com/gpu", "nvidia.com/mig-")


def gpu_dask_cluster(name: str, *, workers: int = 2, pool: str = "a100") -> dict[str, Any]:
    """A DaskCluster whose workers each take one GPU of ``pool``; the scheduler asks for none.

    This is what RAPIDS users write (and what ``make_cluster_spec`` nudges towards when the
    scheduler is given its own spec): the baseline this project fixes.
    """
    product = POOLS[pool].product
    toleration = {"key": GPU_TAINT["key"], "operator": "Exists", "effect": GPU_TAINT["effect"]}
    ports = [
        {"name": "tcp-comm", "containerPort": 8786, "protocol": "TCP"},
        {"name": "http-dashboard", "containerPort": 8787, "protocol": "TCP"},
    ]
    return {
        "apiVersion": "kubernetes.dask.org/v1",
        "kind": "DaskCluster",
        "metadata": {"name": name},
        "spec": {
            "worker": {
                "replicas": workers,
                "spec": {
                    "nodeSelector": {"nvidia.com/gpu.product": product},
                    "tolerations": [toleration],
                    "containers": [
                        {
                            "name": "worker",
                            "image": DASK_IMAGE,
                            "args": ["dask-cuda-worker", "--name", "$(DASK_WORKER_NAME)"],
                            "resources": {"limits": {"nvidia.com/gpu": "1"}},
                        }
                    ],
                },
            },
            "scheduler": {
                "spec": {
                    "containers": [
                        {
                            "name": "scheduler",
                            "image": DASK_IMAGE,
                            "args": ["dask-scheduler", "--host", "0.0.0.0"],
                            "ports": ports,
                        }
                    ]
                },
                "service": {
                    "type": "ClusterIP",
                    "selector": {
                        "dask.org/cluster-name": name,
                        "dask.org/component": "scheduler",
                    },
                    "ports": [
                        {
                            "name": p["name"],
                            "protocol": "TCP",
                            "port": p["containerPort"],
                            "targetPort": p["name"],
                        }
                        for p in ports
                    ],
                },
            },
        },
    }


def cluster_spec(doc: Mapping[str, Any]) -> Mapping[str, Any]:
    """The DaskCluster spec of a DaskCluster or DaskJob document."""
    spec: Mapping[str, Any]
    if doc.get("kind") == "DaskJob":
        spec = doc.get("spec", {}).get("cluster", {}).get("spec", {})
    else:
        spec = doc.get("spec", {})
    return spec


def worker_replicas(doc: Mapping[str, Any]) -> int:
    """Worker count of a DaskCluster or DaskJob document (CRD default 1)."""
    return int(cluster_spec(doc).get("worker", {}).get("replicas", 1))


def has_gpu_workers(doc: Mapping[str, Any]) -> bool:
    """Whether a DaskCluster/DaskJob's worker containers request a GPU or MIG slice."""
    if doc.get("kind") not in {"DaskCluster", "DaskJob"}:
        return False
    containers = cluster_spec(doc).get("worker", {}).get("spec", {}).get("containers", [])
    for c in containers:
        res = c.get("resources") or {}
        keys: Iterable[str] = [*(res.get("limits") or {}), *(res.get("requests") or {})]
        if any(k.startswith(_GPU_KEYS) for k in keys):
            return True
    return False


def load_gpu_examples(directory: Path) -> tuple[list[tuple[Path, dict[str, Any]]], list[str]]:
    """GPU DaskClusters/DaskJobs under ``directory``; plus notes on what was skipped and why."""
    found: list[tuple[Path, dict[str, Any]]] = []
    skipped: list[str] = []
    for path in sorted([*directory.rglob("*.yaml"), *directory.rglob("*.yml")]):
        try:
            docs = [d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict)]
        except yaml.YAMLError as exc:
            skipped.append(f"{path.name}: not valid YAML ({exc})")
            continue
        for doc in docs:
            kind = doc.get("kind", "?")
            name = doc.get("metadata", {}).get("name", "?")
            if has_gpu_workers(doc):
                found.append((path, copy.deepcopy(doc)))
            else:
                skipped.append(
                    f"{path.name}: {kind}/{name} (not a DaskCluster/DaskJob with GPU workers)"
                )
    return found, skipped
