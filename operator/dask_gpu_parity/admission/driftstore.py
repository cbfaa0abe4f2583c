"""The drift watch's stores, fed by informers: each DaskCluster, scheduler Deployment, Dask pod.

Stored per cluster: its spec without the scheduler's pod spec (the Deployment's template
replaces it) and the template, each as compressed JSON; per pod, its node; per scheduler pod
whose ``gpu-parity-check`` failed, which failure was last reported (``podevents.py``).
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dask_gpu_parity.core.plain import as_map
from dask_gpu_parity.names import (
    CLUSTER_NAME_LABEL,
    COMPONENT_LABEL,
    DASK_API_VERSION,
    DASK_GROUP,
    DASK_VERSION,
    SKIP_ANNOTATION,
)

from . import drift, placement, podevents
from .informer import Resource, object_key

__all__ = ["CLUSTERS", "DEPLOYMENTS", "PLACEMENT", "PODS", "SPEC", "DriftStores", "Key"]

CLUSTERS = Resource("daskclusters", f"/apis/{DASK_GROUP}/{DASK_VERSION}/daskclusters")
DEPLOYMENTS = Resource(
    "deployments", "/apis/apps/v1/deployments", label_selector=f"{COMPONENT_LABEL}=scheduler"
)
PODS = Resource("pods", "/api/v1/pods", label_selector=f"{COMPONENT_LABEL} in (scheduler,worker)")
SPEC, PLACEMENT = 1, 2
Key = tuple[str, str]  # (namespace, DaskCluster name)


def _pack(value: Any) -> bytes:
    return zlib.compress(json.dumps(value, separators=(",", ":")).encode(), 1)


def _unpack(blob: bytes) -> Any:
    return json.loads(zlib.decompress(blob))


@dataclass(frozen=True)
class _Cluster:
    uid: str
    skip: bool
    blob: bytes  # apiVersion, kind, metadata (name, namespace, uid), spec minus scheduler.spec

    def ref(self, key: Key) -> dict[str, Any]:
        """The DaskCluster, for an Event."""
        meta = {"namespace": key[0], "name": key[1], "uid": self.uid}
        return {"apiVersion": DASK_API_VERSION, "kind": "DaskCluster", "metadata": meta}


@dataclass(frozen=True)
class _Deployment:
    key: Key
    name: str
    uid: str
    generation: Any
    blob: bytes  # spec.template.spec


@dataclass(frozen=True)
class _Pod:
    key: Key
    component: str
    node: str


class DriftStores:
    """What the drift watch keeps of the cluster: DaskClusters, scheduler Deployments, Dask pods.

    The informers feed ``put_*``/``drop_*``; each change calls ``mark`` with the clusters it can
    affect, which :class:`~.driftwatch.DriftWatch` checks.
    """

    def __init__(self) -> None:
        self.specs = drift.Tracker()
        self.places = placement.Tracker()
        self._clusters: dict[Key, _Cluster] = {}
        self._by_namespace: dict[str, set[str]] = {}
        self._deployments: dict[Key, _Deployment] = {}
        self._deployment_keys: dict[str, Key] = {}  # "namespace/name" -> cluster
        self._pods: dict[str, _Pod] = {}  # "namespace/name" -> pod
        self._pods_of: dict[Key, set[str]] = {}
        self._on_node: dict[str, dict[Key, int]] = {}
        self.probe_failures = podevents.Seen()

    def mark(self, key: Key, what: int) -> None:
        """Check this cluster again (``SPEC``, ``PLACEMENT`` or both)."""
        raise NotImplementedError

    def listed(self, kind: str) -> None:
        """A resource's first LIST is complete."""
        raise NotImplementedError

    def probe_failed(self, failure: podevents.ProbeFailure) -> None:
        """A scheduler pod's ``gpu-parity-check`` failed (each failure once)."""
        raise NotImplementedError

    # -- what the informers feed ---------------------------------------------------------------

    def sinks(self) -> list[tuple[Resource, Any]]:
        """The informers this watch needs, with their sinks."""
        return [(CLUSTERS, _Clusters(self)), (DEPLOYMENTS, _Deployments(self)), (PODS, _Pods(self))]

    def put_cluster(self, obj: Mapping[str, Any]) -> None:
        """A DaskCluster listed, added or changed."""
        meta = as_map(obj.get("metadata"))
        key = (str(meta.get("namespace", "")), str(meta.get("name", "")))
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
        record = _Cluster(str(meta.get("uid", "")), skip, _pack(minimal))
        if self._clusters.get(key) == record:
            return  # a status or annotation update of the dask operator
        self._clusters[key] = record
        self._by_namespace.setdefault(key[0], set()).add(key[1])
        self.mark(key, SPEC | PLACEMENT)

    def drop_cluster(self, key: Key) -> None:
        """A DaskCluster is gone."""
        if self._clusters.pop(key, None) is None:
            return
        names = self._by_namespace.get(key[0], set())
        names.discard(key[1])
        if not names:
            self._by_namespace.pop(key[0], None)
        self.specs.forget(*key)
        self.places.forget(*key)

    def put_deployment(self, obj: Mapping[str, Any]) -> None:
        """A scheduler Deployment listed, added or changed."""
        meta = as_map(obj.get("metadata"))
        cluster = as_map(meta.get("labels")).get(CLUSTER_NAME_LABEL)
        if not isinstance(cluster, str):
            return
        key = (str(meta.get("namespace", "")), cluster)
        template = as_map(as_map(as_map(obj.get("spec")).get("template")).get("spec"))
        record = _Deployment(
            key,
            str(meta.get("name", "")),
            str(meta.get("uid", "")),
            meta.get("generation"),
            _pack(template),
        )
        if self._deployments.get(key) == record:
            return  # a status update (replicas, conditions)
        self._deployments[key] = record
        self._deployment_keys[object_key(obj)] = key
        self.mark(key, SPEC | PLACEMENT)

    def drop_deployment(self, deployment: str) -> None:
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
                self.probe_failed(failure)
        if (
            not isinstance(cluster, str)
            or not isinstance(node, str)
            or not node
            or phase in ("Succeeded", "Failed")
        ):
            self.drop_pod(name)  # not running anywhere (yet, or any more)
            return
        pod = _Pod((str(meta.get("namespace", "")), cluster), str(component), node)
        old = self._pods.get(name)
        if old == pod:
            return
        if old is not None:
            self.drop_pod(name)
        self._pods[name] = pod
        self._pods_of.setdefault(pod.key, set()).add(name)
        on_node = self._on_node.setdefault(node, {})
        on_node[pod.key] = on_node.get(pod.key, 0) + 1
        self.mark(pod.key, PLACEMENT)

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
        self.mark(pod.key, PLACEMENT)


