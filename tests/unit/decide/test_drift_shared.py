"""The drift tracker evaluates each distinct (cluster, template, policy) once, and says the same.

Expected, written before the code: clusters stamped from one template get one evaluation and
each its own report (its namespace, its name, its Deployment); a change of policy object, node
inventory or DeviceClasses evaluates again; every report equals the one a fresh tracker gives.
"""

from __future__ import annotations

import copy
from typing import Any

from dask_kubernetes.operator.controller import controller

from dask_gpu_parity.admission.decide.drift import Tracker
from dask_gpu_parity.core.deviceclasses import NVIDIA_CLASSES
from dask_gpu_parity.core.inventory import Inventory
from dask_gpu_parity.core.policy import Mode, Policy, select
from tests.unit.helpers import example, nodes


def _stamped(namespace: str, name: str, file: str = "gpu-cluster-tcp.yaml") -> dict[str, Any]:
    doc = example(file)
    doc["metadata"] = {"name": name, "namespace": namespace, "uid": f"uid-{namespace}-{name}"}
    return doc


def _deployment(doc: dict[str, Any]) -> dict[str, Any]:
    """The scheduler Deployment the dask operator builds for ``doc`` (as it was admitted)."""
    meta = doc["metadata"]
    built = controller.build_scheduler_deployment_spec(
        meta["name"], copy.deepcopy(doc["spec"]["scheduler"]["spec"]), {}, {}
    )
    built["metadata"].update(
        namespace=meta["namespace"], generation=1, uid=f"d-{meta['namespace']}-{meta['name']}"
    )
    return built


def _fields(report: Any) -> Any:
    if report is None:
        return None
    return (
        report.namespace,
        report.cluster,
        report.deployment,
        report.findings,
        report.repair_patch,
        report.new,
    )


def test_clusters_stamped_from_one_template_are_evaluated_once_and_reported_each() -> None:
    tracker = Tracker()
    policy, inventory = Policy(), Inventory.from_nodes(nodes())
    docs = [_stamped(ns, f"c-{i}") for i, ns in enumerate(("a", "b", "a", "c"))]
    reports = [tracker.check(d, _deployment(d), policy, inventory) for d in docs]
    assert tracker.evaluated == 1
    assert all(r is not None for r in reports)
    assert [(r.namespace, r.cluster, r.deployment) for r in reports if r] == [
        ("a", "c-0", "c-0-scheduler"),
        ("b", "c-1", "c-1-scheduler"),
        ("a", "c-2", "c-2-scheduler"),
        ("c", "c-3", "c-3-scheduler"),
    ]
    assert "DGP001" in {f.code for f in reports[0].findings}  # type: ignore[union-attr]
    assert tracker.counts() == {"a": 2, "b": 1, "c": 1}
    assert tracker.findings("b", "c-1") == tracker.findings("a", "c-0")


def test_what_differs_evaluates_again() -> None:
    tracker = Tracker()
    policy, inventory = Policy(), Inventory.from_nodes(nodes())
    doc = _stamped("a", "c")
    tracker.check(doc, _deployment(doc), policy, inventory)
    tracker.check(doc, _deployment(doc), policy, inventory)
    assert tracker.evaluated == 1
    tracker.check(doc, _deployment(doc), Policy(mode=Mode.WARN), inventory)  # another policy
    assert tracker.evaluated == 2
    tracker.check(doc, _deployment(doc), policy, Inventory.from_nodes(nodes()))  # new snapshot
    assert tracker.evaluated == 3
    tracker.check(doc, _deployment(doc), policy, None)  # the GPU nodes gone
    assert tracker.evaluated == 4
    tracker.check(doc, _deployment(doc), policy, None, NVIDIA_CLASSES.extend(()))  # classes
    assert tracker.evaluated == 5
    labelled = copy.deepcopy(doc)
    labelled["metadata"]["annotations"] = {"example.com/team": "x"}  # rules may read these
    tracker.check(labelled, _deployment(doc), policy, None, NVIDIA_CLASSES.extend(()))
    assert tracker.evaluated == 6


def test_the_built_in_policy_is_one_object_so_namespaces_without_a_policy_share() -> None:
    assert select([], {"team": "a"}) is select([], {})


def test_a_shared_verdict_reports_what_a_tracker_of_its_own_reports() -> None:
    inventory, policy = Inventory.from_nodes(nodes()), Policy()
    files = ("gpu-cluster-tcp.yaml", "gpu-cluster-ucx.yaml", "cpu-cluster.yaml") * 2
    shared = Tracker()
    for i, file in enumerate(files):
        doc = _stamped("team", f"c-{i}", file)
        deployment = _deployment(doc)
        if i >= len(files) // 2:  # the second round: Deployments built with the scheduler's GPU
            for container in deployment["spec"]["template"]["spec"]["containers"]:
                container["resources"] = {"limits": {"nvidia.com/gpu": "1"}}
        own = Tracker()
        expected = _fields(own.check(doc, deployment, policy, inventory))
        assert _fields(shared.check(doc, deployment, policy, inventory)) == expected, (i, file)
        assert shared.findings("team", f"c-{i}") == own.findings("team", f"c-{i}"), (i, file)
    assert shared.evaluated == len(files)  # each (content, template) distinct here
    again = _stamped("team", "c-again", files[0])
    shared.check(again, _deployment(again), policy, inventory)
    assert shared.evaluated == len(files)


def test_a_fleet_of_all_different_clusters_keeps_a_bounded_number_of_verdicts() -> None:
    tracker, policy = Tracker(), Policy()
    first = _stamped("a", "c-first")
    tracker.check(first, _deployment(first), policy, None)
    for i in range(600):
        doc = _stamped("a", f"c-{i}")
        doc["spec"]["worker"]["spec"]["containers"][0]["env"] = [{"name": "N", "value": str(i)}]
        tracker.check(doc, _deployment(doc), policy, None)
        if i % 100 == 0:  # the first cluster's template stays in use: it is kept
            tracker.check(first, _deployment(first), policy, None)
    assert len(tracker._verdicts) <= 512
    evaluated = tracker.evaluated
    tracker.check(first, _deployment(first), policy, None)
    assert tracker.evaluated == evaluated
