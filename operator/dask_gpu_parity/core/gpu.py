"""GPU requests, quantities, protocol, image and environment of pod specs.

Everything here reads plain pod-spec dicts and never raises on malformed input: a value of the
wrong type simply does not count (the schema rule reports it).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeGuard

from . import quantity
from .deviceclasses import NVIDIA_CLASSES, DeviceClasses

__all__ = [
    "GpuRequest",
    "Protocol",
    "RefusedGpu",
    "admitted_gpus",
    "command",
    "containers",
    "env_value",
    "gpu_requests",
    "is_gpu_resource",
    "protocol",
    "refused_gpus",
    "runs_program",
    "scheduler_container",
    "selects_ucx",
]

_MIG = re.compile(r"^nvidia\.com/mig-\d+g\.\d+gb")
_PLUGIN_NAMES = frozenset({"nvidia.com/gpu", "nvidia.com/gpu.shared"})
Protocol = str  # "tcp" or "ucx"


def _is_map(value: Any) -> TypeGuard[Mapping[Any, Any]]:
    """Whether ``value`` is a mapping; plain dicts, what the readers make, without ABC checks."""
    return value.__class__ is dict or isinstance(value, Mapping)


def is_gpu_resource(name: str, classes: DeviceClasses = NVIDIA_CLASSES) -> bool:
    """Whether ``name`` is an NVIDIA GPU resource: whole, shared, a MIG slice, or a DRA one.

    The device plugin's names, and under DRA the extended-resource names of the GPU
    DeviceClasses in ``classes`` (their ``extendedResourceName`` and the implicit
    ``deviceclass.resource.kubernetes.io/<class>``). Two set lookups and a regex at most.
    """
    return (
        name in _PLUGIN_NAMES
        or name in classes.gpu_names
        or (name.startswith("nvidia.com/mig-") and _MIG.match(name) is not None)
    )


def containers(pod_spec: Any, key: str = "containers") -> Iterator[tuple[int, Mapping[str, Any]]]:
    """The well-formed containers of a pod spec, with their index."""
    if pod_spec.__class__ is not dict and not isinstance(pod_spec, Mapping):
        return
    items = pod_spec.get(key)
    if not isinstance(items, list):
        return
    for index, container in enumerate(items):
        if container.__class__ is dict or isinstance(container, Mapping):
            yield index, container


@dataclass(frozen=True)
class GpuRequest:
    """A GPU resource that a container asks for, and where."""

    resource: str
    quantity: Any
    container: int
    section: str  # "limits" or "requests"


def gpu_requests(pod_spec: Any, classes: DeviceClasses = NVIDIA_CLASSES) -> list[GpuRequest]:
    """Every positive GPU request of every container of the pod spec.

    Init containers are left out: kubelet lends them the app containers' devices. ``classes``:
    the DeviceClasses whose extended-resource names are GPUs too.
    """
    found: list[GpuRequest] = []
    for index, container in containers(pod_spec):
        resources = container.get("resources")
        if not _is_map(resources):
            continue
        for section in ("limits", "requests"):
            values = resources.get(section)
            if not _is_map(values):
                continue
            for name, amount in values.items():
                gpu = isinstance(name, str) and is_gpu_resource(name, classes)
                if gpu and (quantity.parse(amount) or 0) > 0:  # parsed for GPUs only
                    found.append(GpuRequest(name, amount, index, section))
    return found


@dataclass(frozen=True)
class RefusedGpu:
    """A GPU quantity of one container that the API server refuses, and its words for why."""

    resource: str
    section: str  # where the refused value is: "limits" or "requests"
    quantity: Any
    reason: str


def refused_gpus(
    container: Mapping[str, Any], classes: DeviceClasses = NVIDIA_CLASSES
) -> list[RefusedGpu]:
    """The container's GPU requests that the API server refuses, one per resource.

    Extended resources such as ``nvidia.com/gpu`` are integers and cannot be overcommitted, so
    (k8s ``pkg/apis/core/validation``: ``ValidateResourceQuantityValue``,
    ``validateResourceRequirements``): a quantity must be whole (``must be an integer``); a
    request needs a limit (``Limit must be set for non overcommitable resources``); with both,
    they must be equal (``must be equal to <resource> limit``). A limit alone is fine: the
    request defaults to it. Values that are no quantity at all are the schema rule's business.
    """
    limits, requests = _section(container, "limits"), _section(container, "requests")
    refused: list[RefusedGpu] = []
    if not limits and not requests:
        return refused
    for name in dict.fromkeys([*limits, *requests]):
        if not (isinstance(name, str) and is_gpu_resource(name, classes)):
            continue
        limit, request = quantity.parse(limits.get(name)), quantity.parse(requests.get(name))
        if (name in limits and limit is None) or (name in requests and request is None):
            continue  # not a quantity: DGP011
        for section, number in (("limits", limit), ("requests", request)):
            if number is not None and number != number.to_integral_value():
                values = limits if section == "limits" else requests
                refused.append(RefusedGpu(name, section, values[name], "must be an integer"))
                break
        else:
            if request is not None and limit is None:
                reason = "Limit must be set for non overcommitable resources"
                refused.append(RefusedGpu(name, "requests", requests[name], reason))
            elif request is not None and limit is not None and request != limit:
                reason = f"must be equal to {name} limit of {limits[name]}"
                refused.append(RefusedGpu(name, "requests", requests[name], reason))
    return refused


def admitted_gpus(
    container: Mapping[str, Any], index: int, classes: DeviceClasses = NVIDIA_CLASSES
) -> list[GpuRequest]:
    """The GPUs the container really gets: positive limits that the API server admits."""
    refused = {r.resource for r in refused_gpus(container, classes)}
    return [
        GpuRequest(name, amount, index, "limits")
        for name, amount in _section(container, "limits").items()
        if isinstance(name, str) and is_gpu_resource(name, classes) and name not in refused
        if (quantity.parse(amount) or 0) > 0
    ]


def _section(container: Mapping[str, Any], section: str) -> Mapping[Any, Any]:
    resources = container.get("resources")
    if resources.__class__ is not dict and not isinstance(resources, Mapping):
        return {}
    values = resources.get(section)
    return values if values.__class__ is dict or isinstance(values, Mapping) else {}


def command(container: Mapping[str, Any]) -> tuple[tuple[str, ...], str]:
    """The command line as words (shell strings split, paths to base names) and as one string."""
    words: list[str] = []
    strings: list[str] = []
    for key in ("command", "args"):
        value = container.get(key)
        if isinstance(value, list):
            for item in value:
                if isinstance(item, str):
                    strings.append(item)
                    words += [w.rsplit("/", 1)[-1] for w in _SPLIT.split(item) if w]
    return tuple(words), " ".join(strings)


_SPLIT = re.compile(r"[\s;&|()'\"`]+")


def runs_program(words: tuple[str, ...], *program: str) -> bool:
    """Whether command-line ``words`` run ``dask-a-b`` or ``dask a b`` (``program`` = a, b)."""
    if "-".join(("dask", *program)) in words:
        return True
    wanted, n = ("dask", *program), len(program) + 1
    return any(words[i : i + n] == wanted for i in range(len(words) - n + 1))


def scheduler_container(pod_spec: Any) -> tuple[int, Mapping[str, Any]] | None:
    """The scheduler's container of a scheduler pod spec.

    The one that runs ``dask-scheduler`` or ``dask scheduler``, else the one named
    ``scheduler``, else the first (the dask operator's ``KubeCluster`` reads ``containers[0]``).
    """
    found = list(containers(pod_spec))
    for test in (
        lambda c: runs_program(command(c)[0], "scheduler"),
        lambda c: c.get("name") == "scheduler",
    ):
        for index, container in found:
            if test(container):
                return index, container
    return found[0] if found else None


def env_value(container: Mapping[str, Any], name: str) -> str | None:
    """The literal value of an environment variable of a container, if set."""
    env = container.get("env")
    if not isinstance(env, list):
        return None
    for item in env:
        if _is_map(item) and item.get("name") == name:
            value = item.get("value")
            return value if isinstance(value, str) else None
    return None


_UCX_FLAG = re.compile(r"--protocol[= ]+ucxx?\b|\bucxx?://", re.IGNORECASE)
_SCHEME_VARS = ("DASK_DISTRIBUTED__COMM__DEFAULT_SCHEME", "DASK_DISTRIBUTED__COMM__PROTOCOL")


def selects_ucx(container: Mapping[str, Any], line: str) -> bool:
    """Whether the container, whose command and args joined are ``line``, selects UCX/UCXX.

    Recognises ``--protocol ucx`` (as two words or inside a shell string), ``--protocol=ucxx``,
    ``ucx://`` addresses and ``DASK_DISTRIBUTED__COMM__DEFAULT_SCHEME=ucx``.
    """
    if _UCX_FLAG.search(line):
        return True
    for var in _SCHEME_VARS:
        value = env_value(container, var)
        if value and value.strip().lower() in ("ucx", "ucxx"):
            return True
    return False


def protocol(*pod_specs: Any) -> Protocol:
    """``"ucx"`` when any container of the pod specs selects UCX/UCXX (:func:`selects_ucx`)."""
    for pod_spec in pod_specs:
        for _, container in containers(pod_spec):
            if selects_ucx(container, command(container)[1]):
                return "ucx"
    return "tcp"
