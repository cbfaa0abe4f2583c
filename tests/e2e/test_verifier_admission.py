"""The injected verifier (gpu-parity-probe, gpu-parity-check, their emptyDir), as the real API
server judges it.

The DaskCluster CRD embeds a Kubernetes 1.21 PodSpec and prunes unknown fields, and Pod Security
admission judges the scheduler Pod the dask operator creates. Both must accept the init
containers and the volume exactly as ``evaluate`` writes them.
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
from dask_gpu_parity.core.policy import Delivery, Policy, VerifierSettings
from dask_gpu_parity.core.verifier import default_probe_image

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
RESTRICTED_CONTAINER = {
    "runAsNonRoot": True,
    "runAsUser": 1000,
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "seccompProfile": {"type": "RuntimeDefault"},
}


def _fixed(
    name: str,
    namespace: str,
    *,
    security: dict[str, Any] | None = None,
    policy: Policy | None = None,
) -> dict[str, Any]:
    doc = yaml.safe_load((EXAMPLES / name).read_text())
    doc["metadata"]["namespace"] = namespace
    if security is not None:
        pod_specs = [doc["spec"]["scheduler"]["spec"], doc["spec"]["worker"]["spec"]]
        for spec in pod_specs:
            for container in spec["containers"]:
                container["securityContext"] = dict(security)
    nodes = yaml.safe_load((EXAMPLES / "nodes.yaml").read_text())["items"]
    fixed: dict[str, Any] = evaluate(doc, policy, Inventory.from_nodes(nodes)).patched
    return fixed


def _scheduler_spec(doc: dict[str, Any]) -> dict[str, Any]:
    spec = doc["spec"]
    spec = spec["cluster"]["spec"] if doc["kind"] == "DaskJob" else spec
    scheduler: dict[str, Any] = spec["scheduler"]["spec"]
    return scheduler


def _verifier(doc: dict[str, Any]) -> tuple[list[Any], list[Any]]:
    """The injected init containers and volumes of the scheduler pod spec."""
    spec = _scheduler_spec(doc)
    inits = [c for c in spec["initContainers"] if c["name"].startswith("gpu-parity-")]
    volumes = [v for v in spec.get("volumes", []) if v["name"].startswith("gpu-parity-")]
    return inits, volumes


@pytest.mark.e2e
@pytest.mark.parametrize("delivery", list(Delivery))
@pytest.mark.parametrize(
    "example", ["gpu-cluster-tcp.yaml", "gpu-cluster-ucx.yaml", "gpu-daskjob.yaml"]
)
def test_crd_keeps_the_verifier_as_written(cluster, dask_operator, namespace, example, delivery):
    doc = _fixed(example, namespace, policy=Policy(verifier=VerifierSettings(delivery=delivery)))
    proc = cluster.kubectl(
        "create", "--dry-run=server", "-o", "json", "-f", "-", input=json.dumps(doc)
    )
    stored = json.loads(proc.stdout)
    assert _verifier(stored) == _verifier(doc)  # nothing pruned, nothing rejected
    inits, volumes = _verifier(stored)
    if delivery is Delivery.INLINE:
        assert [c["name"] for c in inits] == ["gpu-parity-check"]
        assert inits[0]["command"][3] == Path(probe.__file__).read_text(encoding="utf-8")
        assert volumes == []
    else:
        assert [c["name"] for c in inits] == ["gpu-parity-probe", "gpu-parity-check"]
        assert inits[0]["image"] == default_probe_image()
        assert volumes == [{"name": "gpu-parity-probe", "emptyDir": {"sizeLimit": "1Mi"}}]


@pytest.mark.e2e
def test_crd_has_no_image_volumes(cluster, dask_operator, namespace):
    """Why the probe is copied into an emptyDir: the CRD's 1.21 PodSpec has no image volumes.

    kubectl's strict field validation refuses ``volumes[].image`` (KEP-4639); clients that do not
    ask for strict validation (the server's default is to warn) get it pruned, leaving a volume
    with no source, which Pod defaulting turns into an empty emptyDir: no probe, found late.
    """
    doc = _fixed("gpu-cluster-tcp.yaml", namespace)
    volume = {"name": "probe", "image": {"reference": default_probe_image()}}
    _scheduler_spec(doc)["volumes"].append(volume)
    text = json.dumps(doc)
    strict = cluster.kubectl("create", "--dry-run=server", "-f", "-", input=text, check=False)
    assert strict.returncode != 0
    assert 'unknown field "spec.scheduler.spec.volumes[1].image"' in strict.stderr
    proc = cluster.kubectl(
        "create", "--dry-run=server", "--validate=false", "-o", "json", "-f", "-", input=text
    )
    stored = {v["name"]: v for v in _scheduler_spec(json.loads(proc.stdout))["volumes"]}
    assert stored["probe"] == {"name": "probe"}  # pruned


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
    # The dask operator makes the scheduler's Deployment in a kopf handler that, on a transient
    # client error, is retried 60 s later: two such retries still fit.
    deadline = time.monotonic() + 180
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


def _carries(got: Any, want: Any) -> bool:
    """Whether ``got`` holds everything in ``want``: maps by key, lists item by item, in order
    (defaulting adds keys and appends list items; it changes nothing that was written)."""
    if isinstance(want, dict):
        return isinstance(got, dict) and all(
            k in got and _carries(got[k], v) for k, v in want.items()
        )
    if isinstance(want, list):
        return (
            isinstance(got, list)
            and len(got) >= len(want)
            and all(_carries(g, w) for g, w in zip(got, want, strict=False))
        )
    return bool(got == want)


def _pod_manifest(pod: Any, api: client.ApiClient) -> dict[str, Any]:
    """The Pod as a manifest one could apply: spec and labels, nothing the server set."""
    data = api.sanitize_for_serialization(pod)
    spec = {k: v for k, v in data["spec"].items() if k not in ("nodeName",)}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": data["metadata"]["name"] + "-again",
            "namespace": data["metadata"]["namespace"],
            "labels": data["metadata"].get("labels", {}),
        },
        "spec": spec,
    }


@pytest.mark.e2e
@pytest.mark.timeout(360)
def test_restricted_namespace_admits_the_verifier(cluster, node_pools, dask_operator, namespace):
    """The scheduler Pod the real dask operator creates: both init containers, the volume, and
    restricted Pod Security, with the GPU-less step requesting no GPU."""
    _restrict(cluster, namespace)
    doc = _fixed("gpu-cluster-tcp.yaml", namespace, security=RESTRICTED_CONTAINER)
    doc["spec"]["scheduler"]["spec"]["securityContext"] = {
        "runAsNonRoot": True,
        "seccompProfile": {"type": "RuntimeDefault"},
    }
    cluster.kubectl("apply", "-f", "-", input=json.dumps(doc))
    pod, failure = _scheduler_pod_or_failure(cluster, namespace, doc["metadata"]["name"])
    assert pod is not None, failure
    copy, check = pod.spec.init_containers
    assert (copy.name, check.name) == ("gpu-parity-probe", "gpu-parity-check")
    # exactly as designed: the pod carries what evaluate wrote, plus only what the API server
    # adds to every Pod (defaulted requests, the service account token mount)
    designed, volumes = _verifier(doc)
    as_pod = cluster.api.sanitize_for_serialization(pod)
    for want, got in zip(designed, as_pod["spec"]["initContainers"], strict=True):
        assert _carries(got, want), (got, want)
    pod_volumes = {v["name"]: v for v in as_pod["spec"]["volumes"]}
    assert pod_volumes["gpu-parity-probe"] == volumes[0]
    # the GPU-less step: no GPU requested, and told it is no GPU container
    requested = {**(copy.resources.limits or {}), **(copy.resources.requests or {})}
    assert not [r for r in requested if r.startswith("nvidia.com/")]
    assert [(e.name, e.value) for e in copy.env] == [("NVIDIA_VISIBLE_DEVICES", "void")]
    assert check.resources.limits["nvidia.com/gpu"] == "1"
    assert check.image == doc["spec"]["scheduler"]["spec"]["containers"][0]["image"]
    assert check.command == ["python", "-I", "/gpu-parity/probe.py"]
    assert check.security_context.allow_privilege_escalation is False
    assert check.termination_message_policy == "FallbackToLogsOnError"
    # and the Pod as it stands passes the restricted level again, server-side, with no warning
    manifest = _pod_manifest(pod, cluster.api)
    proc = cluster.kubectl(
        "apply", "--dry-run=server", "-f", "-", input=json.dumps(manifest), check=False
    )
    assert proc.returncode == 0, proc.stderr
    assert "PodSecurity" not in proc.stderr


@pytest.mark.e2e
@pytest.mark.timeout(360)
def test_restricted_namespace_really_enforces(cluster, node_pools, dask_operator, namespace):
    """The control: a non-compliant scheduler is refused, so the test above means something.

    The copy step is restricted on its own, so only the scheduler's containers are named.
    """
    _restrict(cluster, namespace)
    doc = _fixed("gpu-cluster-tcp.yaml", namespace)  # no securityContext at all
    cluster.kubectl("apply", "-f", "-", input=json.dumps(doc))
    pod, failure = _scheduler_pod_or_failure(cluster, namespace, doc["metadata"]["name"])
    assert pod is None
    assert "violates PodSecurity" in failure
    assert "gpu-parity-check" in failure  # the init container is judged too
    assert "gpu-parity-probe" not in failure
