"""Views of Dask resources: where the scheduler, worker and job-runner pod specs live.

The dask operator's ``kubernetes.dask.org/v1`` kinds are Dask resources; the paths below follow
the dask-kubernetes CRDs: a DaskJob embeds a whole DaskCluster template under ``spec.cluster``.
Other deployers (``deployer`` other than :data:`DASK_OPERATOR`) are Dask resources too: a
dask-gateway ``DaskCluster``, the gateway's Helm values, the classic ``dask`` chart's values and
its rendered scheduler Deployment. They have no scheduler or worker path of their own:
``core/layout.py`` maps them onto a DaskCluster.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dask_gpu_parity.names import DASK_GROUP, SKIP_ANNOTATION

from .chart import chart_scheduler, find_chart_values
from .gateway import GATEWAY_GROUP, find_gateway_values
from .plain import Path, get_in

__all__ = [
    "CHART",
    "CHART_VALUES",
    "DASK_KINDS",
    "DASK_OPERATOR",
    "DEFAULT_NAMESPACE",
    "GATEWAY",
    "GATEWAY_VALUES",
    "DaskResource",
    "opted_out",
    "view",
]

DASK_OPERATOR = "dask-kubernetes"
GATEWAY = "dask-gateway"
GATEWAY_VALUES = "dask-gateway-values"
CHART = "dask-chart"
CHART_VALUES = "dask-chart-values"

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
    deployer: str = DASK_OPERATOR
    root: Path = ()  # a Helm values file's deployer mapping (e.g. gateway under dask-gateway)

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
    metadata = document.get("metadata")
    metadata = metadata if isinstance(metadata, Mapping) else {}
    name = metadata.get("name")
    namespace = metadata.get("namespace")
    other = _other_deployer(document, kind, api)
    if other is not None:
        deployer, label, root = other
        return DaskResource(
            kind=label,
            name=name if isinstance(name, str) else "",
            namespace=namespace if isinstance(namespace, str) else "",
            scheduler_path=None,
            worker_path=None,
            job_runner_path=None,
            deployer=deployer,
            root=root,
        )
    if not isinstance(kind, str) or kind not in DASK_KINDS:
        return None
    if not isinstance(api, str) or api.split("/", 1)[0] != DASK_GROUP:
        return None
    return DaskResource(
        kind=kind,
        name=name if isinstance(name, str) else "",
        namespace=namespace if isinstance(namespace, str) else "",
        scheduler_path=_SCHEDULER.get(kind),
        worker_path=_WORKER.get(kind),
        job_runner_path=("spec", "job", "spec") if kind == "DaskJob" else None,
    )


def _other_deployer(
    document: Mapping[str, Any], kind: Any, api: Any
) -> tuple[str, str, Path] | None:
    """(deployer, kind for reports, root) for a document of another deployer, else ``None``."""
    group = api.split("/", 1)[0] if isinstance(api, str) else None
    if kind == "DaskCluster" and group == GATEWAY_GROUP:
        return GATEWAY, kind, ()
    if kind == "Deployment" and group == "apps" and chart_scheduler(document):
        return CHART, kind, ()
    if kind is not None or api is not None:
        return None
    at = find_gateway_values(document)
    if at is not None:
        return GATEWAY_VALUES, "DaskGatewayValues", at
    if find_chart_values(document):
        return CHART_VALUES, "DaskChartValues", ()
    return None


def opted_out(resource: Mapping[str, Any]) -> bool:
    """Whether the resource carries ``gpuparity.dask.org/skip: "true"``."""
    annotations = get_in(resource, ("metadata", "annotations"))
    return (
        isinstance(annotations, Mapping) and str(annotations.get(SKIP_ANNOTATION)).lower() == "true"
    )
