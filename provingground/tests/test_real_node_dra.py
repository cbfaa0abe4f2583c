"""GPUs by Dynamic Resource Allocation on the real node, through the stand-in DRA GPU plugin.

The plugin (``provingground/node/draplugin/``, driver ``gpu.nvidia.com``) runs on the real node
with two H200s from a ``--devices`` file (``provingground.node.dra.sample_gpus``: NVML's values on
the GPU machine), the DeviceClass ``gpu.nvidia.com`` as NVIDIA's Helm chart renders it
(``extendedResourceName: nvidia.com/gpu``). Without a GPU the plugin's CDI spec gives a container
``GPU_DEVICE_<minor>=gpu-<minor>`` and ``NVIDIA_VISIBLE_DEVICES=<uuid>``: the env says which
device the container got. ``DRAExtendedResource`` is beta and on by default in v1.36.3
(``k8s.io/kubernetes`` ``pkg/features/kube_features.go``), so the control plane needs no flag.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from provingground.node import DraPlugin, NodeBinariesMissingError, RealNode, find_dra_plugin
from provingground.node.dra import DEVICE_CLASS, DRIVER, sample_gpus, write_devices
from provingground.pytest_plugin import E2ECluster
from provingground.tests.nodepods import apply, eventually, pod

pytestmark = pytest.mark.e2e
ENV = "env | grep -E '^(GPU_DEVICE|NVIDIA_VISIBLE_DEVICES)' | sort"
# Held while the claim is read: the claim of a pod that has finished is deleted.
HOLD = f"{ENV}; echo printed; sleep 3600"


@pytest.fixture(scope="module")
def dra_node(real_node: RealNode, tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealNode]:
    """The real node with the DRA GPU plugin serving two GPUs (skipped when it is not built)."""
    try:
        binary = find_dra_plugin()
    except NodeBinariesMissingError as exc:
        pytest.skip(str(exc))
    devices = write_devices(tmp_path_factory.mktemp("dra") / "gpus.json", sample_gpus(2))
    real_node.start_dra(DraPlugin(binary, devices))
    yield real_node
    real_node.stop_dra()


def get(cluster: E2ECluster, *args: str) -> Any:
    """``kubectl get ARGS -o json``, parsed."""
    return json.loads(cluster.kubectl("get", *args, "-o", "json").stdout)


def env_of(log: str) -> dict[str, str]:
    """``NAME=value`` lines as a dict."""
    return dict(line.split("=", 1) for line in log.split() if "=" in line)


def printed_env(cluster: E2ECluster, namespace: str, name: str) -> dict[str, str]:
    """The running pod's env lines (``HOLD``), once printed."""

    def log() -> str | None:
        out = cluster.kubectl("logs", "-n", namespace, name, check=False).stdout
        return out if "printed" in out else None

    def explain() -> str:
        return cluster.kubectl("describe", "pod", "-n", namespace, name, check=False).stdout

    return env_of(eventually(f"Pod {name} printed its env", log, explain=explain))


def allocated(cluster: E2ECluster, namespace: str, claim: str) -> list[dict[str, Any]]:
    """The claim's ``status.allocation.devices.results``."""
    status = get(cluster, "resourceclaim", "-n", namespace, claim)["status"]
    return list(status["allocation"]["devices"]["results"])


def delete_and_check_unprepared(
    cluster: E2ECluster, node: RealNode, namespace: str, name: str
) -> None:
    """Delete the pod; its claims go, and the plugin's CDI specs with them."""
    cluster.kubectl("delete", "pod", "-n", namespace, name, "--wait=true", "--timeout=90s")
    eventually(
        f"the claims of {name} deleted",
        lambda: not get(cluster, "resourceclaims", "-n", namespace)["items"],
        deadline=90,
    )
    eventually(
        f"the CDI specs of {name} removed from {node.cdi_dir}",
        lambda: not list(node.cdi_dir.iterdir()),
        deadline=90,
        explain=lambda: str(list(node.cdi_dir.iterdir())),
    )


def test_plugin_publishes_one_slice_with_nvidia_s_attributes_versions_normalised(
    dra_node: RealNode,
) -> None:
    # Expected as NVIDIA's driver publishes a full GPU (cmd/gpu-kubelet-plugin/deviceinfo.go,
    # GpuInfo.Attributes and GetDevice): versions through semver, so 580.159.04 is 580.159.4.
    (slice_,) = dra_node.resource_slices()
    assert slice_["spec"]["driver"] == DRIVER
    assert slice_["spec"]["pool"]["name"] == dra_node.name
    devices = {d["name"]: d for d in slice_["spec"]["devices"]}
    assert sorted(devices) == ["gpu-0", "gpu-1"]
    assert devices["gpu-1"]["attributes"] == {
        "type": {"string": "gpu"},
        "uuid": {"string": "GPU-00000000-0000-4000-8000-000000000001"},
        "productName": {"string": "NVIDIA H200"},
        "brand": {"string": "Nvidia"},
        "architecture": {"string": "Hopper"},
        "cudaComputeCapability": {"version": "9.0.0"},
        "driverVersion": {"version": "580.159.4"},
        "cudaDriverVersion": {"version": "13.0.0"},
    }
    assert devices["gpu-1"]["capacity"] == {"memory": {"value": "143771Mi"}}


