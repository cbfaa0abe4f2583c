"""kube-scheduler allocates NVIDIA GPUs from DRA pools of kwok nodes on the v1.36.3 proving ground.

Expected verdicts come from KEP-5004 (extended resources backed by DRA: a scheduler-made claim
``<pod>-extended-resources-<random>``, annotated ``resource.kubernetes.io/extended-resource-claim``,
one request ``container-<i>-request-<j>`` per container and resource, recorded in
``pod.status.extendedResourceClaimStatus``), KEP-4816 (``firstAvailable``: results name the
subrequest, ``<request>/<subrequest>``) and the NVIDIA DRA driver's own example of what the
scheduler makes, ``demo/specs/extended-resources/gpu-full.yaml`` (kubernetes-sigs/
dra-driver-nvidia-gpu). The init-container case is kubernetes PR #134882 (issue #134880).
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from provingground.dra import DRIVER, GPU_CLASS, driver_class, mig_profile_class
from provingground.features import features
from provingground.pools import POOL_LABEL, POOLS
from provingground.pytest_plugin import E2ECluster

pytestmark = pytest.mark.e2e

TOLERATE_GPU = [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
EXTENDED_CLAIM = "resource.kubernetes.io/extended-resource-claim"


def _pod(
    name: str,
    limits: dict[str, str] | None = None,
    *,
    pool: str | None = None,
    node: str | None = None,
    init_limits: dict[str, str] | None = None,
    template: str | None = None,
) -> dict[str, Any]:
    main: dict[str, Any] = {"name": "main", "image": "busybox"}
    if limits:
        main["resources"] = {"limits": limits}
    spec: dict[str, Any] = {"containers": [main], "tolerations": TOLERATE_GPU}
    if init_limits:
        spec["initContainers"] = [
            {"name": "init", "image": "busybox", "resources": {"limits": init_limits}}
        ]
    if template:
        main["resources"] = {"claims": [{"name": "gpu"}]}
        spec["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": template}]
    if pool:
        spec["nodeSelector"] = {POOL_LABEL: pool}
    if node:
        spec["nodeSelector"] = {"kubernetes.io/hostname": node}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def _apply(cluster: E2ECluster, namespace: str, *docs: dict[str, Any]) -> None:
    doc = {"apiVersion": "v1", "kind": "List", "items": list(docs)}
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=json.dumps(doc))


def _get(cluster: E2ECluster, namespace: str, kind: str, name: str) -> dict[str, Any]:
    out = cluster.kubectl("get", kind, name, "-n", namespace, "-o", "json").stdout
    doc: dict[str, Any] = json.loads(out)
    return doc


def _running(cluster: E2ECluster, namespace: str, name: str, timeout: float = 60) -> dict[str, Any]:
    """The Pod once kwok has it Running; fails with its conditions otherwise."""
    deadline = time.monotonic() + timeout
    while True:
        pod = _get(cluster, namespace, "pod", name)
        if pod["status"].get("phase") == "Running":
            return pod
        if time.monotonic() > deadline:
            pytest.fail(f"Pod {name} not Running: {pod['status'].get('conditions')}")
        time.sleep(0.5)


def _pending_reason(cluster: E2ECluster, namespace: str, name: str, seconds: float = 8) -> str:
    """The PodScheduled message of a Pod that is still unscheduled after ``seconds``."""
    time.sleep(seconds)
    pod = _get(cluster, namespace, "pod", name)
    assert not pod["spec"].get("nodeName"), f"{name} was scheduled to {pod['spec']['nodeName']}"
    (cond,) = [c for c in pod["status"].get("conditions", []) if c["type"] == "PodScheduled"]
    assert cond["status"] == "False"
    return str(cond["message"])


def _claim(cluster: E2ECluster, namespace: str, pod: dict[str, Any]) -> dict[str, Any]:
    status = pod["status"]
    if "extendedResourceClaimStatus" in status:
        name = status["extendedResourceClaimStatus"]["resourceClaimName"]
    else:
        (entry,) = status["resourceClaimStatuses"]
        name = entry["resourceClaimName"]
    return _get(cluster, namespace, "resourceclaim", name)


def _results(claim: dict[str, Any]) -> list[dict[str, str]]:
    results: list[dict[str, str]] = claim["status"]["allocation"]["devices"]["results"]
    return results


def _assert_reserved_for(claim: dict[str, Any], pod: dict[str, Any]) -> None:
    reserved = claim["status"]["reservedFor"]
    assert reserved == [{"name": pod["metadata"]["name"], "resource": "pods",
                         "uid": pod["metadata"]["uid"]}]  # fmt: skip


def test_dra_feature_gates_are_on_in_scheduler_controller_manager_and_apiserver(
    cluster: E2ECluster,
) -> None:
    cp = cluster.control_plane
    if cp is None:
        pytest.skip("reads the proving ground's components' /metrics")
    for component in ("kube-apiserver", "kube-scheduler", "kube-controller-manager"):
        found = features(cp, component)
        assert "--feature-gates=DRAExtendedResource=true" in cp.processes[component].argv
        stages = {n: (found[n].stage, found[n].enabled) for n in (
            "DynamicResourceAllocation", "DRAExtendedResource", "DRAPrioritizedList")}  # fmt: skip
        assert stages == {
            "DynamicResourceAllocation": ("GA", True),
            "DRAExtendedResource": ("BETA", True),
            "DRAPrioritizedList": ("GA", True),
        }, component
    status, group = cp.api_get("/apis/resource.k8s.io")
    assert status == 200
    assert group["preferredVersion"]["groupVersion"] == "resource.k8s.io/v1"


def test_dra_node_has_no_gpu_capacity_and_its_slice_lists_the_gpus(
    cluster: E2ECluster, dra_pools: dict[str, int]
) -> None:
    node = json.loads(cluster.kubectl("get", "node", "h100-dra-0000", "-o", "json").stdout)
    assert "nvidia.com/gpu" not in node["status"]["allocatable"]
    assert not [k for k in node["metadata"]["labels"] if k.startswith("nvidia.com/cuda")]
    out = cluster.kubectl("get", "resourceslices", "-l", f"{POOL_LABEL}=h100-dra", "-o", "json")
    slices = {s["spec"]["nodeName"]: s for s in json.loads(out.stdout)["items"]}
    assert sorted(slices) == ["h100-dra-0000", "h100-dra-0001"]
    spec = slices["h100-dra-0000"]["spec"]
    assert (spec["driver"], spec["pool"]["name"]) == (DRIVER, "h100-dra-0000")
    assert [d["name"] for d in spec["devices"]] == [f"gpu-{i}" for i in range(8)]
    attrs = spec["devices"][0]["attributes"]
    assert attrs["driverVersion"] == {"version": "575.57.8"}
    assert attrs["productName"] == {"string": "NVIDIA H100 80GB HBM3"}


def test_gpu_limit_lands_on_dra_node_through_a_scheduler_made_claim(
    cluster: E2ECluster, dra_pools: dict[str, int], namespace: str
) -> None:
    _apply(cluster, namespace, _pod("ext", {"nvidia.com/gpu": "1"}, pool="a100-dra"))
    pod = _running(cluster, namespace, "ext")
    node = pod["spec"]["nodeName"]
    assert node.startswith("a100-dra-")
    mapping = pod["status"]["extendedResourceClaimStatus"]
    assert mapping["requestMappings"] == [{"containerName": "main",
        "requestName": "container-0-request-0", "resourceName": "nvidia.com/gpu"}]  # fmt: skip
    assert mapping["resourceClaimName"].startswith("ext-extended-resources-")
    claim = _claim(cluster, namespace, pod)
    assert claim["metadata"]["annotations"] == {EXTENDED_CLAIM: "true"}
    (request,) = claim["spec"]["devices"]["requests"]
    assert request["exactly"]["deviceClassName"] == GPU_CLASS
    (result,) = _results(claim)
    assert (result["driver"], result["pool"], result["request"]) == (
        DRIVER, node, "container-0-request-0")  # fmt: skip
    _assert_reserved_for(claim, pod)


def test_gpu_limit_on_device_plugin_node_needs_no_claim(
    cluster: E2ECluster, dra_pools: dict[str, int], namespace: str
) -> None:
    _apply(cluster, namespace, _pod("dp", {"nvidia.com/gpu": "1"}, pool="h100"))
    pod = _running(cluster, namespace, "dp")
    assert "extendedResourceClaimStatus" not in pod["status"]
    out = cluster.kubectl("get", "resourceclaims", "-n", namespace, "-o", "name").stdout
    assert out.strip() == ""


def test_implicit_device_class_resource_name_gets_a_claim_for_that_class(
    cluster: E2ECluster, dra_pools: dict[str, int], namespace: str
) -> None:
    name = f"deviceclass.resource.kubernetes.io/{GPU_CLASS}"
    _apply(cluster, namespace, _pod("cls", {name: "1"}, pool="a100-dra"))
    pod = _running(cluster, namespace, "cls")
    (mapping,) = pod["status"]["extendedResourceClaimStatus"]["requestMappings"]
    assert mapping["resourceName"] == name
    claim = _claim(cluster, namespace, pod)
    (request,) = claim["spec"]["devices"]["requests"]
    assert request["exactly"]["deviceClassName"] == GPU_CLASS
    assert _results(claim)[0]["pool"] == pod["spec"]["nodeName"]


def test_claim_template_is_allocated_on_a_dra_node(
    cluster: E2ECluster, dra_pools: dict[str, int], namespace: str
) -> None:
    template = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "one-gpu"},
        "spec": {"spec": {"devices": {"requests": [
            {"name": "gpu", "exactly": {"deviceClassName": GPU_CLASS}}]}}},
    }  # fmt: skip
    _apply(cluster, namespace, template, _pod("tmpl", template="one-gpu", pool="h100-dra"))
    pod = _running(cluster, namespace, "tmpl")
    claim = _claim(cluster, namespace, pod)
    assert claim["metadata"]["name"].startswith("tmpl-gpu-")
    (result,) = _results(claim)
    assert (result["request"], result["pool"]) == ("gpu", pod["spec"]["nodeName"])
    _assert_reserved_for(claim, pod)


def test_per_driver_class_lands_only_on_the_pool_with_that_driver(
    cluster: E2ECluster, dra_pools: dict[str, int], namespace: str
) -> None:
    # h100-dra is the only DRA pool on 575.57.08; the device-plugin h100 pool is on 570.172.08.
    only_575, only_570 = driver_class("575.57.08"), driver_class("570.172.08")
    assert only_575["metadata"]["name"] == "gpu-575-57-8.nvidia.com"
    cluster.kubectl("apply", "-f", "-", input=json.dumps(only_575))
    cluster.kubectl("apply", "-f", "-", input=json.dumps(only_570))
    resource = "deviceclass.resource.kubernetes.io/gpu-575-57-8.nvidia.com"
    _apply(cluster, namespace, *(_pod(f"drv-{i}", {resource: "2"}) for i in range(3)))
    for i in range(3):
        pod = _running(cluster, namespace, f"drv-{i}")
        assert pod["spec"]["nodeName"].startswith("h100-dra-")
        results = _results(_claim(cluster, namespace, pod))
        assert len(results) == 2
        assert {r["pool"] for r in results} == {pod["spec"]["nodeName"]}
    # No DRA device has driver 570: device-plugin nodes on it do not count.
    other = "deviceclass.resource.kubernetes.io/gpu-570-172-8.nvidia.com"
    _apply(cluster, namespace, _pod("drv-570", {other: "1"}))
    assert "cannot allocate all claims" in _pending_reason(cluster, namespace, "drv-570")


def test_first_available_takes_the_t4_then_falls_back_to_any_gpu(
    cluster: E2ECluster, dra_pools: dict[str, int], namespace: str
) -> None:
    assert dra_pools["t4-dra"] * POOLS["t4-dra"].gpus == 1  # one T4 to take
    t4 = [{"cel": {"expression": f"device.attributes['{DRIVER}'].productName == 'Tesla T4'"}}]
    template = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "small-first"},
        "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "firstAvailable": [
            {"name": "t4", "deviceClassName": GPU_CLASS, "selectors": t4},
            {"name": "any", "deviceClassName": GPU_CLASS},
        ]}]}}},
    }  # fmt: skip
    _apply(cluster, namespace, template, _pod("first", template="small-first"))
    first = _running(cluster, namespace, "first")
    _apply(cluster, namespace, _pod("second", template="small-first"))
    second = _running(cluster, namespace, "second")
    (got_t4,) = _results(_claim(cluster, namespace, first))
    (got_any,) = _results(_claim(cluster, namespace, second))
    assert (got_t4["request"], got_t4["pool"]) == ("gpu/t4", "t4-dra-0000")
    assert got_any["request"] == "gpu/any"
    assert got_any["pool"] == second["spec"]["nodeName"] != "t4-dra-0000"


def test_init_container_gpus_are_reused_by_the_main_container(
    cluster: E2ECluster, dra_pools: dict[str, int], namespace: str
) -> None:
    # kubernetes PR #134882: without it the Pod asks for the init container's GPUs and the main
    # container's, 4 here, which the node (2 whole GPUs, no other test uses them) cannot give.
    assert POOLS["a100-mig-dra"].gpus == 2
    gpus = {"nvidia.com/gpu": "2"}
    _apply(cluster, namespace, _pod("init", gpus, init_limits=gpus, pool="a100-mig-dra"))
    pod = _running(cluster, namespace, "init")
    mappings = pod["status"]["extendedResourceClaimStatus"]["requestMappings"]
    assert {m["containerName"]: m["requestName"] for m in mappings} == {
        "init": "container-1-request-0",
        "main": "container-1-request-0",
    }
    claim = _claim(cluster, namespace, pod)
    (request,) = claim["spec"]["devices"]["requests"]
    assert request["exactly"]["count"] == 2
    assert sorted(r["device"] for r in _results(claim)) == ["gpu-0", "gpu-1"]


def test_migrating_pool_serves_gpus_by_claim_on_switched_nodes_only(
    cluster: E2ECluster, dra_pools: dict[str, int], namespace: str
) -> None:
    pool = POOLS["a100-migrating"]
    dra_node, plugin_node = pool.node_name(0), pool.node_name(dra_pools[pool.name] - 1)
    gpu = {"nvidia.com/gpu": "1"}
    _apply(cluster, namespace, _pod("on-dra", gpu, node=dra_node),
           _pod("on-plugin", gpu, node=plugin_node))  # fmt: skip
    on_dra, on_plugin = (
        _running(cluster, namespace, "on-dra"),
        _running(cluster, namespace, "on-plugin"),
    )
    (result,) = _results(_claim(cluster, namespace, on_dra))
    assert result["pool"] == dra_node
    assert "extendedResourceClaimStatus" not in on_plugin["status"]


def test_deleting_a_pod_frees_its_devices_for_the_next(
    cluster: E2ECluster, dra_pools: dict[str, int], namespace: str
) -> None:
    node = POOLS["a100-migrating"].node_name(1)  # a DRA node no other test uses
    every_gpu = {"nvidia.com/gpu": str(POOLS["a100-migrating"].gpus)}
    _apply(cluster, namespace, _pod("holder", every_gpu, node=node))
    holder = _running(cluster, namespace, "holder")
    claim = holder["status"]["extendedResourceClaimStatus"]["resourceClaimName"]
    _apply(cluster, namespace, _pod("waiter", every_gpu, node=node))
    assert "cannot allocate all claims" in _pending_reason(cluster, namespace, "waiter")
    cluster.kubectl("delete", "pod", "holder", "-n", namespace, "--wait=true")
    waiter = _running(cluster, namespace, "waiter")
    assert len(_results(_claim(cluster, namespace, waiter))) == 8
    gone = cluster.kubectl("get", "resourceclaim", claim, "-n", namespace, check=False)
    assert "NotFound" in gone.stderr  # the scheduler-made claim goes with its Pod


def test_mig_profile_resource_lands_on_a_mig_device_of_the_dra_node(
    cluster: E2ECluster, dra_pools: dict[str, int], namespace: str
) -> None:
    cluster.kubectl("apply", "-f", "-", input=json.dumps(mig_profile_class("1g.10gb")))
    mig = {"nvidia.com/mig-1g.10gb": "2"}
    _apply(cluster, namespace, _pod("mig", mig, pool="a100-mig-dra"))
    pod = _running(cluster, namespace, "mig")
    (mapping,) = pod["status"]["extendedResourceClaimStatus"]["requestMappings"]
    assert mapping["resourceName"] == "nvidia.com/mig-1g.10gb"
    results = _results(_claim(cluster, namespace, pod))
    assert [r["pool"] for r in results] == ["a100-mig-dra-0000"] * 2
    assert all("-mig-1g10gb-19-" in r["device"] for r in results), results


@pytest.mark.parametrize("fleet_cluster", ["pure-dra"], indirect=True)
def test_pure_dra_fleet_serves_a_plain_gpu_limit_from_slices(fleet_cluster: E2ECluster) -> None:
    nodes = json.loads(fleet_cluster.kubectl("get", "nodes", "-o", "json").stdout)["items"]
    assert not [n for n in nodes if "nvidia.com/gpu" in n["status"]["allocatable"]]
    _apply(fleet_cluster, "default", _pod("plain", {"nvidia.com/gpu": "1"}))
    pod = _running(fleet_cluster, "default", "plain")
    (result,) = _results(_claim(fleet_cluster, "default", pod))
    assert result["pool"] == pod["spec"]["nodeName"]
    assert POOLS[pod["spec"]["nodeName"].rsplit("-", 1)[0]].dra == 1.0


@pytest.mark.parametrize("fleet_cluster", ["migrating"], indirect=True)
def test_deleting_a_dra_node_deletes_its_slice(fleet_cluster: E2ECluster) -> None:
    def slices() -> list[str]:
        out = fleet_cluster.kubectl("get", "resourceslices", "-o", "name").stdout
        return sorted(line.split("/", 1)[1] for line in out.split())

    assert slices() == ["a100-migrating-0000-gpu.nvidia.com", "a100-migrating-0001-gpu.nvidia.com"]
    fleet_cluster.kubectl("delete", "node", "a100-migrating-0000")
    deadline = time.monotonic() + 30
    while len(slices()) > 1 and time.monotonic() < deadline:
        time.sleep(0.5)
    assert slices() == ["a100-migrating-0001-gpu.nvidia.com"]  # the garbage collector's work
