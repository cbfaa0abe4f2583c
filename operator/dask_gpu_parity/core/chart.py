"""The classic ``dask`` Helm chart (dask/helm-chart): its values and its rendered Deployments.

The chart renders a scheduler Deployment from ``scheduler.*`` and a worker Deployment from
``worker.*`` (labels ``app: dask``, ``release: <release>``, ``component: scheduler|worker|jupyter``,
as the chart's scheduler and worker Deployment templates write them): image ``repository:tag``,
``resources``, ``env``, ``nodeSelector``, ``affinity`` and ``tolerations`` per component, the
worker's command from ``worker.image.dask_worker``. The Jupyter Deployment is the cluster's client
and is judged like a DaskJob's runner. Values the chart has no key for (init containers, volumes,
a runtime class) cannot be written there, so those fixes are reported, not made.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .layout import Layout, Slot
from .plain import Path, as_map, get_in

__all__ = [
    "chart_deployments_layout",
    "chart_scheduler",
    "chart_values_layout",
    "find_chart_values",
]

_POD_FIELDS = frozenset({"nodeSelector", "affinity", "tolerations"})
_CONTAINER_FIELDS = frozenset({"resources", "env"})
_RELEASE_LABELS = ("release", "app.kubernetes.io/instance")


def find_chart_values(document: Any) -> bool:
    """Whether a document looks like the classic chart's values (``scheduler`` and ``worker``)."""
    if not isinstance(document, Mapping) or "kind" in document or "apiVersion" in document:
        return False
    scheduler, worker = document.get("scheduler"), document.get("worker")
    if not isinstance(scheduler, Mapping) or not isinstance(worker, Mapping):
        return False
    image = as_map(worker.get("image"))
    return "repository" in image or "dask_worker" in image or "default_resources" in worker


def _image(values: Mapping[str, Any]) -> str | None:
    image = as_map(values.get("image"))
    repository, tag = image.get("repository"), image.get("tag")
    if isinstance(repository, str) and repository and isinstance(tag, str | int | float):
        return f"{repository}:{tag}"
    return None


def _spec(values: Mapping[str, Any], name: str, args: list[str] | None) -> dict[str, Any]:
    container: dict[str, Any] = {"name": name}
    image = _image(values)
    if image:
        container["image"] = image
    if args:
        container["args"] = args
    for key in ("command", "args"):  # Jupyter's own (jupyter.command, jupyter.args)
        if args is None and isinstance(values.get(key), list):
            container[key] = values[key]
    for key in sorted(_CONTAINER_FIELDS):
        if values.get(key):
            container[key] = values[key]
    spec: dict[str, Any] = {"containers": [container]}
    for key in sorted(_POD_FIELDS):
        if values.get(key):
            spec[key] = values[key]
    return spec


def _slot(values: Mapping[str, Any], role: str, args: list[str] | None) -> Slot:
    at: Path = (role,)
    return Slot(
        pod=at,
        container=at,
        spec=_spec(values, role, args),
        image=((role, "image", "repository"), (role, "image", "tag")),
        pod_fields=_POD_FIELDS,
        container_fields=_CONTAINER_FIELDS,
        where=f"{role}.*",
    )


def chart_values_layout(document: Mapping[str, Any]) -> Layout:
    """The layout of a values file: ``scheduler.*``, ``worker.*`` and, when set, ``jupyter.*``."""
    scheduler = as_map(document.get("scheduler"))
    worker = as_map(document.get("worker"))
    command = as_map(worker.get("image")).get("dask_worker")
    worker_args = [command] if isinstance(command, str) and command else ["dask-worker"]
    jupyter = document.get("jupyter")
    runner = None
    if isinstance(jupyter, Mapping) and jupyter.get("enabled") is not False and jupyter:
        runner = _slot(jupyter, "jupyter", None)
    return Layout(
        _slot(scheduler, "scheduler", ["dask-scheduler"]),
        _slot(worker, "worker", worker_args),
        runner=runner,
        wording=(
            (
                "Scheduler has no image",
                "Scheduler runs the chart's default image (no scheduler.image)",
            ),
            ("The job runner container", "The Jupyter container"),
            ("Job runner image", "Jupyter image"),
        ),
    )


def _labels(document: Mapping[str, Any]) -> Mapping[str, Any]:
    return as_map(get_in(document, ("metadata", "labels")))


def _component(document: Any) -> str | None:
    if not isinstance(document, Mapping) or document.get("kind") != "Deployment":
        return None
    labels = _labels(document)
    component = labels.get("component")
    chart = labels.get("chart")
    is_dask = labels.get("app") == "dask" or (isinstance(chart, str) and chart.startswith("dask-"))
    return component if is_dask and isinstance(component, str) else None


def chart_scheduler(document: Any) -> bool:
    """Whether a Deployment is the classic chart's scheduler (``app: dask``, ``component``)."""
    return _component(document) == "scheduler"


def _release(document: Mapping[str, Any]) -> tuple[Any, Any]:
    labels = _labels(document)
    release = next((labels[k] for k in _RELEASE_LABELS if k in labels), None)
    return get_in(document, ("metadata", "namespace")), release


def chart_deployments_layout(
    scheduler: Mapping[str, Any], peers: Sequence[Mapping[str, Any]]
) -> Layout | None:
    """The layout of a rendered scheduler Deployment and its release's worker Deployment.

    ``None`` when the release has no worker Deployment among ``peers``: nothing to compare.
    """
    release = _release(scheduler)
    workers = [
        p
        for p in peers
        if _component(p) == "worker" and _release(p) == release and p is not scheduler
    ]
    worker_spec = get_in(workers[0], ("spec", "template", "spec")) if workers else None
    spec = get_in(scheduler, ("spec", "template", "spec"))
    if not isinstance(worker_spec, Mapping) or not isinstance(spec, Mapping):
        return None
    pod: Path = ("spec", "template", "spec")
    return Layout(
        Slot(
            pod=pod,
            container=(*pod, "containers", 0),
            spec=dict(spec),
            sidecars=(*pod, "containers"),
            sidecar_offset=0,
        ),
        Slot(pod=None, container=None, spec=dict(worker_spec)),
        root=pod,
    )
