"""dask-gateway: its Kubernetes backend's DaskCluster objects and the gateway's Helm values.

The gateway's ``DaskCluster`` (``gateway.dask.org/v1alpha1``) carries the cluster's whole
configuration in ``spec.config`` (``KubeBackend.make_cluster_object``); its controller builds
the scheduler Pod from ``image``, ``scheduler_extra_pod_config`` and
``scheduler_extra_container_config`` and the worker Pods from ``image`` and the ``worker_*``
dicts (``KubeController.make_pod``: dicts deep-merged, lists appended). The Helm chart fills
the same traits from ``gateway.backend.{image,scheduler,worker}``; ``gateway.extraConfig``
snippets are Python, read here only where they assign a literal to a ``c.KubeClusterConfig`` trait.
"""

from __future__ import annotations

import ast
from collections.abc import Mapping
from typing import Any

from .findings import Finding, Severity
from .layout import Layout, Slot
from .patch import pointer
from .plain import Path, as_map, copy_json, get_in

__all__ = [
    "GATEWAY_GROUP",
    "GATEWAY_VERSION",
    "find_gateway_values",
    "gateway_layout",
    "snippet_findings",
]

GATEWAY_GROUP = "gateway.dask.org"
GATEWAY_VERSION = "v1alpha1"  # the gateway CRD's only version (KubeBackend.crd_version)
_TRAITS = (
    "image",
    "scheduler_extra_pod_config",
    "scheduler_extra_container_config",
    "worker_extra_pod_config",
    "worker_extra_container_config",
)
_PYTHON_ONLY = ("options_handler", "cluster_options", "Options(")


def _merge(base: Mapping[str, Any], extra: Any) -> dict[str, Any]:
    """dask-gateway's ``merge_json_objects``: dicts merged, lists appended, else ``extra`` wins."""
    out = dict(copy_json(dict(base)))
    for key, value in as_map(extra).items():
        old = out.get(key)
        if isinstance(old, dict) and isinstance(value, Mapping):
            out[key] = _merge(old, value)
        elif isinstance(old, list) and isinstance(value, list):
            out[key] = old + copy_json(value)
        else:
            out[key] = copy_json(value)
    return out


def _pod(name: str, image: Any, pod: Any, container: Any) -> dict[str, Any]:
    main: dict[str, Any] = {"name": name}
    if isinstance(image, str) and image:
        main["image"] = image
    return _merge({"containers": [_merge(main, container)]}, pod)


def _layout(config: Mapping[str, Any], at: dict[str, Path], metadata: Any, image: Any) -> Layout:
    worker_image = as_map(config.get("worker_extra_container_config")).get("image")
    own = as_map(config.get("scheduler_extra_container_config")).get("image")
    # The shared image is the scheduler's only when the workers keep it too.
    scheduler_image = own or (None if worker_image else image)
    slots = {}
    for role, name, role_image in (
        ("scheduler", "dask-scheduler", scheduler_image),
        ("worker", "dask-worker", image),
    ):
        pod_path, container_path = at[f"{role}_pod"], at[f"{role}_container"]
        spec = _pod(
            name,
            role_image,
            config.get(f"{role}_extra_pod_config"),
            config.get(f"{role}_extra_container_config"),
        )
        slots[role] = Slot(
            pod=pod_path,
            container=container_path,
            spec=spec,
            sidecars=(*pod_path, "containers"),
            where=pointer(*pod_path),
        )
    wording = (
        (
            "Scheduler has no image",
            "Scheduler runs the shared image while worker_extra_container_config gives the "
            "workers their own",
        ),
    )
    return Layout(
        slots["scheduler"], slots["worker"], metadata=metadata, root=at["root"], wording=wording
    )


def gateway_layout(document: Mapping[str, Any]) -> Layout:
    """The layout of a gateway ``DaskCluster``: every trait under ``spec.config``."""
    config = as_map(get_in(document, ("spec", "config")))
    base: Path = ("spec", "config")
    at = {
        "root": base,
        "scheduler_pod": (*base, "scheduler_extra_pod_config"),
        "scheduler_container": (*base, "scheduler_extra_container_config"),
        "worker_pod": (*base, "worker_extra_pod_config"),
        "worker_container": (*base, "worker_extra_container_config"),
    }
    metadata = {
        k: v
        for k, v in as_map(document.get("metadata")).items()
        if k in ("name", "namespace", "annotations")
    }
    return _layout(config, at, metadata, config.get("image"))


def find_gateway_values(document: Any) -> Path | None:
    """Where the ``gateway`` mapping of dask-gateway's chart sits in a values file, if any.

    At the top (the chart itself), under ``dask-gateway`` (daskhub) or one level deeper (a
    chart that depends on daskhub, as 2i2c's and Pangeo's do).
    """
    if not isinstance(document, Mapping) or "kind" in document or "apiVersion" in document:
        return None
    candidates: list[Path] = [("gateway",), ("dask-gateway", "gateway")]
    candidates += [(k, "dask-gateway", "gateway") for k in document if isinstance(k, str)]
    for path in candidates:
        gateway = get_in(document, path)
        if isinstance(gateway, Mapping) and _is_gateway(gateway):
            return path
    return None


