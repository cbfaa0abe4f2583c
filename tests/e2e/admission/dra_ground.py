"""Shared steps of the DRA admission e2e tests: one proving ground per fleet kind, per file.

Each ``test_dra_*.py`` starts a proving ground of one fleet kind (``provingground.pools.FLEETS``:
DRA nodes publish ResourceSlices as NVIDIA's driver does, NVIDIA's DeviceClasses are installed)
with the Dask CRDs and ``dask-gpu-parity run`` on it; no dask operator, so the tests place Dask
pods themselves where a drift verdict needs them. DaskClusters: ``tests/fixtures/dra/`` (shapes
A and B, sources in its SOURCES.md).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from provingground import install_crds
from provingground.dra import driver_class
from provingground.parity import ParityOperator, eventually
from provingground.pools import POOL_LABEL
from provingground.pytest_plugin import E2ECluster

DRA = Path(__file__).parents[2] / "fixtures" / "dra"
IMPLICIT = "deviceclass.resource.kubernetes.io/"
PINNED_580 = IMPLICIT + "gpu-580-95-5.nvidia.com"
TOLERATE_GPU = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]


def parity_on(cluster: E2ECluster) -> Iterator[ParityOperator]:
    """``dask-gpu-parity run`` with its webhooks on this fleet's proving ground, warm.

    Warm: a shape-A DaskCluster gets its scheduler a GPU (DGP001, the webhook answers). The
    proving ground's own warm-up (the UCX example denied for DGP013) selects nodes by GFD's
    product label, which DRA nodes do not carry.
    """
    assert cluster.control_plane is not None
    install_crds(cluster.kubectl)
    operator = ParityOperator(cluster.control_plane, cluster.api, cluster.log_dir)
    operator.start(webhooks=False)
    try:
        operator.apply_webhooks()

        def warm() -> bool:
            _, warnings = operator.create(shape("a", "default", "dgp-warmup"), dry_run=True)
            return any("DGP001" in w for w in warnings)

        eventually(warm, timeout=120, what="admission answering", retry_on=(ApiException,))
        yield operator
    finally:
        operator.uninstall()


def namespace(cluster: E2ECluster, name: str) -> str:
    """A namespace (the proving ground is this file's own: no cleanup needed)."""
    cluster.kubectl("create", "namespace", name)
    return name


def shape(which: str, ns: str, name: str, replicas: int = 1) -> dict[str, Any]:
    """DaskCluster shape ``a`` (``nvidia.com/gpu``) or ``b`` (the implicit class name).

    With a toleration of the GPU nodes' taint ``nvidia.com/gpu=present:NoSchedule``.
    """
    doc = yaml.safe_load((DRA / f"daskcluster-shape-{which}.yaml").read_text())
    doc = copy.deepcopy(doc)
    doc["metadata"] = {"name": name, "namespace": ns}
    doc["spec"]["worker"]["replicas"] = replicas
    for role in ("scheduler", "worker"):  # the proving ground taints its GPU nodes, as GKE does
        doc["spec"][role]["spec"]["tolerations"] = copy.deepcopy(TOLERATE_GPU)
    return dict(doc)


def limits(doc: dict[str, Any], role: str) -> dict[str, str]:
    """The first container's limits of the scheduler or the workers."""
    return dict(doc["spec"][role]["spec"]["containers"][0].get("resources", {}).get("limits", {}))


def verifier(doc: dict[str, Any]) -> dict[str, Any]:
    """The scheduler's ``gpu-parity-check`` init container."""
    init = doc["spec"]["scheduler"]["spec"].get("initContainers", [])
    [check] = [c for c in init if c["name"] == "gpu-parity-check"]
    return dict(check)


def create_pinned_class(cluster: E2ECluster) -> None:
    """The admin's per-driver DeviceClass for driver 580.95.05 (``gpu-580-95-5.nvidia.com``)."""
    cluster.kubectl("apply", "-f", "-", input=json.dumps(driver_class("580.95.05")))


def _running_on(cluster: E2ECluster, ns: str, pod: dict[str, Any]) -> str:
    """Apply ``pod`` and wait until kube-scheduler has it running; the node it runs on."""
    name = pod["metadata"]["name"]
    cluster.kubectl("apply", "-n", ns, "-f", "-", input=json.dumps(pod))
    core = client.CoreV1Api(cluster.api)

    def running() -> str:
        found = core.read_namespaced_pod(name, ns)
        assert found.status.phase == "Running", found.status.phase
        return str(found.spec.node_name)

    return eventually(running, timeout=120, what=f"pod {ns}/{name} running")


def run_pod(
    cluster: E2ECluster, ns: str, name: str, limits_: dict[str, str], labels: dict[str, str]
) -> str:
    """A Pod asking for ``limits_``, scheduled by kube-scheduler; the node it runs on."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "containers": [{"name": "main", "image": "busybox", "resources": {"limits": limits_}}],
            "tolerations": TOLERATE_GPU,
        },
    }
    return _running_on(cluster, ns, pod)


def place_pod(cluster: E2ECluster, ns: str, name: str, node: str, labels: dict[str, str]) -> None:
    """A Pod bound to ``node`` directly, as a Dask pod that already runs there."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "nodeName": node,
            "containers": [{"name": "main", "image": "busybox"}],
            "tolerations": TOLERATE_GPU,
        },
    }
    cluster.kubectl("apply", "-n", ns, "-f", "-", input=json.dumps(pod))