def test_pod_asking_nvidia_gpu_gets_one_dra_device_and_unprepares_cleanly(
    cluster: E2ECluster, dra_node: RealNode, namespace: str
) -> None:
    spec = pod("gpu", HOLD)
    spec["spec"]["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "1"}}
    apply(cluster, namespace, spec)
    env = printed_env(cluster, namespace, "gpu")
    status = get(cluster, "pod", "-n", namespace, "gpu")["status"]
    claim = status["extendedResourceClaimStatus"]["resourceClaimName"]
    (result,) = allocated(cluster, namespace, claim)
    assert (result["driver"], result["pool"]) == (DRIVER, dra_node.name)
    minor = result["device"].removeprefix("gpu-")
    assert env == {
        f"GPU_DEVICE_{minor}": result["device"],
        f"GPU_DEVICE_{minor}_UUID": f"GPU-00000000-0000-4000-8000-{int(minor):012d}",
        "NVIDIA_VISIBLE_DEVICES": f"GPU-00000000-0000-4000-8000-{int(minor):012d}",
    }
    assert "nvidia.com/gpu" not in get(cluster, "node", dra_node.name)["status"]["capacity"]
    delete_and_check_unprepared(cluster, dra_node, namespace, "gpu")


def test_pod_with_a_resource_claim_template_gets_the_device_its_claim_names(
    cluster: E2ECluster, dra_node: RealNode, namespace: str
) -> None:
    template = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "one-gpu"},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [{"name": "gpu", "exactly": {"deviceClassName": DEVICE_CLASS}}]
                }
            }
        },
    }
    spec = pod("claimed", HOLD)
    spec["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]
    spec["spec"]["containers"][0]["resources"] = {"claims": [{"name": "gpu"}]}
    apply(cluster, namespace, template, spec)
    env = printed_env(cluster, namespace, "claimed")
    (status,) = get(cluster, "pod", "-n", namespace, "claimed")["status"]["resourceClaimStatuses"]
    (result,) = allocated(cluster, namespace, status["resourceClaimName"])
    assert (result["driver"], result["pool"], result["request"]) == (DRIVER, dra_node.name, "gpu")
    assert [v for k, v in env.items() if k.startswith("GPU_DEVICE_") and "UUID" not in k] == [
        result["device"]
    ]
    delete_and_check_unprepared(cluster, dra_node, namespace, "claimed")


def test_init_and_app_container_asking_nvidia_gpu_share_one_device_on_v1_36_3(
    cluster: E2ECluster, dra_node: RealNode, namespace: str
) -> None:
    # kubernetes PR #134882: an init container's DRA-backed extended resource is reused by the
    # app container (as with the device plugin). v1.36.3's scheduler carries it
    # (extendeddynamicresources.go: "Requests at later indices are reusable by non-sidecar
    # initContainers at earlier indices"), so the Pod asks for one device of the node's two.
    spec = pod("both", HOLD)
    init = {**spec["spec"]["containers"][0], "name": "init"}
    init["command"] = ["sh", "-c", f"{ENV} > /dev/termination-log"]
    spec["spec"]["initContainers"] = [init]
    for container in (init, spec["spec"]["containers"][0]):
        container["resources"] = {"limits": {"nvidia.com/gpu": "1"}}
    apply(cluster, namespace, spec)
    app_env = printed_env(cluster, namespace, "both")
    status = get(cluster, "pod", "-n", namespace, "both")["status"]
    init_env = env_of(status["initContainerStatuses"][0]["state"]["terminated"]["message"])
    claim = status["extendedResourceClaimStatus"]
    (result,) = allocated(cluster, namespace, claim["resourceClaimName"])
    assert {m["containerName"] for m in claim["requestMappings"]} == {"init", "main"}
    assert len({m["requestName"] for m in claim["requestMappings"]}) == 1
    assert init_env == app_env
    assert app_env[f"GPU_DEVICE_{result['device'].removeprefix('gpu-')}"] == result["device"]
    delete_and_check_unprepared(cluster, dra_node, namespace, "both")


def test_stopping_the_plugin_removes_its_slices_and_the_class_it_made(
    cluster: E2ECluster, dra_node: RealNode
) -> None:
    # Last in this module: later tests of the session must see no GPU on the real node. The
    # class goes only if the plugin made it: a class that was there before (the DRA pools of
    # an earlier module make NVIDIA's) is someone else's and stays.
    made = bool(dra_node.facts.get("dra_device_class_created"))
    dra_node.stop_dra()
    assert dra_node.resource_slices() == []
    args = ("get", "deviceclass", DEVICE_CLASS, "--ignore-not-found", "-o", "name")
    assert bool(cluster.kubectl(*args).stdout.strip()) is not made
    assert "dra-gpu-plugin" not in dra_node.processes
