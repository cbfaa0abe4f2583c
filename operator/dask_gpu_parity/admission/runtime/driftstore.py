"""The drift watch's stores, fed by informers: each DaskCluster, scheduler Deployment, Dask pod.

Kept: per cluster, its spec without the scheduler's pod spec and the Deployment's template
(which replaces it), as compressed JSON; per pod, its node; the failed ``gpu-parity-check`` last
reported per scheduler pod (``podevents.py``); the verdicts so far. Each change tells its
:class:`Changes` (the drift watch, ``driftwatch.py``) which clusters to check again.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from dask_gpu_parity.admission.decide import drift, placement, podevents
from dask_gpu_parity.core.plain import as_map
from dask_gpu_parity.names import (
    CLUSTER_NAME_LABEL,
    COMPONENT_LABEL,
    DASK_API_VERSION,
    DASK_GROUP,
    DASK_VERSION,
    SKIP_ANNOTATION,
)

from .blobs import Packer
from .informer import Callbacks, Resource, Sink, object_key

__all__ = [
    "CLUSTERS",
    "DEPLOYMENTS",
    "PLACEMENT",
    "PODS",
    "SPEC",
    "Changes",
    "DriftStores",
    "Key",
    "StoredCluster",
    "StoredDeployment",
    "StoredPod",
]

CLUSTERS = Resource("daskclusters", f"/apis/{DASK_GROUP}/{DASK_VERSION}/daskclusters")
DEPLOYMENTS = Resource(
    "deployments", "/apis/apps/v1/deployments", label_selector=f"{COMPONENT_LABEL}=scheduler"
)
PODS = Resource("pods", "/api/v1/pods", label_selector=f"{COMPONENT_LABEL} in (scheduler,worker)")
SPEC, PLACEMENT = 1, 2  # what to check again: flags of a mark
Key = tuple[str, str]  # (namespace, DaskCluster name)


_CLUSTER_BLOBS, _TEMPLATE_BLOBS = Packer(), Packer()  # one dictionary each, for the process


@dataclass(frozen=True, slots=True)
class StoredCluster:
    """A DaskCluster as the drift watch keeps it."""

    uid: str
    skip: bool  # opted out by its annotation
    blob: bytes  # apiVersion, kind, metadata (name, namespace, uid), spec minus scheduler.spec

    def ref(self, key: Key) -> dict[str, Any]:
        """The DaskCluster, for an Event."""
        meta = {"namespace": key[0], "name": key[1], "uid": self.uid}
        return {"apiVersion": DASK_API_VERSION, "kind": "DaskCluster", "metadata": meta}

    def body(self) -> dict[str, Any]:
        """The DaskCluster as stored (without the scheduler's pod spec)."""
        found: dict[str, Any] = _CLUSTER_BLOBS.unpack(self.blob)
        return found


@dataclass(frozen=True, slots=True)
class StoredDeployment:
    """A scheduler Deployment as the drift watch keeps it."""

    key: Key
    name: str
    uid: str
    generation: Any
    blob: bytes  # spec.template.spec

    def template(self) -> dict[str, Any]:
        """The pod template's spec."""
        found: dict[str, Any] = _TEMPLATE_BLOBS.unpack(self.blob)
        return found


@dataclass(frozen=True, slots=True)
class StoredPod:
    """A Dask pod bound to a node."""

    key: Key
    component: str  # scheduler or worker
    node: str


class Changes(Protocol):
    """What the stores tell of each change (the drift watch)."""

    def mark(self, key: Key, what: int) -> None:
        """Check this cluster again (``SPEC``, ``PLACEMENT`` or both)."""

    def listed(self, kind: str) -> None:
        """A resource's LIST is complete."""

    def probe_failed(self, failure: podevents.ProbeFailure) -> None:
        """A scheduler pod's ``gpu-parity-check`` failed (each failure once)."""


class DriftStores:
    """What the drift watch keeps of the cluster: DaskClusters, scheduler Deployments, Dask pods.

    The informers feed ``put_*``/``drop_*`` (through :meth:`sinks`); each change tells
    ``changes`` which clusters it can affect.
    """

    def __init__(self, changes: Changes) -> None:
        self.changes = changes
        self.specs = drift.Tracker()
        self.places = placement.Tracker()
        self.probe_failures = podevents.Seen()
        self.listed: set[str] = set()  # resources whose first LIST is complete
        self._clusters: dict[Key, StoredCluster] = {}
        self._by_namespace: dict[str, set[str]] = {}
        self._deployments: dict[Key, StoredDeployment] = {}
        self._deployment_keys: dict[str, Key] = {}  # "namespace/name" -> cluster
        self._pods: dict[str, StoredPod] = {}  # "namespace/name" -> pod
        self._pods_of: dict[Key, set[str]] = {}
        self._on_node: dict[str, dict[Key, int]] = {}

    def __len__(self) -> int:
        """DaskClusters held."""
        return len(self._clusters)

    def clusters(self) -> list[Key]:
        """Every DaskCluster held."""
        return list(self._clusters)

    def cluster(self, key: Key) -> StoredCluster | None:
        """The DaskCluster, if held."""
        return self._clusters.get(key)

    def deployment(self, key: Key) -> StoredDeployment | None:
        """The cluster's scheduler Deployment, if held."""
        return self._deployments.get(key)

    def pods(self, key: Key) -> list[tuple[str, StoredPod]]:
        """The cluster's pods bound to nodes, by ``namespace/name``."""
        return [(name, self._pods[name]) for name in self._pods_of.get(key, ())]

    def on_node(self, node: str) -> list[Key]:
        """The clusters with a pod on ``node``."""
        return list(self._on_node.get(node, ()))

    def namespaces(self) -> Iterator[tuple[str, set[str]]]:
        """Each namespace with DaskClusters, and their names."""
        return iter(self._by_namespace.items())

    def in_namespace(self, namespace: str) -> list[Key]:
        """The DaskClusters of one namespace."""
        return [(namespace, name) for name in self._by_namespace.get(namespace, ())]

    def sinks(self) -> list[tuple[Resource, Sink]]:
        """The informers the stores need, with their sinks."""
        feeds = (
            (CLUSTERS, self.put_cluster, self.drop_cluster),
            (DEPLOYMENTS, self.put_deployment, self.drop_deployment),
            (PODS, self.put_pod, self._pod_gone),
        )
        return [
            (resource, Callbacks(put, drop, functools.partial(self._listed, resource.kind)))
            for resource, put, drop in feeds
        ]

    def _listed(self, kind: str) -> None:
        if kind == PODS.kind and kind not in self.listed:  # Pods now give placement verdicts
            for key in self._pods_of:
                self.changes.mark(key, PLACEMENT)
        self.listed.add(kind)
        self.changes.listed(kind)

    def _pod_gone(self, name: str, obj: Mapping[str, Any] | None = None) -> None:
        self.drop_pod(name)
        self.probe_failures.forget(name)

    def put_cluster(self, obj: Mapping[str, Any]) -> None:
        """A DaskCluster listed, added or changed."""
        meta = as_map(obj.get("metadata"))
        key = (sys.intern(str(meta.get("namespace", ""))), str(meta.get("name", "")))
        spec = dict(as_map(obj.get("spec")))
        scheduler = dict(as_map(spec.get("scheduler")))
        scheduler.pop("spec", None)  # the Deployment's template stands in for it
        spec["scheduler"] = scheduler
        minimal = {
            "apiVersion": obj.get("apiVersion", DASK_API_VERSION),
            "kind": obj.get("kind", "DaskCluster"),
            "metadata": {"name": key[1], "namespace": key[0], "uid": meta.get("uid", "")},
            "spec": spec,
        }
        skip = str(as_map(meta.get("annotations")).get(SKIP_ANNOTATION, "")).lower() == "true"
        record = StoredCluster(str(meta.get("uid", "")), skip, _CLUSTER_BLOBS.pack(minimal))
        if self._clusters.get(key) == record:
            return  # a status or annotation update of the dask operator
        self._clusters[key] = record
        self._by_namespace.setdefault(key[0], set()).add(key[1])
        self.changes.mark(key, SPEC | PLACEMENT)

    def drop_cluster(self, name: str, obj: Mapping[str, Any] | None = None) -> None:
        """A DaskCluster (``namespace/name``) is gone."""
        namespace, _, cluster = name.partition("/")
        key = (namespace, cluster)
        if self._clusters.pop(key, None) is None:
            return
        names = self._by_namespace.get(key[0], set())
        names.discard(key[1])
        if not names:
            self._by_namespace.pop(key[0], None)
        self.specs.forget(*key)
        self.places.forget(*key)
        self.changes.mark(key, SPEC)  # checked as gone: its PolicyReport goes

    def put_deployment(self, obj: Mapping[str, Any]) -> None:
        """A scheduler Deployment listed, added or changed."""
        meta = as_map(obj.get("metadata"))
        cluster = as_map(meta.get("labels")).get(CLUSTER_NAME_LABEL)
        if not isinstance(cluster, str):
            return
        key = (sys.intern(str(meta.get("namespace", ""))), cluster)
        template = as_map(as_map(as_map(obj.get("spec")).get("template")).get("spec"))
        name, uid = str(meta.get("name", "")), str(meta.get("uid", ""))
        record = StoredDeployment(
            key, name, uid, meta.get("generation"), _TEMPLATE_BLOBS.pack(template)
        )
        if self._deployments.get(key) == record:
            return  # a status update (replicas, conditions)
        self._deployments[key] = record
        self._deployment_keys[object_key(obj)] = key
        self.changes.mark(key, SPEC | PLACEMENT)

    def drop_deployment(self, deployment: str, obj: Mapping[str, Any] | None = None) -> None:
        """A scheduler Deployment (``namespace/name``) is gone."""
        key = self._deployment_keys.pop(deployment, None)
        if key is not None and self._deployments.pop(key, None) is not None:
            self.specs.forget(*key)

    def put_pod(self, obj: Mapping[str, Any]) -> None:
        """A Dask pod listed, added or changed: its node and role, and a failed GPU check."""
        meta = as_map(obj.get("metadata"))
        labels = as_map(meta.get("labels"))
        cluster, component = labels.get(CLUSTER_NAME_LABEL), labels.get(COMPONENT_LABEL)
        node = as_map(obj.get("spec")).get("nodeName")
        phase = as_map(obj.get("status")).get("phase")
        name = object_key(obj)
        if component == "scheduler":
            failure = podevents.failure(obj)
            if failure is not None and self.probe_failures.new(name, failure):
                self.changes.probe_failed(failure)
        if (
            not isinstance(cluster, str)
            or not isinstance(node, str)
            or not node
            or phase in ("Succeeded", "Failed")
        ):
            self.drop_pod(name)  # not running anywhere (yet, or any more)
            return
        pod = StoredPod((str(meta.get("namespace", "")), cluster), str(component), node)
        old = self._pods.get(name)
        if old == pod:
            return
        if old is not None:
            self.drop_pod(name)
        self._pods[name] = pod
        self._pods_of.setdefault(pod.key, set()).add(name)
        on_node = self._on_node.setdefault(node, {})
        on_node[pod.key] = on_node.get(pod.key, 0) + 1
        self.changes.mark(pod.key, PLACEMENT)

    def drop_pod(self, name: str) -> None:
        """A Dask pod is gone (or no longer bound to a node)."""
        pod = self._pods.pop(name, None)
        if pod is None:
            return
        names = self._pods_of.get(pod.key, set())
        names.discard(name)
        if not names:
            self._pods_of.pop(pod.key, None)
        on_node = self._on_node.get(pod.node, {})
        on_node[pod.key] = on_node.get(pod.key, 1) - 1
        if on_node[pod.key] <= 0:
            del on_node[pod.key]
        if not on_node:
            self._on_node.pop(pod.node, None)
        self.changes.mark(pod.key, PLACEMENT)
