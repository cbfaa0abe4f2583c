"""The promises of ``helm install``, on a ground whose real node runs the Pods.

Both operators run as Pods from the images ``make images`` built; the API server calls our
webhooks through the chart's Service; a CPU Dask cluster gets a real scheduler and workers that
compute; a GPU Dask cluster applied with kubectl comes back mutated and lands on a kwok GPU pool.
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from provingground.install import (
    DASK_OPERATOR_NAMESPACE,
    NAMESPACE,
    RELEASE,
    pod_images,
)
from provingground.install_demo import compute_through, cpu_dask_cluster
from provingground.pools import POOL_LABEL

from .conftest import InstalledGround

pytestmark = pytest.mark.e2e

REPO = Path(__file__).resolve().parents[3]
GPU_EXAMPLE = REPO / "examples" / "gpu-cluster-tcp.yaml"


def _eventually(check: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        result = check()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not within {timeout:.0f}s")
        time.sleep(1)


def _namespace(ground: InstalledGround, name: str, *labels: str) -> str:
    ground.kubectl("create", "namespace", name)
    if labels:
        ground.kubectl("label", "namespace", name, *labels)
    return name


def cpu_cluster(ground: InstalledGround, name: str) -> dict[str, Any]:
    """examples/cpu-cluster.yaml with the built Dask image, pinned to the real node."""
    return cpu_dask_cluster(name, ground.images.dask, ground.node)


def _pods(ground: InstalledGround, namespace: str, selector: str) -> list[dict[str, Any]]:
    out = ground.kubectl("get", "pods", "-n", namespace, "-l", selector, "-o", "json").stdout
    items: list[dict[str, Any]] = json.loads(out)["items"]
    return items


def test_both_operators_run_ready_on_the_real_node_from_the_built_images(installed):
    expected = {
        NAMESPACE: (3, installed.images.operator),  # two webhook replicas and the drift watch
        DASK_OPERATOR_NAMESPACE: (1, installed.images.dask_operator),
    }
    for namespace, (count, reference) in expected.items():
        rows = pod_images(installed.kubectl, namespace)
        assert len(rows) == count, rows
        for row in rows:
            assert row["phase"] == "Running", row
            assert row["ready"], row
            assert row["node"] == installed.node, row
            (container,) = row["containers"]
            assert container["image"] == reference, row
            assert installed.images.matches(reference, container["imageID"]), row


def test_operator_runs_as_65532_on_a_read_only_root_filesystem(installed):
    pod = _pods(installed, NAMESPACE, "app.kubernetes.io/component=webhook")[0]
    name = pod["metadata"]["name"]
    script = (
        "import os\n"
        "print(os.getuid(), os.getgid())\n"
        "try:\n"
        "    open('/written-by-the-test', 'w')\n"
        "    print('writable')\n"
        "except OSError as exc:\n"
        "    print(exc.strerror)\n"
    )
    out = installed.kubectl("exec", "-n", NAMESPACE, name, "--", "python", "-c", script).stdout
    assert out.split("\n")[:2] == ["65532 65532", "Read-only file system"]


def test_the_release_namespace_enforces_restricted_pod_security_and_has_a_pdb(installed):
    labels = json.loads(installed.kubectl("get", "namespace", NAMESPACE, "-o", "json").stdout)
    assert labels["metadata"]["labels"]["pod-security.kubernetes.io/enforce"] == "restricted"
    pdb = json.loads(installed.kubectl("get", "pdb", RELEASE, "-n", NAMESPACE, "-o", "json").stdout)
    assert pdb["status"]["currentHealthy"] == 2
    assert pdb["status"]["disruptionsAllowed"] == 1


def test_the_service_sends_webhook_calls_to_the_ready_webhook_pods_only(installed):
    slices = installed.kubectl(
        "get", "endpointslices", "-n", NAMESPACE, "-l", f"kubernetes.io/service-name={RELEASE}",
        "-o", "json",
    )  # fmt: skip
    ready = {
        address
        for s in json.loads(slices.stdout)["items"]
        for e in s.get("endpoints") or []
        if e["conditions"].get("ready")
        for address in e["addresses"]
    }
    webhook = _pods(installed, NAMESPACE, "app.kubernetes.io/component=webhook")
    drift = _pods(installed, NAMESPACE, "app.kubernetes.io/component=drift")
    assert ready == {p["status"]["podIP"] for p in webhook}
    assert len(ready) == 2
    assert drift[0]["status"]["podIP"] not in ready


def test_a_gpu_cluster_applied_with_kubectl_is_mutated_through_the_service(installed):
    configs = json.loads(
        installed.kubectl("get", "mutatingwebhookconfiguration", RELEASE, "-o", "json").stdout
    )
    for webhook in configs["webhooks"]:
        assert webhook["clientConfig"]["service"]["name"] == RELEASE  # not a URL: the Service
    ns = _namespace(installed, "install-gpu")
    applied = installed.kubectl("apply", "-n", ns, "-f", str(GPU_EXAMPLE))
    assert "Warning:" in applied.stderr  # each change is explained
    name = yaml.safe_load(GPU_EXAMPLE.read_text())["metadata"]["name"]
    stored = json.loads(
        installed.kubectl("get", "daskcluster", name, "-n", ns, "-o", "json").stdout
    )
    scheduler = stored["spec"]["scheduler"]["spec"]
    assert scheduler["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] in (1, "1")
    init = [c["name"] for c in scheduler["initContainers"]]
    assert init == ["gpu-parity-probe", "gpu-parity-check"]
    assert scheduler["initContainers"][0]["image"] == installed.images.probe

    def placed() -> list[dict[str, Any]]:
        pods = _pods(installed, ns, f"dask.org/cluster-name={name},dask.org/component=scheduler")
        return [p for p in pods if p["spec"].get("nodeName")]

    (pod,) = _eventually(placed, 180, "the GPU scheduler Pod placed on a node")
    node = json.loads(
        installed.kubectl("get", "node", pod["spec"]["nodeName"], "-o", "json").stdout
    )
    assert node["metadata"]["labels"].get(POOL_LABEL, "").startswith(("t4", "a100", "h100"))

    # The drift Pod, under the chart's RBAC, writes the cluster's PolicyReport.
    def report() -> dict[str, Any] | None:
        out = installed.kubectl("get", "policyreports", "-n", ns, "-o", "json").stdout
        return next((r for r in json.loads(out)["items"] if r["scope"]["name"] == name), None)

    written = _eventually(report, 120, "the DaskCluster's PolicyReport")
    assert written["summary"]["fail"] == 0
    assert written["metadata"]["ownerReferences"][0]["uid"] == stored["metadata"]["uid"]


def test_a_cpu_cluster_gets_a_real_scheduler_and_workers_that_compute(installed):
    ns = _namespace(installed, "install-cpu")
    doc = cpu_cluster(installed, "cpu-real")
    installed.kubectl("apply", "-n", ns, "-f", "-", stdin=json.dumps(doc))
    _address, result, workers = compute_through(installed.kubectl, ns, "cpu-real", 2)
    assert (result, workers) == (6, 2)
    pods = _pods(installed, ns, "dask.org/cluster-name=cpu-real")
    assert {p["spec"]["nodeName"] for p in pods} == {installed.node}
    for pod in pods:
        (status,) = pod["status"]["containerStatuses"]
        assert installed.images.matches(installed.images.dask, status["imageID"]), status


def test_a_cpu_cluster_is_left_as_written_by_our_webhook(installed):
    # The same cluster in a namespace the webhooks never see: what differs between the two
    # stored specs could only come from us.
    seen = _namespace(installed, "install-cpu-seen")
    unseen = _namespace(installed, "install-cpu-unseen", "gpuparity.dask.org/skip=true")
    doc = cpu_cluster(installed, "cpu-untouched")
    stored = []
    for ns in (seen, unseen):
        installed.kubectl("create", "-n", ns, "-f", "-", stdin=json.dumps(copy.deepcopy(doc)))
        got = installed.kubectl("get", "daskcluster", "cpu-untouched", "-n", ns, "-o", "json")
        stored.append(json.loads(got.stdout)["spec"])
    assert stored[0] == stored[1]
    assert stored[0]["scheduler"]["spec"] == doc["spec"]["scheduler"]["spec"]
    assert stored[0]["worker"]["spec"] == doc["spec"]["worker"]["spec"]
