"""dask-gateway's own client, server and controller, with our webhooks on the proving ground.

Verdicts, written before the run (``docs/deployers.md``, "Admission"): a user's
``Gateway.new_cluster(gpu="a100")`` through the administrator's cluster options
(``provingground.gateway.ADMIN_OPTIONS``: GPU, RAPIDS image, toleration and product selector for
the *workers* only) gives a scheduler Pod, built by the gateway's controller, that requests
``nvidia.com/gpu: 1``, runs the workers' RAPIDS image, carries the GPU toleration, the workers'
product selector and the ``gpu-parity-probe``/``gpu-parity-check`` init containers, and is bound
by kube-scheduler to a node of the workers' driver and CUDA. ``Gateway.new_cluster()`` without a
GPU gives a scheduler Pod with none of that, and our webhook is not even called for it.
"""

from __future__ import annotations

from typing import Any

import pytest
import yaml
from kubernetes import client

from provingground.gateway import GATEWAY_IMAGE, RAPIDS_IMAGE, GatewayServer
from provingground.objects import as_dict
from provingground.parity import ParityOperator, eventually
from provingground.pools import POOL_LABEL
from provingground.pytest_plugin import E2ECluster

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

A100 = "NVIDIA-A100-SXM4-80GB"
TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
DRIVER = "nvidia.com/cuda.driver-version.full"
CUDA = "nvidia.com/cuda.runtime-version.full"


def _pods(cluster: E2ECluster, namespace: str, name: str, component: str) -> list[dict[str, Any]]:
    selector = f"gateway.dask.org/cluster={name},app.kubernetes.io/component={component}"
    found = client.CoreV1Api(cluster.api).list_namespaced_pod(namespace, label_selector=selector)
    return [cluster.api.sanitize_for_serialization(p) for p in found.items]


def _bound(cluster: E2ECluster, namespace: str, name: str, component: str, count: int) -> list:
    def bound() -> list[dict[str, Any]]:
        pods = _pods(cluster, namespace, name, component)
        assert len(pods) == count, [p["metadata"]["name"] for p in pods]
        assert all(p["spec"].get("nodeName") for p in pods), "not bound yet"
        return pods

    return eventually(bound, timeout=120, what=f"{count} {component} Pod(s) of {name} bound")


def _node_labels(cluster: E2ECluster, node: str) -> dict[str, str]:
    read = client.CoreV1Api(cluster.api).read_node(node)
    return dict(cluster.api.sanitize_for_serialization(read)["metadata"]["labels"])


def _stored(cluster: E2ECluster, namespace: str, name: str) -> dict[str, Any]:
    found = client.CustomObjectsApi(cluster.api).get_namespaced_custom_object(
        "gateway.dask.org", "v1alpha1", namespace, "daskclusters", name
    )
    return as_dict(found, f"DaskCluster {namespace}/{name}")


def _admitted(parity: ParityOperator) -> float:
    return parity.metric("dgp_admission_requests_total", webhook="mutate-gateway-daskcluster")


