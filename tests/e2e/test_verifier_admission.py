"""The injected gpu-parity-check init container, as the real API server judges it.

The DaskCluster CRD embeds a Kubernetes 1.21 PodSpec and prunes unknown fields, and Pod Security
admission judges the scheduler Pod the dask operator creates. Both must accept the init container
exactly as ``evaluate`` writes it.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from dask_gpu_parity import probe
from dask_gpu_parity.core.engine import evaluate
from dask_gpu_parity.core.inventory import Inventory

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
RESTRICTED_CONTAINER = {
    "runAsNonRoot": True,
    "runAsUser": 1000,
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "seccompProfile": {"type": "RuntimeDefault"},
}


def _fixed(name: str, namespace: str, *, security: dict[str, Any] | None = None) -> dict[str, Any]:
    doc = yaml.safe_load((EXAMPLES / name).read_text())
    doc["metadata"]["namespace"] = namespace
    if security is not None:
        pod_specs = [doc["spec"]["scheduler"]["spec"], doc["spec"]["worker"]["spec"]]
        for spec in pod_specs:
            for container in spec["containers"]:
                container["securityContext"] = dict(security)
    nodes = yaml.safe_load((EXAMPLES / "nodes.yaml").read_text())["items"]
    fixed: dict[str, Any] = evaluate(doc, None, Inventory.from_nodes(nodes)).patched
    return fixed


def _init(doc: dict[str, Any]) -> dict[str, Any]:
    spec = doc["spec"]
    spec = spec["cluster"]["spec"] if doc["kind"] == "DaskJob" else spec
    (init,) = [
        c for c in spec["scheduler"]["spec"]["initContainers"] if c["name"] == "gpu-parity-check"
    ]
    return dict(init)


@pytest.mark.e2e
@pytest.mark.parametrize(
    "example", ["gpu-cluster-tcp.yaml", "gpu-cluster-ucx.yaml", "gpu-daskjob.yaml"]
)
def test_crd_keeps_the_init_container_as_written(cluster, dask_operator, namespace, example):
    doc = _fixed(example, namespace)
    proc = cluster.kubectl(
        "create", "--dry-run=server", "-o", "json", "-f", "-", input=json.dumps(doc)
    )
    stored = json.loads(proc.stdout)
    assert _init(stored) == _init(doc)  # nothing pruned, nothing rejected
    assert _init(stored)["command"][3] == Path(probe.__file__).read_text(encoding="utf-8")


def _restrict(cluster, namespace: str) -> None:
    """Label the namespace restricted and wait until Pod Security admission has seen the label
    (its namespace cache lags the API by a moment)."""
    cluster.kubectl(
        "label", "namespace", namespace, "pod-security.kubernetes.io/enforce=restricted"
    )
    probe_pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "pss-probe", "namespace": namespace},
        "spec": {"containers": [{"name": "c", "image": "x"}]},
    }
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        proc = cluster.kubectl(
            "create", "--dry-run=server", "-f", "-", input=json.dumps(probe_pod), check=False
        )
        if "violates PodSecurity" in proc.stderr:
            return
        time.sleep(0.5)
    raise AssertionError(f"Pod Security admission never enforced 'restricted' on {namespace}")


def _scheduler_pod_or_failure(cluster, namespace: str, name: str) -> tuple[Any, str]:
    core = client.CoreV1Api(cluster.api)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        pods = core.list_namespaced_pod(
            namespace, label_selector=f"dask.org/cluster-name={name},dask.org/component=scheduler"
        ).items
        if pods:
            return pods[0], ""
        events = core.list_namespaced_event(namespace).items
        failures = [
            e.message
            for e in events
            if e.reason == "FailedCreate"
            and e.involved_object.name.startswith(f"{name}-scheduler")  # not the workers'
        ]
        if failures:
            return None, failures[0]
        time.sleep(1)
    raise AssertionError(f"No scheduler Pod and no FailedCreate event for {namespace}/{name}")


@pytest.mark.e2e
@pytest.mark.timeout(300)
def test_restricted_namespace_admits_the_verifier(cluster, node_pools, dask_operator, namespace):
    _restrict(cluster, namespace)
    doc = _fixed("gpu-cluster-tcp.yaml", namespace, security=RESTRICTED_CONTAINER)
    doc["spec"]["scheduler"]["spec"]["securityContext"] = {
        "runAsNonRoot": True,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    cluster.kubectl("apply", "-f", "-", input=json.dumps(doc))
    pod, failure = _scheduler_pod_or_failure(cluster, namespace, doc["metadata"]["name"])
    assert pod is not None, failure
    (init,) = pod.spec.init_containers
    assert init.name == "gpu-parity-check"
    assert init.security_context.allow_privilege_escalation is False
    assert init.security_context.capabilities.drop == ["ALL"]
    assert init.resources.limits["nvidia.com/gpu"] == "1"
    assert init.termination_message_policy == "FallbackToLogsOnError"


@pytest.mark.e2e
@pytest.mark.timeout(300)
def test_restricted_namespace_really_enforces(cluster, node_pools, dask_operator, namespace):
    """The control: a non-compliant scheduler is refused, so the test above means something."""
    _restrict(cluster, namespace)
    doc = _fixed("gpu-cluster-tcp.yaml", namespace)  # no securityContext at all
    cluster.kubectl("apply", "-f", "-", input=json.dumps(doc))
    pod, failure = _scheduler_pod_or_failure(cluster, namespace, doc["metadata"]["name"])
    assert pod is None
    assert "violates PodSecurity" in failure
    assert "gpu-parity-check" in failure  # the init container is judged too
