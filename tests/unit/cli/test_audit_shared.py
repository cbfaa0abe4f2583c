"""audit evaluates once per distinct spec: what is shared must be exactly what each resource's
own evaluation gives.

Resources: the repository's examples (examples/*.yaml, each written from the dask-kubernetes
operator's documented resources: https://kubernetes.dask.org/en/latest/operator_resources.html),
stamped out under several names and namespaces as a fleet stamps them from one template, with the
identity fields the API server adds to every object (metadata.uid, resourceVersion,
creationTimestamp, generation, managedFields: https://kubernetes.io/docs/reference/using-api/api-concepts/)
and the status the dask operator keeps (status.phase).
"""

from __future__ import annotations

import copy
import datetime as dt
import json
from pathlib import Path
from typing import Any

import yaml

from dask_gpu_parity.audit import ClusterState, audit
from dask_gpu_parity.audit.shared import Evaluations, NamespacePolicies
from dask_gpu_parity.core.contentkey import spec_key
from dask_gpu_parity.core.engine import evaluate
from dask_gpu_parity.core.findings import Finding
from dask_gpu_parity.core.inventory import Inventory
from dask_gpu_parity.core.policy import Policy
from dask_gpu_parity.core.policy_manifest import load
from tests.unit.helpers import EXAMPLES, example, nodes

DASK_EXAMPLES = [
    p.name
    for p in sorted(EXAMPLES.glob("*.yaml"))
    if yaml.safe_load(p.read_text()).get("apiVersion", "").startswith("kubernetes.dask.org/")
]
NAMESPACES = ("team-a", "team-b", "gpu-lab")


def _stamped(doc: dict[str, Any], name: str, namespace: str, n: int) -> dict[str, Any]:
    out = copy.deepcopy(doc)
    meta = out.setdefault("metadata", {})
    meta |= {
        "name": name,
        "namespace": namespace,
        "uid": f"0000-{n:04d}",
        "resourceVersion": str(1000 + n),
        "creationTimestamp": f"2026-12-02T10:{n % 60:02d}:00Z",
        "generation": 1 + n % 3,
        "managedFields": [{"manager": f"kubectl-{n}", "operation": "Update"}],
    }
    out["status"] = {"phase": ("Created", "Running", "Pending")[n % 3]}
    return out


def _fleet() -> ClusterState:
    """Every Dask example three times in each namespace; team-b under examples/policy.yaml."""
    resources = [
        _stamped(example(name), f"{Path(name).stem}-{copy_}", namespace, n)
        for n, (name, namespace, copy_) in enumerate(
            (name, ns, c) for name in DASK_EXAMPLES for ns in NAMESPACES for c in range(3)
        )
    ]
    policy = yaml.safe_load((EXAMPLES / "policy.yaml").read_text())
    labels = policy["spec"].get("namespaceSelector", {}).get("matchLabels", {})
    return ClusterState(
        resources=resources,
        nodes=nodes(),
        policies=[policy],
        namespaces={
            ns: {"metadata": {"name": ns, "labels": labels if ns == "team-b" else {}}}
            for ns in NAMESPACES
        },
    )


def _alone(state: ClusterState, resource: dict[str, Any]) -> tuple[Finding, ...]:
    """The resource audited with nothing to share with (its DaskCluster kept for a group)."""
    kept = [
        r
        for r in state.resources
        if r is resource
        or (
            resource["kind"] == "DaskWorkerGroup"
            and r["kind"] == "DaskCluster"
            and r["metadata"]["namespace"] == resource["metadata"]["namespace"]
        )
    ]
    single = ClusterState(
        resources=kept, nodes=state.nodes, policies=state.policies, namespaces=state.namespaces
    )
    (found,) = [a for a in audit(single) if a.name == resource["metadata"]["name"]]
    return found.findings


def test_each_resource_of_a_stamped_fleet_gets_the_findings_of_its_own_evaluation():
    state = _fleet()
    audited = {(a.namespace, a.kind, a.name): a for a in audit(state)}
    assert len(audited) == len(state.resources)
    assert any(a.findings for a in audited.values())
    for resource in state.resources:
        meta = resource["metadata"]
        shared = audited[(meta["namespace"], resource["kind"], meta["name"])]
        assert shared.findings == _alone(state, resource), meta["name"]


