"""GPU requests, quantities, protocol, image and environment of pod specs.

Everything here reads plain pod-spec dicts and never raises on malformed input: a value of the
wrong type simply does not count (the schema rule reports it).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from . import quantity

__all__ = [
    "GpuRequest",
    "Protocol",
    "containers",
    "env_value",
    "gpu_requests",
    "is_gpu_resource",
    "primary_container",
    "protocol",
]

_MIG = re.compile(r"^nvidia\.com/mig-\d+g\.\d+gb")
Protocol = str  # "tcp" or "ucx"


def is_gpu_resource(name: str) -> bool:
    """Whether ``name`` is an NVIDIA GPU resource: whole, shared or a MIG slice."""
    return name in ("nvidia.com/gpu", "nvidia.com/gpu.shared") or bool(_MIG.match(name))


def containers(pod_spec: Any, key: str = "containers") -> Iterator[tuple[int, Mapping[str, Any]]]:
    """The well-formed containers of a pod spec, with their index."""
    if not isinstance(pod_spec, Mapping):
        return
    items = pod_spec.get(key)
    if not isinstance(items, list):
        return
    for index, container in enumerate(items):
        if isinstance(container, Mapping):
            yield index, container


@dataclass(frozen=True)
class GpuRequest:
    """A GPU resource that a container asks for, and where."""

    resource: str
    quantity: Any
    container: int
    section: str  # "limits" or "requests"


def gpu_requests(pod_spec: Any) -> list[GpuRequest]:
    """Every positive GPU request of every container of the pod spec.

    Init containers are left out: kubelet lends them the app containers' devices.
    """
    found: list[GpuRequest] = []
    for index, container in containers(pod_spec):
        resources = container.get("resources")
        if not isinstance(resources, Mapping):
            continue
        for section in ("limits", "requests"):
            values = resources.get(section)
            if not isinstance(values, Mapping):
                continue
            for name, amount in values.items():
                gpu = isinstance(name, str) and is_gpu_resource(name)
                if gpu and (quantity.parse(amount) or 0) > 0:  # parsed for GPUs only
                    found.append(GpuRequest(name, amount, index, section))
    return found


def primary_container(pod_spec: Any) -> tuple[int, Mapping[str, Any]] | None:
    """The container that does the work: the first that asks for a GPU, else the first."""
    requests = gpu_requests(pod_spec)
    wanted = requests[0].container if requests else 0
    for index, container in containers(pod_spec):
        if index >= wanted:
            return index, container
    return None


def env_value(container: Mapping[str, Any], name: str) -> str | None:
    """The literal value of an environment variable of a container, if set."""
    env = container.get("env")
    if not isinstance(env, list):
        return None
    for item in env:
        if isinstance(item, Mapping) and item.get("name") == name:
            value = item.get("value")
            return value if isinstance(value, str) else None
    return None


_UCX_FLAG = re.compile(r"--protocol[= ]+ucxx?\b|\bucxx?://", re.IGNORECASE)
_SCHEME_VARS = ("DASK_DISTRIBUTED__COMM__DEFAULT_SCHEME", "DASK_DISTRIBUTED__COMM__PROTOCOL")


def protocol(*pod_specs: Any) -> Protocol:
    """``"ucx"`` when any container's command, args or env selects UCX/UCXX, else ``"tcp"``.

    Recognises ``--protocol ucx`` (as two words or inside a shell string), ``--protocol=ucxx``,
    ``ucx://`` addresses and ``DASK_DISTRIBUTED__COMM__DEFAULT_SCHEME=ucx``.
    """
    for pod_spec in pod_specs:
        for _, container in containers(pod_spec):
            words: list[str] = []
            for key in ("command", "args"):
                value = container.get(key)
                if isinstance(value, list):
                    words.extend(w for w in value if isinstance(w, str))
            if _UCX_FLAG.search(" ".join(words)):
                return "ucx"
            for var in _SCHEME_VARS:
                value = env_value(container, var)
                if value and value.strip().lower() in ("ucx", "ucxx"):
                    return "ucx"
    return "tcp"
