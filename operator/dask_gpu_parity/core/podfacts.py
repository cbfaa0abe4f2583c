"""One pass over the pod specs of a Dask resource: what the rules read about their containers.

Every rule asks the same questions of the same containers: which GPUs each requests, which of
them the API server refuses, which quantities it rejects, what the command line runs and which
protocol it speaks. :func:`pod_facts` answers them once per document, in one walk over each
container's ``resources`` and ``command``/``args``, and the rules read the answers instead of
walking the containers again. The answers are those of :mod:`.gpu`'s functions, which stay the
definition (and what a caller without facts uses).

The facts describe the pods as written. A rule that fixes a pod writes into the patched copy and
does not update them; a rule that needs the pod as it is now reads the copy.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

from . import quantity
from .deviceclasses import DeviceClasses
from .gpu import GpuRequest, RefusedGpu, command, refused_gpus, runs_program, selects_ucx
from .gpu import is_gpu_resource as _is_gpu
from .plain import Path, get_in
from .resources import DaskResource

__all__ = ["ContainerFacts", "PodFacts", "Pods", "pod_facts"]

_SECTIONS = ("limits", "requests")
_NO_WORDS: tuple[str, ...] = ()


# NamedTuples rather than frozen dataclasses: built for every container of every document
# checked, where a dataclass's frozen ``__init__`` costs several times a tuple's.
class ContainerFacts(NamedTuple):
    """One well-formed container of a pod spec, as written."""

    position: int  # in the pod spec's list (``index`` is a tuple method)
    container: Mapping[str, Any]
    gpus: tuple[GpuRequest, ...]  # positive GPU requests, limits first (``gpu.gpu_requests``)
    refused: tuple[RefusedGpu, ...]  # ``gpu.refused_gpus``
    bad_quantities: tuple[tuple[str, Any, str], ...]  # (section, name, value) the Pod API rejects
    words: tuple[str, ...]  # command and args as words, base names (app containers only)
    line: str  # command and args strings joined by spaces (app containers only)

    def admitted(self) -> list[GpuRequest]:
        """``gpu.admitted_gpus``: positive GPU limits that the API server admits."""
        if not self.gpus:
            return []
        refused = {r.resource for r in self.refused}
        return [g for g in self.gpus if g.section == "limits" and g.resource not in refused]

    def runs(self, *program: str) -> bool:
        """Whether the command line runs ``dask-a-b`` or ``dask a b`` (``program`` = a, b)."""
        return runs_program(self.words, *program)


class PodFacts(NamedTuple):
    """One pod spec of the resource, as written."""

    role: str  # "scheduler", "worker" or "job runner"
    path: Path
    spec: Any  # as found at ``path``: maybe not a mapping at all
    containers: tuple[ContainerFacts, ...]
    init_containers: tuple[ContainerFacts, ...]

    @property
    def gpus(self) -> list[GpuRequest]:
        """``gpu.gpu_requests`` of the pod: every positive GPU request of its containers."""
        return [g for c in self.containers for g in c.gpus]

    def scheduler(self) -> ContainerFacts | None:
        """``gpu.scheduler_container``: runs the scheduler, else named so, else the first."""
        found = self.containers
        for facts in found:
            if facts.runs("scheduler"):
                return facts
        for facts in found:
            if facts.container.get("name") == "scheduler":
                return facts
        return found[0] if found else None

    def primary(self) -> ContainerFacts | None:
        """The container that does the work: the first that asks for a GPU, else the first."""
        wanted = next((c.position for c in self.containers if c.gpus), 0)
        return next((c for c in self.containers if c.position >= wanted), None)

    def ucx(self) -> bool:
        """Whether any container selects UCX (``gpu.protocol``)."""
        return any(selects_ucx(facts.container, facts.line) for facts in self.containers)


class Pods(NamedTuple):
    """The pod specs of a Dask resource, each ``None`` where its kind has none."""

    scheduler: PodFacts | None
    worker: PodFacts | None
    job_runner: PodFacts | None

    def present(self) -> list[PodFacts]:
        """The pod specs its kind has, in the order the rules report them."""
        return [pod for pod in (self.scheduler, self.worker, self.job_runner) if pod is not None]


def pod_facts(resource: Any, dask: DaskResource, classes: DeviceClasses) -> Pods:
    """The facts of each pod spec of a Dask resource (``classes``: whose names are GPUs)."""

    def pod(role: str, path: Path | None) -> PodFacts | None:
        if path is None:
            return None
        spec = get_in(resource, path)
        return PodFacts(
            role,
            path,
            spec,
            _containers(spec, "containers", classes),
            _containers(spec, "initContainers", classes),
        )

    return Pods(
        pod("scheduler", dask.scheduler_path),
        pod("worker", dask.worker_path),
        pod("job runner", dask.job_runner_path),
    )


def _containers(spec: Any, key: str, classes: DeviceClasses) -> tuple[ContainerFacts, ...]:
    if spec.__class__ is not dict and not isinstance(spec, Mapping):
        return ()
    items = spec.get(key)
    if not isinstance(items, list):
        return ()
    app = key == "containers"
    found = []
    parse = quantity.parse
    for index, container in enumerate(items):
        if container.__class__ is not dict and not isinstance(container, Mapping):
            continue
        gpus: list[GpuRequest] = []
        bad: list[tuple[str, Any, str]] = []
        named_gpu = False
        resources = container.get("resources")
        if resources.__class__ is dict or isinstance(resources, Mapping):
            for section in _SECTIONS:
                values = resources.get(section)
                if values.__class__ is not dict and not isinstance(values, Mapping):
                    continue
                for name, value in values.items():
                    number = parse(value)
                    if number is None and isinstance(value, str):
                        bad.append((section, name, value))
                    if isinstance(name, str) and _is_gpu(name, classes):
                        named_gpu = True
                        if (number or 0) > 0:
                            gpus.append(GpuRequest(name, value, index, section))
        refused = tuple(refused_gpus(container, classes)) if named_gpu else ()
        words, line = command(container) if app else (_NO_WORDS, "")
        found.append(
            ContainerFacts(index, container, tuple(gpus), refused, tuple(bad), words, line)
        )
    return tuple(found)
