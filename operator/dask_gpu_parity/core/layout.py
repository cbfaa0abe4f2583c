"""Parity for deployers that are not the dask operator, through one equivalent DaskCluster.

dask-gateway and the classic ``dask`` Helm chart keep the scheduler's and the workers' pod specs
in their own places (a gateway's ``scheduler_extra_pod_config``, a chart's ``scheduler.*``
values). A :class:`Layout` says where those places are; :func:`evaluate_layout` builds the
DaskCluster (or DaskJob, with a client beside it) that the deployer would run, lets the same
parity rules judge it, and maps the findings and fixes back to the deployer's own paths. A fix
with no place to go in the deployer's terms is dropped and its finding is not fixable there.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from dask_gpu_parity.names import DASK_API_VERSION

from .findings import Finding
from .patch import Operation, apply_in_place, diff, pointer, split_pointer
from .plain import Path, copy_json, get_in

__all__ = ["Layout", "LayoutResult", "Slot", "evaluate_layout", "split_image"]

_ROOTS = {
    "scheduler": ("spec", "scheduler", "spec"),
    "worker": ("spec", "worker", "spec"),
    "runner": ("spec", "job", "spec"),
}


@dataclass(frozen=True)
class Slot:
    """Where one pod of the deployer lives in the document.

    ``pod``: the mapping merged into the pod spec; ``container``: the mapping merged into the
    working container (always container 0 of the equivalent pod); ``sidecars``: the list that
    holds the pod's other containers; ``image``: where the image is written, one path or a
    (repository, tag) pair; ``pod_fields``/``container_fields``: the fields the deployer
    carries there (``None``: any).
    """

    pod: Path | None
    container: Path | None
    spec: dict[str, Any]  # the equivalent pod spec, container 0 the working one
    sidecars: Path | None = None
    sidecar_offset: int = 1  # index in ``sidecars`` = index in the pod - this
    image: Path | tuple[Path, Path] | None = None
    pod_fields: frozenset[str] | None = None
    container_fields: frozenset[str] | None = None
    where: str = ""  # the slot's name in messages, e.g. "scheduler.*" values


@dataclass(frozen=True)
class Layout:
    """The scheduler, worker and (optional) client pods of one deployer document."""

    scheduler: Slot
    worker: Slot
    runner: Slot | None = None
    metadata: Mapping[str, Any] = field(default_factory=dict)
    root: Path = ()  # where a finding that maps nowhere points
    fixable: bool = True  # False: the document is reported on, never changed
    # Message phrases said in the deployer's terms, e.g. the job runner is a Jupyter client.
    wording: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class LayoutResult:
    """Findings in the document's terms and the operations that fix it."""

    findings: tuple[Finding, ...]
    operations: tuple[Operation, ...]


Evaluate = Callable[[dict[str, Any]], tuple[Any, Sequence[Finding]]]


def split_image(image: str) -> tuple[str, str]:
    """``repo:tag`` as (repository, tag); a digest or a missing tag leaves the tag empty."""
    slash = image.rfind("/")
    colon = image.rfind(":")
    if colon > slash and "@" not in image:
        return image[:colon], image[colon + 1 :]
    return image, ""


def equivalent(layout: Layout) -> dict[str, Any]:
    """The DaskCluster (a DaskJob when there is a client) the deployer's pods amount to."""
    cluster = {
        "scheduler": {"spec": copy_json(layout.scheduler.spec)},
        "worker": {"spec": copy_json(layout.worker.spec)},
    }
    if layout.runner is None:
        spec: dict[str, Any] = cluster
        kind = "DaskCluster"
    else:
        spec = {"cluster": {"spec": cluster}, "job": {"spec": copy_json(layout.runner.spec)}}
        kind = "DaskJob"
    return {
        "apiVersion": DASK_API_VERSION,
        "kind": kind,
        "metadata": copy_json(dict(layout.metadata)),
        "spec": spec,
    }


def evaluate_layout(document: Any, layout: Layout, run: Evaluate) -> LayoutResult:
    """Judge the deployer's pods with ``run`` (the engine) and map the answer back."""
    before = equivalent(layout)
    after, findings = run(before)
    job = layout.runner is not None
    ops: list[Operation] = []
    lost: list[str] = []
    work = copy_json(document)
    for op in diff(before, after):
        mapped = _map_op(work, op, layout, job) if layout.fixable else None
        if mapped is None:
            lost.append(op["path"])
        else:
            apply_in_place(work, mapped)
            ops.extend(mapped)
    out = []
    for finding in findings:
        path = _target(finding.path, layout, job, lenient=True)
        fixable = finding.fixable and not any(_under(p, finding.path) for p in lost)
        at = pointer(*(path if path is not None else layout.root))
        message = finding.message
        for phrase, said in layout.wording:
            message = message.replace(phrase, said)
        out.append(replace(finding, path=at, fixable=fixable, message=message))
    return LayoutResult(tuple(out), tuple(ops))


