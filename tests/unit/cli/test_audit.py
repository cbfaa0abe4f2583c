"""audit's verdicts and reports, on objects as the API server lists them (no cluster).

Nodes: examples/nodes.yaml (GPU Feature Discovery labels, as NVIDIA documents them:
https://github.com/NVIDIA/k8s-device-plugin#catalog-of-labels). Pods: as the dask operator
labels them (dask.org/cluster-name, dask.org/component, dask.org/workergroup-name:
https://kubernetes.dask.org/en/latest/operator_resources.html), with status fields as the
Kubernetes API reference defines them (ContainerStatus.state.terminated.exitCode:
https://kubernetes.io/docs/reference/kubernetes-api/workload-resources/pod-v1/#PodStatus).
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from dask_gpu_parity.audit import ClusterState, audit
from dask_gpu_parity.cli.audit_report import render_audit
from tests.unit.helpers import example, nodes

SARIF_SCHEMA = Path(__file__).resolve().parents[2] / "schemas" / "sarif-schema-2.1.0.json"
CUDA13 = "nvcr.io/nvidia/rapidsai/base:25.12-cuda13.0-py3.12"


def _fixed_cluster(name: str = "rapids", namespace: str = "team-a") -> dict[str, Any]:
    """examples/gpu-cluster-tcp.yaml with the scheduler given a GPU (as `fix` makes it)."""
    cluster = example("gpu-cluster-tcp.yaml")
    cluster["metadata"] = {"name": name, "namespace": namespace, "uid": f"uid-{name}"}
    scheduler = cluster["spec"]["scheduler"]["spec"]
    worker = cluster["spec"]["worker"]["spec"]
    scheduler["containers"][0]["resources"] = {"limits": {"nvidia.com/gpu": "1"}}
    for key in ("nodeSelector", "tolerations", "affinity"):
        if key in worker:
            scheduler[key] = copy.deepcopy(worker[key])
    return cluster


def _pod(
    cluster: str,
    role: str,
    node: str,
    *,
    image: str = CUDA13,
    check: dict[str, Any] | None = None,
    phase: str = "Running",
    namespace: str = "team-a",
    group: str = "default",
) -> dict[str, Any]:
    labels = {"dask.org/cluster-name": cluster, "dask.org/component": role}
    if role == "worker":
        labels["dask.org/workergroup-name"] = f"{cluster}-{group}"
    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"{cluster}-{role}-{node}", "namespace": namespace, "labels": labels},
        "spec": {"nodeName": node, "containers": [{"name": role, "image": image}]},
        "status": {"phase": phase},
    }
    if check is not None:
        pod["spec"]["initContainers"] = [{"name": "gpu-parity-check", "image": image}]
        pod["status"]["initContainerStatuses"] = [{"name": "gpu-parity-check", "state": check}]
    if not node:
        del pod["spec"]["nodeName"]
    return pod


PASSED = {"terminated": {"exitCode": 0, "reason": "Completed"}}
FAILED = {
    "terminated": {
        "exitCode": 1,
        "reason": "Error",
        "message": "driver 570.172.08 is not the expected 580.95.05",
    }
}


def _state(*resources: dict[str, Any], pods: list[dict[str, Any]]) -> ClusterState:
    return ClusterState(
        resources=list(resources),
        nodes=nodes(),
        namespaces={"team-a": {"metadata": {"name": "team-a"}}},
        pods=pods,
    )


def _one(state: ClusterState) -> Any:
    (found,) = audit(state)
    return found


def test_scheduler_and_workers_on_one_driver_class_and_image_is_ok():
    pods = [
        _pod("rapids", "scheduler", "a100-0", check=PASSED),
        _pod("rapids", "worker", "a100-1"),
    ]
    found = _one(_state(_fixed_cluster(), pods=pods))
    assert found.verdict == "ok", found.reason
    (scheduler,) = found.schedulers
    assert (scheduler.node, scheduler.driver, scheduler.cuda) == ("a100-0", "580.95.05", "13.0")
    assert scheduler.product == "NVIDIA-A100-SXM4-80GB"
    assert scheduler.check == "passed"
    assert [w.node for w in found.workers] == ["a100-1"]


def test_scheduler_on_another_driver_class_than_its_workers_is_drift():
    pods = [
        _pod("rapids", "scheduler", "h100-0", check=PASSED),  # 570.172.08 / 12.8
        _pod("rapids", "worker", "a100-1"),  # 580.95.05 / 13.0
    ]
    found = _one(_state(_fixed_cluster(), pods=pods))
    assert found.verdict == "drift"
    assert "570.172.08" in found.reason
    assert "580.95.05" in found.reason


def test_scheduler_on_a_node_without_a_gpu_is_drift():
    pods = [_pod("rapids", "scheduler", "cpu-0"), _pod("rapids", "worker", "a100-1")]
    found = _one(_state(example_cluster(), pods=pods))
    assert found.verdict == "drift"
    assert found.reason == "scheduler on cpu-0, a node without a GPU"
    assert "DGP001" in {f.code for f in found.findings}


def example_cluster() -> dict[str, Any]:
    cluster = example("gpu-cluster-tcp.yaml")
    cluster["metadata"] = {"name": "rapids", "namespace": "team-a"}
    return cluster


def test_scheduler_image_other_than_the_workers_is_drift():
    pods = [
        _pod("rapids", "scheduler", "a100-0", image="daskdev/dask:2025.1.0", check=PASSED),
        _pod("rapids", "worker", "a100-1"),
    ]
    found = _one(_state(_fixed_cluster(), pods=pods))
    assert found.verdict == "drift"
    assert found.reason.startswith("scheduler image daskdev/dask:2025.1.0, workers nvcr.io")


def test_failed_gpu_check_names_its_exit_code_and_message():
    pods = [_pod("rapids", "scheduler", "a100-0", check=FAILED, phase="Pending")]
    found = _one(_state(_fixed_cluster(), pods=pods))
    assert found.verdict == "check-failed"
    assert found.reason == (
        "gpu-parity-check failed on a100-0: exit 1: driver 570.172.08 is not the expected 580.95.05"
    )


def test_unscheduled_scheduler_is_pending():
    found = _one(_state(_fixed_cluster(), pods=[_pod("rapids", "scheduler", "", phase="Pending")]))
    assert found.verdict == "pending"
    found = _one(_state(_fixed_cluster(), pods=[]))
    assert found.verdict == "pending"


def test_cpu_cluster_is_no_gpu_and_opted_out_cluster_is_skipped():
    cpu = example("cpu-cluster.yaml")
    cpu["metadata"] = {"name": "cpu", "namespace": "team-a"}
    skipped = _fixed_cluster("quiet")
    skipped["metadata"]["annotations"] = {"gpuparity.dask.org/skip": "true"}
    verdicts = {a.name: a.verdict for a in audit(_state(cpu, skipped, pods=[]))}
    assert verdicts == {"cpu": "no-gpu", "quiet": "skipped"}


def test_findings_follow_the_namespaces_policy():
    policy = yaml.safe_load(Path("examples/policy.yaml").read_text())
    state = _state(example_cluster(), pods=[])
    state.policies = [policy]
    state.namespaces = {"team-a": {"metadata": {"name": "team-a", "labels": {}}}}
    found = _one(state)
    selector = policy["spec"].get("namespaceSelector")
    expected = policy["metadata"]["name"] if not selector else "built-in defaults"
    assert found.policy == expected


def test_worker_group_is_observed_against_its_clusters_scheduler():
    group = example("gpu-workergroup.yaml")
    group["metadata"]["namespace"] = "team-a"
    cluster_name = group["spec"]["cluster"]
    cluster = _fixed_cluster(cluster_name)
    pods = [
        _pod(cluster_name, "scheduler", "a100-0", check=PASSED),
        _pod(cluster_name, "worker", "a100-1"),
        _pod(cluster_name, "worker", "h100-0", group=group["metadata"]["name"].split("-", 1)[-1]),
    ]
    pods[2]["metadata"]["labels"]["dask.org/workergroup-name"] = group["metadata"]["name"]
    audited = {a.kind: a for a in audit(_state(cluster, group, pods=pods))}
    assert [w.node for w in audited["DaskWorkerGroup"].workers] == ["h100-0"]
    assert audited["DaskWorkerGroup"].verdict == "drift"
    assert len(audited["DaskCluster"].workers) == 2


@pytest.fixture
def audited() -> list[Any]:
    ok = [_pod("rapids", "scheduler", "a100-0", check=PASSED), _pod("rapids", "worker", "a100-1")]
    drift = [_pod("bad", "scheduler", "cpu-0"), _pod("bad", "worker", "a100-1")]
    return audit(_state(_fixed_cluster(), example_cluster_named("bad"), pods=ok + drift))


def example_cluster_named(name: str) -> dict[str, Any]:
    cluster = example_cluster()
    cluster["metadata"]["name"] = name
    return cluster


def test_text_is_a_table_with_a_row_per_resource_and_the_findings_below(audited):
    text = render_audit("text", audited)
    lines = text.splitlines()
    assert lines[0].split()[:4] == ["NAMESPACE", "KIND", "NAME", "VERDICT"]
    assert lines[1].split()[:8] == [
        "team-a", "DaskCluster", "bad", "drift", "cpu-0", "-", "-", "-",
    ]  # fmt: skip
    assert lines[2].split()[:9] == [
        "team-a", "DaskCluster", "rapids", "ok", "a100-0", "580.95.05", "13.0",
        "NVIDIA-A100-SXM4-80GB", "passed",
    ]  # fmt: skip
    assert "Findings:" in lines
    assert any(line.startswith("  DaskCluster team-a/bad: DGP001 error at ") for line in lines)
    assert lines[-1] == "2 Dask resources: 1 drift, 1 ok"


def test_json_carries_observed_parity_and_findings(audited):
    report = json.loads(render_audit("json", audited))
    by_name = {r["name"]: r for r in report["resources"]}
    assert by_name["rapids"]["scheduler"][0]["driver"] == "580.95.05"
    assert by_name["rapids"]["scheduler"][0]["check"] == "passed"
    assert by_name["bad"]["verdict"] == "drift"
    assert "DGP001" in {f["code"] for f in by_name["bad"]["findings"]}
    assert report["summary"]["verdicts"]["drift"] == 1


def test_sarif_is_valid_and_names_each_resource(audited):
    log = json.loads(render_audit("sarif", audited))
    jsonschema.validate(log, json.loads(SARIF_SCHEMA.read_text()))
    names = {
        r["locations"][0]["logicalLocations"][0]["fullyQualifiedName"]
        for r in log["runs"][0]["results"]
    }
    assert names == {f"team-a/DaskCluster/{a.name}" for a in audited if a.findings}
    assert "team-a/DaskCluster/bad" in names


def test_policyreport_per_resource_with_a_result_per_finding(audited):
    """Named and shaped as the drift watch writes them (Kyverno's per-resource layout)."""
    reports = {
        r["scope"]["name"]: r for r in yaml.safe_load_all(render_audit("policyreport", audited))
    }
    assert set(reports) == {a.name for a in audited}
    for a in audited:
        report = reports[a.name]
        assert (report["apiVersion"], report["kind"]) == ("wgpolicyk8s.io/v1alpha2", "PolicyReport")
        assert report["metadata"]["namespace"] == "team-a"
        assert report["scope"]["kind"] == a.kind
        results = report["results"]
        assert {r["policy"] for r in results} == {"dask-gpu-parity"}
        assert [r["rule"] for r in results][: len(a.findings)] == [f.code for f in a.findings]
        tally = {k: sum(r["result"] == k for r in results) for k in report["summary"]}
        assert report["summary"] == tally
    bad = reports["bad"]
    assert "DGP001" in {r["rule"] for r in bad["results"] if r["result"] == "fail"}
    rapids = reports["rapids"]
    assert rapids["metadata"]["name"] == "dask-gpu-parity-uid-rapids"
    assert rapids["metadata"]["ownerReferences"][0]["uid"] == "uid-rapids"


def test_policyreport_skips_a_resource_with_no_gpu_workers():
    cpu = example("cpu-cluster.yaml")
    cpu["metadata"] = {"name": "cpu", "namespace": "team-b"}
    (report,) = list(yaml.safe_load_all(render_audit("policyreport", audit(_state(cpu, pods=[])))))
    assert report["metadata"]["namespace"] == "team-b"
    assert report["metadata"]["name"] == "dask-gpu-parity-daskcluster-cpu"  # no uid offline
    (result,) = report["results"]
    assert (result["rule"], result["result"]) == ("parity", "skip")
    assert result["properties"] == {"verdict": "no-gpu"}
    assert report["summary"] == {"pass": 0, "fail": 0, "warn": 0, "error": 0, "skip": 1}
