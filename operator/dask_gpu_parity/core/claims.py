"""GPUs a Pod gets through DRA claims: ``spec.resourceClaims`` and ``resources.claims``.

Pods can carry claims; DaskClusters cannot (their CRD prunes both fields), so this reads the Pods
the dask operator creates. A pod claim names a ResourceClaim or a ResourceClaimTemplate; their
requests name DeviceClasses (``exactly.deviceClassName``, each of ``firstAvailable``, or the
``deviceClassName`` of ``resource.k8s.io/v1beta1``). A container claims a GPU when a request it
uses names a GPU class (in a prioritized list, any alternative: it may get that one). What
cannot be resolved (a claim or template not given, a class not known) is said, never read as
"no GPU". Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .deviceclasses import DeviceClasses
from .gpu import containers
from .plain import as_list, as_map

__all__ = ["ClaimedGpu", "Claims", "claimed_gpus"]


@dataclass(frozen=True)
class ClaimedGpu:
    """A container's claim of GPU devices: which pod claim, which request, which classes."""

    container: int
    claim: str
    request: str
    classes: tuple[str, ...]


@dataclass(frozen=True)
class Claims:
    """The GPUs a pod's containers claim, and what could not be resolved."""

    gpus: tuple[ClaimedGpu, ...]
    unresolved: tuple[str, ...]


def _requests(obj: Mapping[str, Any]) -> list[tuple[str, tuple[str, ...]]]:
    """(request name, the DeviceClasses it may be served from) of a claim or claim template."""
    spec = as_map(obj.get("spec"))
    if obj.get("kind") == "ResourceClaimTemplate":
        spec = as_map(spec.get("spec"))
    found = []
    for raw in as_list(as_map(spec.get("devices")).get("requests")):
        request = as_map(raw)
        names = [
            as_map(request.get("exactly")).get("deviceClassName"),
            request.get("deviceClassName"),
        ]
        names += [
            as_map(alt).get("deviceClassName") for alt in as_list(request.get("firstAvailable"))
        ]
        found.append((str(request.get("name", "")), tuple(n for n in names if isinstance(n, str))))
    return found


def claimed_gpus(
    pod: Mapping[str, Any], classes: DeviceClasses, objects: Iterable[Mapping[str, Any]] = ()
) -> Claims:
    """The GPU claims of a Pod's containers (init containers left out, as for resources).

    Args:
        pod: a Pod object (``metadata.namespace`` is matched against the claims').
        classes: the DeviceClasses known.
        objects: ResourceClaims and ResourceClaimTemplates the pod's claims may name.
    """
    namespace = as_map(pod.get("metadata")).get("namespace")
    by_ref: dict[tuple[str, str], Mapping[str, Any]] = {}
    for obj in objects:
        meta = as_map(obj.get("metadata"))
        if meta.get("namespace") in (None, namespace) and isinstance(meta.get("name"), str):
            by_ref[str(obj.get("kind")), meta["name"]] = obj
    spec = as_map(pod.get("spec"))
    pod_claims: dict[str, list[tuple[str, tuple[str, ...]]] | None] = {}
    unresolved: list[str] = []
    for raw in as_list(spec.get("resourceClaims")):
        claim = as_map(raw)
        name = str(claim.get("name", ""))
        kind, ref = (
            ("ResourceClaim", claim.get("resourceClaimName"))
            if claim.get("resourceClaimName")
            else ("ResourceClaimTemplate", claim.get("resourceClaimTemplateName"))
        )
        found = by_ref.get((kind, str(ref)))
        pod_claims[name] = _requests(found) if found is not None else None
        if found is None:
            unresolved.append(f"Pod claim {name!r}: {kind} {ref} was not given")
    gpus: list[ClaimedGpu] = []
    for index, container in containers(spec):
        for raw_use in as_list(as_map(container.get("resources")).get("claims")):
            use = as_map(raw_use)
            name, only = str(use.get("name", "")), use.get("request")
            for request, names in pod_claims.get(name) or []:
                if only not in (None, request):
                    continue
                unknown = [n for n in names if n not in classes.by_name]
                unresolved += [f"Pod claim {name!r}: DeviceClass {n} is not known" for n in unknown]
                if any(n in classes.by_name and classes.by_name[n].gpu for n in names):
                    gpus.append(ClaimedGpu(index, name, request, names))
    return Claims(tuple(gpus), tuple(dict.fromkeys(unresolved)))