def test_resources_equal_but_for_identity_and_status_are_evaluated_once():
    inventory = Inventory.from_nodes(nodes())
    calls: list[str] = []

    def judge(resource: Any, policy: Policy, cluster: Any) -> tuple[Finding, ...]:
        calls.append(resource["metadata"]["name"])
        return evaluate(resource, policy, inventory, cluster=cluster, schema=False).findings

    evaluations, policy = Evaluations(judge), Policy()
    template = example("gpu-cluster-tcp.yaml")
    fleet = [_stamped(template, f"c-{n}", NAMESPACES[n % 3], n) for n in range(100)]
    first = evaluations.findings(fleet[0], policy)
    assert first
    for cluster in fleet:
        assert evaluations.findings(cluster, policy) == first
    assert calls == ["c-0"]

    annotated = copy.deepcopy(fleet[1])
    annotated["metadata"]["annotations"] = {"gpuparity.dask.org/cuda-version": "12.8"}
    changed = copy.deepcopy(fleet[2])
    changed["spec"]["worker"]["replicas"] = 7
    evaluations.findings(annotated, policy)
    evaluations.findings(changed, policy)
    evaluations.findings(fleet[3], Policy(name="another"))
    assert calls == ["c-0", "c-1", "c-2", "c-3"]
    assert evaluations.evaluated == 4


def test_identical_worker_groups_are_judged_against_their_own_namespaces_cluster():
    group = example("gpu-workergroup.yaml")  # spec.cluster: cpu-only
    bare = example("cpu-cluster.yaml")  # a scheduler without a GPU
    bare["metadata"] = {"name": "cpu-only", "namespace": "team-a"}
    gpu = copy.deepcopy(bare)
    gpu["metadata"]["namespace"] = "team-b"
    gpu["spec"]["scheduler"]["spec"]["containers"][0]["resources"] = {
        "limits": {"nvidia.com/gpu": "1"}
    }
    groups = [_stamped(group, "gpu-workers", ns, n) for n, ns in enumerate(("team-a", "team-b"))]
    state = ClusterState(resources=[bare, gpu, *groups], nodes=nodes())
    codes = {
        a.namespace: {f.code for f in a.findings}
        for a in audit(state)
        if a.kind == "DaskWorkerGroup"
    }
    assert "DGP015" in codes["team-a"]
    assert "DGP015" not in codes["team-b"]


def test_the_key_leaves_out_identity_and_status_and_keeps_annotations_and_labels():
    template = example("gpu-cluster-tcp.yaml")
    one, other = _stamped(template, "a", "team-a", 1), _stamped(template, "b", "team-b", 2)
    assert spec_key(one) == spec_key(other)
    for field in ("annotations", "labels"):
        marked = copy.deepcopy(one)
        marked["metadata"][field] = {"example.com/x": "1"}
        assert spec_key(marked) != spec_key(one), field


def test_namespaces_under_equal_policies_share_one_policy_object():
    manifest = yaml.safe_load((EXAMPLES / "policy.yaml").read_text())
    namespaces = {ns: {"metadata": {"name": ns}} for ns in NAMESPACES}
    namespaces["team-b"]["metadata"]["annotations"] = {"gpuparity.dask.org/skip": "true"}
    in_force = NamespacePolicies([load(manifest)], namespaces)
    (a, a_skips), (b, b_skips), (lab, _) = (in_force.of(ns) for ns in NAMESPACES)
    assert a is b is lab
    assert (a_skips, b_skips) == (False, True)


def test_a_value_json_cannot_hold_is_never_shared():
    # PyYAML reads an unquoted 2026-01-15 as a date (YAML 1.1 timestamps); the API server never
    # sends one, but a state built from files may hold it.
    template = example("gpu-cluster-tcp.yaml")
    one, other = _stamped(template, "a", "team-a", 1), _stamped(template, "b", "team-a", 2)
    for doc in (one, other):
        doc["metadata"]["labels"] = {"since": dt.date(2026, 1, 15)}
    assert spec_key(one) != spec_key(other)
    calls = []
    evaluations = Evaluations(lambda resource, *_: calls.append(resource) or ())
    evaluations.findings(one, Policy())
    evaluations.findings(other, Policy())
    assert calls == [one, other]


def test_equal_resources_get_one_key_however_their_strings_are_shared():
    # A LIST page decoded by json shares its keys' strings among its items; a resource decoded
    # alone shares nothing: both must give the same key.
    template = _stamped(example("gpu-cluster-tcp.yaml"), "a", "team-a", 1)
    text = json.dumps(template)
    page = json.loads(f"[{text}, {text}]")
    alone = json.loads(text)
    assert spec_key(page[0]) == spec_key(page[1]) == spec_key(alone)
