"""Views of Dask resources: where the scheduler, worker and job-runner pod specs live.

Only ``kubernetes.dask.org/v1`` kinds are Dask resources. The paths below follow the
dask-kubernetes CRDs: a DaskJob embeds a whole DaskCluster template under ``spec.cluster``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dask_gpu_parity.names import DASK_GROUP, SKIP_ANNOTATION

from .plain import Path, get_in

__all__ = ["DASK_KINDS", "DEFAULT_NAMESPACE", "DaskResource", "opted_out", "view"]

DEFAULT_NAMESPACE = "default"  # where kubectl puts a file's object that names no namespace

_SCHEDULER: dict[str, Path | None] = {
    "DaskCluster": ("spec", "scheduler", "spec"),
    "DaskJob": ("spec", "cluster", "spec", "scheduler", "spec"),
    "DaskWorkerGroup": None,
}
_WORKER: dict[str, Path] = {
    "DaskCluster": ("spec", "worker", "spec"),
    "DaskJob": ("spec", "cluster", "spec", "worker", "spec"),
    "DaskWorkerGroup": ("spec", "worker", "spec"),
}
DASK_KINDS = frozenset(_WORKER) | {"DaskAutoscaler"}


@dataclass(frozen=True)
class DaskResource:
    """Where things are in one Dask resource. Built by :func:`view`."""

    kind: str
    name: str
    namespace: str
    scheduler_path: Path | None
    worker_path: Path | None
    job_runner_path: Path | None

    def namespace_or(self, default: str = DEFAULT_NAMESPACE) -> str:
        """The namespace the resource lands in: its own, else ``default`` (kubectl's context).

        ``namespace`` stays as written, for reports; compare resources by this one, so a group
        without a namespace meets its cluster written with ``namespace: default``.
        """
        return self.namespace or default


def view(document: Any) -> DaskResource | None:
    """A :class:`DaskResource` for a Dask document, ``None`` for anything else."""
    if not isinstance(document, Mapping):
        return None
    kind = document.get("kind")
    api = document.get("apiVersion")
    if not isinstance(kind, str) or kind not in DASK_KINDS:
        return None
    if not isinstance(api, str) or api.split("/", 1)[0] != DASK_GROUP:
        return None
    metadata = document.get("metadata")
    metadata = metadata if isinstance(metadata, Mapping) else {}
    name = metadata.get("name")
    namespace = metadata.get("namespace")
    return DaskResource(
        kind=kind,
        name=name if isinstance(name, str) else "",
        namespace=namespace if isinstance(namespace, str) else "",
        scheduler_path=_SCHEDULER.get(kind),
        worker_path=_WORKER.get(kind),
        job_runner_path=("spec", "job", "spec") if kind == "DaskJob" else None,
    )


def opted_out(resource: Mapping[str, Any]) -> bool:
    """Whether the resource carries ``gpuparity.dask.org/skip: "true"``."""
    annotations = get_in(resource, ("metadata", "annotations"))
    return (
        isinstance(annotations, Mapping) and str(annotations.get(SKIP_ANNOTATION)).lower() == "true"
    )