def pool_of(cluster: E2ECluster, node: str) -> str:
    """The proving-ground pool a node belongs to."""
    found = client.CoreV1Api(cluster.api).read_node(node)
    return str(found.metadata.labels[POOL_LABEL])


def nodes_of(cluster: E2ECluster, pool: str) -> list[str]:
    """The nodes of one pool, by name."""
    found = client.CoreV1Api(cluster.api).list_node(label_selector=f"{POOL_LABEL}={pool}")
    return sorted(n.metadata.name for n in found.items)


def events(cluster: E2ECluster, ns: str, reason: str, cluster_name: str) -> list[str]:
    """Messages of the Events of ``reason`` on one DaskCluster."""
    found = client.CoreV1Api(cluster.api).list_namespaced_event(ns).items
    return [
        str(e.message)
        for e in found
        if e.reason == reason
        and e.involved_object.kind == "DaskCluster"
        and e.involved_object.name == cluster_name
    ]


def driver_mismatch(
    cluster: E2ECluster,
    parity: ParityOperator,
    ns: str,
    scheduler_pool: str,
    worker_pool: str,
) -> tuple[str, str, str]:
    """Shape-A DaskCluster ``d``, its scheduler on ``scheduler_pool``, a worker on ``worker_pool``.

    Returns:
        The first ParityDriverMismatch Event's message, the scheduler's node and the worker's.
    """
    parity.create(shape("a", ns, "d"))
    [scheduler, *_] = nodes_of(cluster, scheduler_pool)
    [worker, *_] = nodes_of(cluster, worker_pool)
    place_pod(cluster, ns, "d-scheduler", scheduler, dask_labels("d", "scheduler"))
    place_pod(cluster, ns, "d-worker", worker, dask_labels("d", "worker"))
    [message, *_] = eventually(
        lambda: events(cluster, ns, "ParityDriverMismatch", "d"),
        timeout=90,
        what="ParityDriverMismatch",
    )
    return message, scheduler, worker


def dask_labels(cluster_name: str, component: str) -> dict[str, str]:
    """The labels the dask operator puts on a cluster's pods."""
    return {"dask.org/cluster-name": cluster_name, "dask.org/component": component}


def pod_spec_pod(
    cluster: E2ECluster, ns: str, name: str, spec: dict[str, Any], limits_: dict[str, str]
) -> str:
    """A Pod with a DaskCluster side's node affinity and tolerations; the node it runs on."""
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "containers": [{"name": "main", "image": "busybox", "resources": {"limits": limits_}}],
            "tolerations": spec.get("tolerations", TOLERATE_GPU),
            **({"affinity": spec["affinity"]} if "affinity" in spec else {}),
            **({"nodeSelector": spec["nodeSelector"]} if "nodeSelector" in spec else {}),
        },
    }
    return _running_on(cluster, ns, pod)


def upgrade_slice(cluster: E2ECluster, node: str, driver: str, cuda: str) -> None:
    """The node's DRA driver now reports ``driver`` / ``cuda`` (a new pool generation)."""
    listed = json.loads(cluster.kubectl("get", "resourceslices", "-o", "json").stdout)["items"]
    [found] = [s for s in listed if s["spec"].get("nodeName") == node]
    found["spec"]["pool"]["generation"] += 1
    for device in found["spec"]["devices"]:
        device["attributes"]["driverVersion"] = {"version": driver}
        device["attributes"]["cudaDriverVersion"] = {"version": cuda}
    cluster.kubectl("replace", "-f", "-", input=json.dumps(found))
