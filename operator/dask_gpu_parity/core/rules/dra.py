"""DGP027, DGP028 and DGP014 on DRA nodes: what Dynamic Resource Allocation changes for placement.

A worker that asks for ``deviceclass.resource.kubernetes.io/<class>`` of a class nobody gave us
may or may not be a GPU worker: said (DGP027), never guessed. A node whose GPU Feature Discovery
labels and DRA devices name different drivers has no known class (DGP028). DRA nodes carry no GFD
labels, so a pin to a driver class cannot be a node selector there: it is a per-class DeviceClass
requested through its implicit extended-resource name (KEP-5004), which the DaskCluster CRD keeps
where it prunes claims; :func:`dra_pin` says which to request, or what to create.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dask_gpu_parity.core.deviceclasses import IMPLICIT_PREFIX, NVIDIA_DRIVER, DeviceClasses
from dask_gpu_parity.core.findings import Finding
from dask_gpu_parity.core.gpu import containers
from dask_gpu_parity.core.inventory import DriverClass, Inventory, Nodes
from dask_gpu_parity.core.patch import pointer
from dask_gpu_parity.core.plain import as_map, get_in
from dask_gpu_parity.core.resources import DaskResource
from dask_gpu_parity.core.rules.context import Context

__all__ = [
    "carry_labels",
    "dra_pin",
    "left_out",
    "sources_disagree",
    "unknown_device_classes",
]


def unknown_device_classes(
    resource: Mapping[str, Any], dask: DaskResource, classes: DeviceClasses
) -> list[Finding]:
    """DGP027 for worker containers asking for a DeviceClass the catalogue does not know."""
    if dask.worker_path is None:
        return []
    findings = []
    for index, container in containers(get_in(resource, dask.worker_path)):
        for section in ("limits", "requests"):
            for name in as_map(as_map(container.get("resources")).get(section)):
                unknown = isinstance(name, str) and classes.unknown_class(name)
                if not unknown:
                    continue
                findings.append(
                    Finding.of(
                        "DGP027",
                        pointer(*dask.worker_path, "containers", index, "resources", section, name),
                        f"Workers ask for {name}, but DeviceClass {unknown!r} is not known, so "
                        "whether they get a GPU cannot be told and GPU parity was not checked; "
                        "pass the cluster's DeviceClasses (dask-gpu-parity check --device-classes "
                        "FILE, from kubectl get deviceclasses -o yaml)",
                    )
                )
    return findings


def sources_disagree(ctx: Context, inventory: Inventory, workers: Nodes) -> list[Finding]:
    """DGP028 for nodes the workers reach whose GFD labels and DRA devices disagree."""
    found = [
        node
        for shape, members in workers.parts
        if shape.representative.disagreements
        for node in members
    ]
    if not found:
        return []
    shown = "; ".join(f"{n.name} ({'; '.join(n.disagreements)})" for n in found[:5])
    more = f" and {len(found) - 5} more" if len(found) > 5 else ""
    unknown = any(n.conflict for n in found)
    consequence = (
        "where the drivers differ the class is unknown, so placement does not count on those nodes"
        if unknown
        else "placement goes by the labels"
    )
    return [
        Finding.of(
            "DGP028",
            ctx.view.worker.ptr,
            f"{len(found)} GPU node(s) the workers can reach are described differently by GPU "
            f"Feature Discovery's labels and the DRA driver's devices ({shown}{more}); "
            f"{consequence}. Restart GPU Feature Discovery on those nodes (its labels go stale "
            "after a driver upgrade) or the DRA kubelet plugin, whichever is behind",
        )
    ]


def carry_labels(nodes: Nodes) -> bool:
    """Whether some of ``nodes`` carry GFD driver labels (a node-label pin can reach them)."""
    return any(s.representative.labelled_class is not None for s, _ in nodes.parts)


def left_out(nodes: Nodes) -> str:
    """For a message: the DRA nodes of ``nodes`` that a node-label pin leaves out, if any."""
    count = sum(
        len(m)
        for s, m in nodes.parts
        if s.representative.dra and not s.representative.labelled_class
    )
    if not count:
        return ""
    return (
        f"; {count} DRA node(s) of that class carry no GPU Feature Discovery labels and are "
        "left out by the pin"
    )


def _swap(spec: Any, old: str, new: str) -> bool:
    """Ask for ``new`` wherever the containers of ``spec`` ask for ``old`` (limits, requests)."""
    swapped = False
    for _, container in containers(spec):
        resources = container.get("resources")
        for section in ("limits", "requests"):
            values = resources.get(section) if isinstance(resources, dict) else None
            if isinstance(values, dict) and old in values:
                values[new] = values.pop(old)
                swapped = True
    return swapped


def dra_pin(ctx: Context, inventory: Inventory, chosen: DriverClass, listed: str) -> Finding:
    """DGP014 where the workers' class lives on DRA nodes, which no node label pins.

    With a GPU DeviceClass of the catalogue that selects exactly the chosen driver, scheduler
    and workers are moved onto it: they ask for its implicit extended-resource name instead of
    the workers' resource (the DaskCluster CRD keeps ``resources.limits``, not claims). Else
    the finding says which DeviceClass to create, and nothing is changed.
    """
    old = ctx.view.worker_gpus[0].resource
    kind = "mig" if "mig" in old.rsplit("/", 1)[-1] else "gpu"
    found = inventory.device_classes.pinned_to(chosen.driver, kind)
    name = found.name if found else f"{kind}-{chosen.driver.replace('.', '-')}.nvidia.com"
    new = IMPLICIT_PREFIX + name
    where = f"{ctx.view.worker.ptr}/containers/{ctx.view.worker.index}/resources"
    why = (
        f"Workers may land on several driver classes ({listed}); {chosen} is on DRA nodes, "
        "which carry no GPU Feature Discovery labels to pin by"
    )
    if found is None:
        todo = (
            f'create the DeviceClass {name} with the CEL selector "device.driver == '
            f"'{NVIDIA_DRIVER}' && device.attributes['{NVIDIA_DRIVER}'].type == '{kind}' && "
            f"device.attributes['{NVIDIA_DRIVER}'].driverVersion.compareTo(semver("
            f"'{chosen.driver}')) == 0\" and request {new} instead of {old} in scheduler and "
            "workers"
        )
        return Finding.of(
            "DGP014", where, f"{why}, so they cannot be pinned to it: {todo}", fixable=False
        )
    fixable = _swap(ctx.view.worker.spec, old, new)
    scheduler = ctx.view.scheduler
    own = {r.resource for r in scheduler.gpu_requests()} - {old}
    fixable = _swap(scheduler.spec, old, new) and fixable if not own else fixable
    kept = (
        f"; the scheduler keeps its own {', '.join(sorted(own))}, whose driver is not pinned"
        if own
        else ""
    )
    return Finding.of(
        "DGP014",
        where,
        f"{why}: pinned {'the workers' if own else 'scheduler and workers'} to it by asking "
        f"for {new} (DeviceClass {name} selects that driver) instead of {old}{kept}",
        fixable=fixable,
    )