def _is_gateway(gateway: Mapping[str, Any]) -> bool:
    backend = as_map(gateway.get("backend"))
    if any(k in backend for k in ("scheduler", "worker", "image")):
        return True
    return any("ClusterConfig" in text for _, text in _snippets(gateway))


def _snippets(gateway: Mapping[str, Any]) -> list[tuple[str, str]]:
    extra = gateway.get("extraConfig")
    if isinstance(extra, str):
        return [("", extra)]
    return [(str(k), v) for k, v in as_map(extra).items() if isinstance(v, str)]


def values_layout(document: Mapping[str, Any], at: Path) -> Layout:
    """The layout of the gateway's Helm values (``gateway.backend.*``), snippets read in."""
    gateway = as_map(get_in(document, at))
    backend = as_map(gateway.get("backend"))
    image = as_map(backend.get("image"))
    name, tag = image.get("name"), image.get("tag")
    text = f"{name}:{tag}" if isinstance(name, str) and isinstance(tag, str | int) else None
    config: dict[str, Any] = {}
    for role in ("scheduler", "worker"):
        values = as_map(backend.get(role))
        config[f"{role}_extra_pod_config"] = values.get("extraPodConfig")
        config[f"{role}_extra_container_config"] = values.get("extraContainerConfig")
    assigned = _assigned(gateway)
    config.update(assigned)
    b: Path = (*at, "backend")
    paths = {
        "root": at,
        "scheduler_pod": (*b, "scheduler", "extraPodConfig"),
        "scheduler_container": (*b, "scheduler", "extraContainerConfig"),
        "worker_pod": (*b, "worker", "extraPodConfig"),
        "worker_container": (*b, "worker", "extraContainerConfig"),
    }
    layout = _layout(config, paths, {}, assigned.get("image", text))
    # A snippet that assigns a scheduler trait replaces what the values set: a fix written
    # into the values would be lost, so the values are reported on, not changed.
    overridden = any(k.startswith("scheduler_") for k in assigned)
    return Layout(
        layout.scheduler, layout.worker, root=at, fixable=not overridden, wording=layout.wording
    )


def _assigned(gateway: Mapping[str, Any]) -> dict[str, Any]:
    """Literal values that snippets assign to ``c.KubeClusterConfig`` traits, last one wins."""
    found: dict[str, Any] = {}
    for _, text in _snippets(gateway):
        for trait, value in _assignments(text):
            if value is not _UNREADABLE:
                found[trait] = value
    return found


_UNREADABLE = object()


def _assignments(text: str) -> list[tuple[str, Any]]:
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return []
    out = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Assign):
            continue
        for target in node.targets:
            trait = _trait(target)
            if trait is None:
                continue
            try:
                out.append((trait, ast.literal_eval(node.value)))
            except ValueError:
                out.append((trait, _UNREADABLE))
    return out


def _trait(target: ast.expr) -> str | None:
    if not isinstance(target, ast.Attribute) or target.attr not in _TRAITS:
        return None
    owner = target.value
    if isinstance(owner, ast.Attribute) and owner.attr in ("KubeClusterConfig", "ClusterConfig"):
        return target.attr
    return None


def snippet_findings(document: Mapping[str, Any], at: Path) -> list[Finding]:
    """DGP030 for ``extraConfig`` snippets whose effect on the pods cannot be read."""
    gateway = as_map(get_in(document, at))
    extra = gateway.get("extraConfig")
    findings = []
    for key, text in _snippets(gateway):
        path = pointer(*at, "extraConfig", *((key,) if isinstance(extra, Mapping) else ()))
        assignments = _assignments(text)
        unreadable = sorted({t for t, v in assignments if v is _UNREADABLE})
        replaced = sorted(
            {t for t, v in assignments if t.startswith("scheduler_")} - set(unreadable)
        )
        if replaced:
            findings.append(
                Finding.of(
                    "DGP030",
                    path,
                    f"extraConfig snippet {key or 'extraConfig'!r} sets {', '.join(replaced)}, "
                    "which replaces backend.scheduler values: dask-gpu-parity reads it but writes "
                    "no fix into the values; make the scheduler's changes in the snippet",
                )
            )
        python = [p.rstrip("(") for p in _PYTHON_ONLY if p in text]
        if not unreadable and not python:
            continue
        what = ", ".join(unreadable + python)
        gpu = "gpu" in text.lower()
        findings.append(
            Finding.of(
                "DGP030",
                path,
                f"extraConfig snippet {key or 'extraConfig'!r} sets {what} in Python code, which "
                "cannot be judged offline"
                + (" and mentions GPUs" if gpu else "")
                + ": make every option that gives workers a GPU give the scheduler the same "
                "GPU resource and image too, and admit the gateway's DaskCluster objects with "
                "the dask-gpu-parity webhook, which judges the options users chose",
                severity=Severity.WARNING if gpu else Severity.INFO,
            )
        )
    return findings
