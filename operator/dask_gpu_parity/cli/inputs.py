"""What ``check`` and ``fix`` read: the inputs file by file, the policy, the node inventory."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

from dask_gpu_parity.core.contentkey import spec_key
from dask_gpu_parity.core.deviceclasses import (
    NVIDIA_CLASSES,
    DeviceClass,
    DeviceClasses,
    device_class,
)
from dask_gpu_parity.core.engine import Result, evaluate
from dask_gpu_parity.core.findings import Finding
from dask_gpu_parity.core.inventory import Inventory
from dask_gpu_parity.core.plain import as_map
from dask_gpu_parity.core.policy import Policy, PolicyError
from dask_gpu_parity.core.policy_manifest import load, override
from dask_gpu_parity.core.resources import CHART, DASK_OPERATOR, DaskResource, view
from dask_gpu_parity.manifests import (
    STDIN,
    Document,
    FileError,
    InputError,
    Source,
    discover,
    parse,
    read_source,
)
from dask_gpu_parity.manifests.discover import NOTICES, skipped

from .args import InputArgs

__all__ = [
    "Checked",
    "Inputs",
    "Judged",
    "evaluate_all",
    "findings_all",
    "load_cluster",
    "load_inputs",
    "load_policy",
]


@dataclass
class Checked:
    """One Dask document and what the engine made of it."""

    document: Document
    dask: DaskResource
    result: Result


@dataclass
class Judged:
    """One Dask document and the findings about it (``check``'s share of :class:`Checked`)."""

    document: Document
    dask: DaskResource
    findings: tuple[Finding, ...]


@dataclass
class Inputs:
    """The inputs that could be read (with their documents), those that could not, notices.

    ``notices`` are about the walk, not failures: a file found in a folder that is no manifest
    (skipped), a kustomization read in part.
    """

    parsed: list[tuple[Source, list[Document]]] = field(default_factory=list)
    errors: list[FileError] = field(default_factory=list)
    notices: list[FileError] = field(default_factory=list)

    @property
    def documents(self) -> list[Document]:
        """Every document of every readable input, in order."""
        return [d for _, docs in self.parsed for d in docs]


def _sources(args: InputArgs, *, regular_only: bool) -> Iterator[tuple[str, Source | FileError]]:
    if args.paths.count(STDIN) > 1:
        raise InputError("- (stdin) can be read only once: name it once")
    for name in discover(args.paths, args.selection):
        if isinstance(name, FileError):
            yield name.file, name
            continue
        try:
            label = args.stdin_filename if name == STDIN else ""
            yield name, read_source(name, label=label, regular_only=regular_only)
        except FileError as exc:
            yield name, exc


def load_inputs(args: InputArgs, *, regular_only: bool = False) -> Inputs:
    """Every input of the command line, read and parsed; a FileError per one that failed.

    ``regular_only`` (``fix --in-place``) refuses what is not a regular file.
    """
    inputs = Inputs()
    for name, source in _sources(args, regular_only=regular_only):
        if isinstance(source, FileError):
            (inputs.notices if source.code in NOTICES else inputs.errors).append(source)
            continue
        try:
            inputs.parsed.append((source, parse(source)))
        except FileError as exc:
            notice = skipped(name, source, exc)
            inputs.notices.append(notice) if notice else inputs.errors.append(exc)
    return inputs


def _documents(path: str) -> list[Document]:
    if not path:
        raise InputError('an empty path ("") names no file')
    return parse(read_source(path))


# The flags that override a policy's keys (the manifest path a PolicyError names).
_FLAGS = {
    "spec.placement.extendedResourceToleration": "--extended-resource-toleration",
    "spec.verifier.delivery": "--verifier",
    "spec.verifier.image": "--probe-image",
    "spec.verifier.registry": "--probe-registry",
}


def load_policy(args: InputArgs) -> Policy | None:
    """The ``--policy`` file's DaskGPUPolicy (any error is a usage error), with the flags' say.

    ``--extended-resource-toleration``, ``--verifier``, ``--probe-image`` and
    ``--probe-registry`` override the policy's settings (or the defaults').
    """
    policy = None
    if args.policy is not None:
        path = args.policy
        policies = [d for d in _documents(path) if d.data.get("kind") == "DaskGPUPolicy"]
        if len(policies) != 1:
            raise InputError(f"{path}: expected one DaskGPUPolicy, found {len(policies)}")
        try:
            policy = load(policies[0].data)
        except PolicyError as exc:
            raise InputError(f"{path}: invalid DaskGPUPolicy: {exc}") from exc
    given = (
        args.extended_resource_toleration,
        args.verifier,
        args.probe_image,
        args.probe_registry,
    )
    values = {path: value for path, value in zip(_FLAGS, given, strict=True) if value is not None}
    if not values:
        return policy
    try:
        return override(policy or Policy(), values)
    except PolicyError as exc:
        raise InputError(f"{_FLAGS.get(exc.field, exc.field)}: {exc.message}") from exc


def _classes_in(path: str, objects: list[Any]) -> list[DeviceClass]:
    found = []
    for number, obj in enumerate(objects, 1):
        if as_map(obj).get("kind") != "DeviceClass":
            continue
        read = device_class(obj)
        if read is None:
            raise InputError(
                f"{path}: object {number}: not a resource.k8s.io DeviceClass with a "
                "metadata.name (expected `kubectl get deviceclasses -o yaml` output)"
            )
        found.append(read)
    return found


def load_cluster(
    args: InputArgs, err: TextIO | None = None
) -> tuple[DeviceClasses, Inventory | None]:
    """The DeviceClasses and the node inventory (any error is a usage error).

    Classes: NVIDIA's, then the ``--nodes`` file's, then ``--device-classes``'s. The inventory:
    the ``--nodes`` file's Nodes and ResourceSlices (the file is read once: it may be a pipe).
    What the inventory could not resolve (slices of no single node, of nodes not in the file)
    is written to ``err`` as warnings.
    """
    path = args.nodes
    objects = [d.data for d in _documents(path)] if path is not None else []
    classes = NVIDIA_CLASSES.extend(_classes_in(path or "", objects))
    if args.device_classes is not None:
        found = _classes_in(args.device_classes, [d.data for d in _documents(args.device_classes)])
        if not found:
            raise InputError(
                f"{args.device_classes}: no DeviceClass objects (expected `kubectl get "
                "deviceclasses -o yaml` output)"
            )
        classes = classes.extend(found)
    if path is None:
        return classes, None
    nodes = [o for o in objects if as_map(o).get("kind") == "Node"]
    if not nodes:
        raise InputError(
            f"{path}: no Node objects (expected `kubectl get nodes,resourceslices,deviceclasses "
            "-o yaml` output)"
        )
    slices = [o for o in objects if as_map(o).get("kind") == "ResourceSlice"]
    inventory = Inventory.from_nodes(nodes, slices, classes)
    if err is not None:
        err.writelines(f"warning: {path}: {note}\n" for note in inventory.notes)
    return classes, inventory


def _dask_documents(
    documents: list[Document],
) -> Iterator[tuple[Document, DaskResource, Mapping[str, Any] | None, Sequence[Any]]]:
    """Each Dask document with its cluster (a worker group's, if present) and its peers."""
    dask_documents = [(doc, dask) for doc in documents if (dask := view(doc.data)) is not None]
    clusters = {
        (dask.namespace_or(), dask.name): doc.data
        for doc, dask in dask_documents
        if dask.kind == "DaskCluster" and dask.deployer == DASK_OPERATOR
    }
    everything = [doc.data for doc in documents]  # a chart's scheduler meets its release there
    for doc, dask in dask_documents:
        cluster = None
        if dask.kind == "DaskWorkerGroup":
            name = as_map(doc.data.get("spec")).get("cluster")
            cluster = clusters.get((dask.namespace_or(), name)) if isinstance(name, str) else None
        yield doc, dask, cluster, everything if dask.deployer == CHART else ()


def evaluate_all(
    documents: list[Document],
    policy: Policy | None,
    inventory: Inventory | None,
    classes: DeviceClasses | None = None,
) -> list[Checked]:
    """Evaluate every Dask document; a worker group is checked with its cluster, if present."""
    return [
        Checked(
            doc,
            dask,
            evaluate(
                doc.data, policy, inventory, cluster=cluster, device_classes=classes, peers=peers
            ),
        )
        for doc, dask, cluster, peers in _dask_documents(documents)
    ]


def findings_all(
    documents: list[Document],
    policy: Policy | None,
    inventory: Inventory | None,
    classes: DeviceClasses | None = None,
) -> list[Judged]:
    """What :func:`evaluate_all` finds, without the patches ``check`` does not show.

    Documents no rule can tell apart (``core.contentkey.spec_key``: equal but for their names
    and namespaces; a worker group's cluster too) are evaluated once: a repository stamped from
    a few templates costs a few evaluations. A chart's documents, read with the rest of their
    release, are each evaluated.
    """
    seen: dict[bytes, tuple[Finding, ...]] = {}
    judged = []
    for doc, dask, cluster, peers in _dask_documents(documents):
        key = None
        if not peers:
            key = spec_key(doc.data) + (b"\0" + spec_key(cluster) if cluster is not None else b"")
        found = seen.get(key) if key is not None else None
        if found is None:
            result = evaluate(
                doc.data, policy, inventory, cluster=cluster, device_classes=classes, peers=peers
            )
            found = result.findings
            if key is not None:
                seen[key] = found
        judged.append(Judged(doc, dask, found))
    return judged