class _Clusters:
    def __init__(self, watch: DriftStores) -> None:
        self.watch = watch

    def upsert(self, obj: Mapping[str, Any]) -> None:
        self.watch.put_cluster(obj)

    def delete(self, key: str, obj: Mapping[str, Any] | None) -> None:
        namespace, _, name = key.partition("/")
        self.watch.drop_cluster((namespace, name))

    def listed(self) -> None:
        self.watch.listed(CLUSTERS.kind)


class _Deployments:
    def __init__(self, watch: DriftStores) -> None:
        self.watch = watch

    def upsert(self, obj: Mapping[str, Any]) -> None:
        self.watch.put_deployment(obj)

    def delete(self, key: str, obj: Mapping[str, Any] | None) -> None:
        self.watch.drop_deployment(key)

    def listed(self) -> None:
        self.watch.listed(DEPLOYMENTS.kind)


class _Pods:
    def __init__(self, watch: DriftStores) -> None:
        self.watch = watch

    def upsert(self, obj: Mapping[str, Any]) -> None:
        self.watch.put_pod(obj)

    def delete(self, key: str, obj: Mapping[str, Any] | None) -> None:
        self.watch.drop_pod(key)
        self.watch.probe_failures.forget(key)

    def listed(self) -> None:
        self.watch.listed(PODS.kind)
