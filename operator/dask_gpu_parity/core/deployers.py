"""Parity for the other deployers: dask-gateway and the classic ``dask`` Helm chart.

:func:`evaluate_deployer` picks the document's :class:`~.layout.Layout`, lets the engine judge
the equivalent DaskCluster and applies the fixes that have a place in the deployer's terms.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from .chart import chart_deployments_layout, chart_values_layout
from .findings import Finding
from .gateway import gateway_layout, snippet_findings, values_layout
from .layout import Layout, evaluate_layout
from .patch import apply_in_place
from .plain import copy_json
from .resources import CHART, CHART_VALUES, GATEWAY, GATEWAY_VALUES, DaskResource

__all__ = ["evaluate_deployer"]

Run = Callable[[dict[str, Any]], tuple[Any, Sequence[Finding]]]


def evaluate_deployer(
    resource: Mapping[str, Any],
    dask: DaskResource,
    run: Run,
    peers: Sequence[Mapping[str, Any]] = (),
) -> tuple[Any, list[Finding]]:
    """The patched document and the findings, in the deployer's own paths.

    Args:
        resource: the deployer's document (never changed).
        dask: its view.
        run: the engine on a DaskCluster or DaskJob: (patched, findings).
        peers: the other documents checked with it (a chart release's worker Deployment).
    """
    extra: list[Finding] = []
    layout: Layout | None
    if dask.deployer == GATEWAY:
        layout = gateway_layout(resource)
    elif dask.deployer == GATEWAY_VALUES:
        layout = values_layout(resource, dask.root)
        extra = snippet_findings(resource, dask.root)
    elif dask.deployer == CHART_VALUES:
        layout = chart_values_layout(resource)
    elif dask.deployer == CHART:
        layout = chart_deployments_layout(resource, peers)
    else:
        layout = None
    if layout is None:
        return resource, extra
    result = evaluate_layout(resource, layout, run)
    if not result.operations:
        return resource, [*result.findings, *extra]
    patched = copy_json(resource)
    apply_in_place(patched, list(result.operations))
    return patched, [*result.findings, *extra]