def _map_op(work: Any, op: Operation, layout: Layout, job: bool) -> list[Operation] | None:
    segments = split_pointer(op["path"])
    if job and segments[:3] == ["spec", "cluster", "spec"]:
        segments = ["spec", *segments[3:]]
    for role, root in _ROOTS.items():
        slot = layout.runner if role == "runner" else getattr(layout, role)
        if (
            slot is not None
            and _is_pair(slot.image)
            and segments == [*root, "containers", "0", "image"]
            and op["op"] != "remove"
        ):
            return image_ops(work, slot, str(op["value"]))
    target = _target(op["path"], layout, job)
    return None if target is None else _write(work, target, op)


def _under(path: str, prefix: str) -> bool:
    return path == prefix or path.startswith(prefix.rstrip("/") + "/") or not prefix


def _target(ptr: str, layout: Layout, job: bool, *, lenient: bool = False) -> Path | None:
    segments = split_pointer(ptr)
    if job and segments[:3] == ["spec", "cluster", "spec"]:
        segments = ["spec", *segments[3:]]
    for role, root in _ROOTS.items():
        slot = layout.runner if role == "runner" else getattr(layout, role)
        if slot is None or tuple(segments[:3]) != root:
            continue
        return _in_slot(slot, segments[3:], lenient)
    return None


def _in_slot(slot: Slot, rest: list[str], lenient: bool) -> Path | None:
    fallback = slot.container or slot.pod if lenient else None
    if rest[:1] == ["containers"] and len(rest) >= 2 and rest[1].isdigit():
        index, inner = int(rest[1]), rest[2:]
        if index > 0:
            if slot.sidecars is None:
                return fallback
            return (*slot.sidecars, index - slot.sidecar_offset, *inner)
        if inner == ["image"] and slot.image is not None:
            return slot.image[0] if _is_pair(slot.image) else slot.image  # type: ignore[return-value]
        allowed = slot.container_fields is None or (inner and inner[0] in slot.container_fields)
        if slot.container is not None and allowed and inner:
            return (*slot.container, *inner)
        return fallback
    if not rest:
        return slot.pod or fallback
    allowed = slot.pod_fields is None or rest[0] in slot.pod_fields
    return (*slot.pod, *rest) if slot.pod is not None and allowed else fallback


def _is_pair(image: Any) -> bool:
    return isinstance(image, tuple) and bool(image) and isinstance(image[0], tuple)


def _write(document: Any, target: Path, op: Operation) -> list[Operation] | None:
    """Operations that do ``op`` at ``target`` in the document, creating what is missing."""
    if op["op"] == "remove":
        return None  # the rules only add; a removal has no safe place in a deployer's config
    value = op.get("value")
    node: Any = document
    for depth, segment in enumerate(target[:-1]):
        child = _child(node, segment)
        if child is None:
            rest = target[depth + 1 :]
            return [
                {"op": "add", "path": pointer(*target[: depth + 1]), "value": _nest(rest, value)}
            ]
        node = child
    last = target[-1]
    if isinstance(node, list) and last != "-" and not str(last).isdigit():
        return None
    if not isinstance(node, list | dict):
        return None
    return [
        {
            "op": op["op"] if _child(node, last) is not None else "add",
            "path": pointer(*target),
            "value": value,
        }
    ]


def _child(node: Any, segment: str | int) -> Any:
    if isinstance(node, list):
        text = str(segment)
        return node[int(text)] if text.isdigit() and int(text) < len(node) else None
    if isinstance(node, dict):
        return node.get(segment)
    return None


def _nest(rest: Sequence[str | int], value: Any) -> Any:
    if not rest:
        return value
    head, tail = rest[0], rest[1:]
    if head == "-" or str(head) == "0":
        return [_nest(tail, value)]
    return {head: _nest(tail, value)}


def image_ops(document: Any, slot: Slot, image: str) -> list[Operation]:
    """Operations that write ``image`` into a (repository, tag) pair."""
    if not _is_pair(slot.image):
        return []
    repository, tag = split_image(image)
    paths: tuple[Path, Path] = slot.image  # type: ignore[assignment]
    scratch = copy_json(document)  # each write sees the ones before it
    ops: list[Operation] = []
    for path, value in ((paths[0], repository), (paths[1], tag)):
        if value and get_in(scratch, path) != value:
            mapped = _write(scratch, path, {"op": "replace", "value": value}) or []
            apply_in_place(scratch, mapped)
            ops.extend(mapped)
    return ops