def test_a_gpu_cluster_from_new_cluster_gets_a_scheduler_with_the_workers_gpu_image_and_place(
    cluster: E2ECluster, parity: ParityOperator, gateway: GatewayServer
) -> None:
    before = _admitted(parity)
    name = gateway.new_cluster("alice", gpu="a100")
    short = name.rsplit(".", 1)[-1]  # the gateway's name is "<namespace>.<object name>"
    ns = gateway.namespace
    try:
        gateway.scale(cluster.kubectl, name, 1)
        (scheduler,) = _bound(cluster, ns, short, "dask-scheduler", 1)
        (worker,) = _bound(cluster, ns, short, "dask-worker", 1)
        spec = scheduler["spec"]
        shown = yaml.safe_dump(spec, sort_keys=False)
        print(f"\nThe scheduler Pod's spec, as the gateway's controller built it:\n{shown}")
        (main,) = [c for c in spec["containers"] if c["name"] == "dask-scheduler"]
        assert main["image"] == RAPIDS_IMAGE  # the workers' image, not the gateway's default
        assert main["resources"]["limits"]["nvidia.com/gpu"] == "1"
        assert TOLERATION in spec["tolerations"]
        assert spec["nodeSelector"]["nvidia.com/gpu.product"] == A100
        init = spec["initContainers"]
        assert [c["name"] for c in init] == ["gpu-parity-probe", "gpu-parity-check"]
        assert init[1]["image"] == RAPIDS_IMAGE  # the check runs in the scheduler's image
        assert init[1]["resources"]["limits"]["nvidia.com/gpu"] == "1"
        assert spec["restartPolicy"] == "Never"  # a failed check fails the cluster at once
        # kube-scheduler placed it beside its workers: the same driver and CUDA
        on = _node_labels(cluster, spec["nodeName"])
        beside = _node_labels(cluster, worker["spec"]["nodeName"])
        assert on["nvidia.com/gpu.product"] == A100, on.get(POOL_LABEL)
        assert (on[DRIVER], on[CUDA]) == (beside[DRIVER], beside[CUDA])
        # the workers were built from the options alone: admission changed the scheduler only
        (worker_main,) = worker["spec"]["containers"]
        assert worker_main["image"] == RAPIDS_IMAGE
        assert "initContainers" not in worker["spec"]
        config = _stored(cluster, ns, short)["spec"]["config"]
        assert config["scheduler_extra_container_config"]["image"] == RAPIDS_IMAGE
        assert _admitted(parity) == before + 1
    finally:
        gateway.stop_cluster("alice", name)


def test_a_cpu_cluster_from_new_cluster_is_untouched_and_costs_no_webhook_call(
    cluster: E2ECluster, parity: ParityOperator, gateway: GatewayServer
) -> None:
    before = _admitted(parity)
    name = gateway.new_cluster("bob")
    short = name.rsplit(".", 1)[-1]
    ns = gateway.namespace
    try:
        (scheduler,) = _bound(cluster, ns, short, "dask-scheduler", 1)
        spec = scheduler["spec"]
        (main,) = spec["containers"]
        assert main["image"] == GATEWAY_IMAGE
        assert not any("/" in k for k in main["resources"].get("limits", {}))
        assert "initContainers" not in spec
        assert TOLERATION not in spec.get("tolerations", [])
        config = _stored(cluster, ns, short)["spec"]["config"]
        assert config["scheduler_extra_pod_config"] == {}
        assert config["scheduler_extra_container_config"] == {}
        assert _admitted(parity) == before  # the CEL match conditions kept it away
    finally:
        gateway.stop_cluster("bob", name)


def test_a_cluster_the_webhook_denies_fails_new_cluster_and_the_gateway_logs_why(
    cluster: E2ECluster, parity: ParityOperator, pinned_gateway: GatewayServer
) -> None:
    # The option gives the scheduler the gateway's image and the workers RAPIDS': DGP003, an
    # image the administrator wrote, is denied in enforce, not overwritten.
    from dask_gateway import GatewayServerError  # the tests' import: the client's error

    with pytest.raises(GatewayServerError):
        pinned_gateway.new_cluster("carol", gpu="a100")

    def logged() -> str:
        text = pinned_gateway.api_log.read_text(errors="replace")
        assert "dask-gpu-parity denied this resource: " in text, "not logged yet"
        assert "DGP003 at /spec/config/scheduler_extra_container_config/image" in text
        return text

    eventually(logged, timeout=30, what="the denial in the gateway's log")
    found = client.CustomObjectsApi(cluster.api).list_namespaced_custom_object(
        "gateway.dask.org", "v1alpha1", pinned_gateway.namespace, "daskclusters"
    )
    assert as_dict(found, "DaskClusterList")["items"] == []  # nothing was created
