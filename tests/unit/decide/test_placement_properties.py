"""Placement properties over generated node inventories and GPU Dask clusters.

- a pin never selects a driver class that cannot run the image's CUDA;
- whenever no node can take the scheduler or the workers, an error finding says so;
- DGP026 says exactly when the workers' nodes cannot hold every worker beside the scheduler;
- the verifier expects a driver only where the scheduler's constraints keep it on that driver;
- ``evaluate`` stays idempotent on every inventory;
- the drift watch agrees with admission's pin: pods where the pin lets them are no mismatch, and
  its repair pins the scheduler to exactly the nodes of the class admission's pin selects.
"""

from __future__ import annotations

import copy
from dataclasses import replace
from decimal import Decimal
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from dask_gpu_parity.admission.decide.placement import PodPlace, check, repin
from dask_gpu_parity.core.engine import evaluate
from dask_gpu_parity.core.findings import Severity
from dask_gpu_parity.core.inventory import DriverClass, Inventory, node_fits, pod_gpu_demand
from dask_gpu_parity.core.patch import apply_in_place
from dask_gpu_parity.core.policy import ExtendedResourceToleration, PlacementSettings, Policy
from dask_gpu_parity.core.resources import view
from dask_gpu_parity.core.rules.pins import legacy_pin, pins_driver
from dask_gpu_parity.core.view import cluster_view
from tests.unit.helpers import cluster

# (driver, CUDA the driver supports) as GFD labels them on real nodes (nvidia.md §1.4).
CLASSES = [
    ("535.129.03", "12.2"),
    ("550.144.03", "12.4"),
    ("570.172.08", "12.8"),
    ("580.95.05", "13.0"),
    ("590.48.01", "13.1"),
]
IMAGES = [
    "rapidsai/base:25.10-cuda13.0-py3.12",
    "rapidsai/base:25.10-cuda12.9-py3.12",
    "rapidsai/base:25.10-cuda12-py3.12",
    "rapidsai/base:25.12-cuda13-py3.13",
    "nvcr.io/nvidia/cuda:12.8.1-runtime-ubuntu24.04",
    "nvcr.io/nvidia/cuda:13.1.0-base-ubuntu24.04",
    "example.com/dask:latest",
]
RESOURCES = ["nvidia.com/gpu", "nvidia.com/gpu.shared", "nvidia.com/mig-1g.10gb"]
GPU_TAINT = {"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}
ERROR_CODES = {"DGP013", "DGP020", "DGP022"}


@st.composite
def node(draw: st.DrawFn, index: int) -> dict[str, Any]:
    labels: dict[str, str] = {"kubernetes.io/hostname": f"n{index}"}
    labelling = draw(st.sampled_from(["new", "legacy", "none"]))
    driver, cuda = draw(st.sampled_from(CLASSES))
    if labelling == "new":
        labels["nvidia.com/cuda.driver-version.full"] = driver
        labels["nvidia.com/cuda.runtime-version.full"] = cuda
    if labelling in ("new", "legacy"):
        major, minor, rev = driver.split(".")
        labels |= {
            "nvidia.com/cuda.driver.major": major,
            "nvidia.com/cuda.driver.minor": minor,
            "nvidia.com/cuda.driver.rev": rev,
            "nvidia.com/cuda.runtime.major": cuda.split(".")[0],
            "nvidia.com/cuda.runtime.minor": cuda.split(".")[1],
        }
    if draw(st.booleans()):
        labels["cloud.google.com/gke-nodepool"] = draw(st.sampled_from(["a", "b"]))
    resource = draw(st.sampled_from(RESOURCES))
    count = str(draw(st.integers(min_value=0, max_value=8)))
    spec: dict[str, Any] = {}
    if draw(st.booleans()):
        spec["taints"] = [GPU_TAINT]
    if draw(st.integers(min_value=0, max_value=5)) == 0:
        spec["unschedulable"] = True
    ready = draw(st.sampled_from(["True", "True", "True", "False", "Unknown"]))
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": f"n{index}", "labels": labels},
        "spec": spec,
        "status": {
            "allocatable": {resource: count, "cpu": "8"},
            "conditions": [{"type": "Ready", "status": ready}],
        },
    }


@st.composite
def inventories(draw: st.DrawFn) -> Inventory:
    size = draw(st.integers(min_value=1, max_value=6))
    return Inventory.from_nodes([draw(node(i)) for i in range(size)])


@st.composite
def clusters(draw: st.DrawFn) -> dict[str, Any]:
    worker: dict[str, Any] = {}
    if draw(st.booleans()):
        worker["tolerations"] = [{"key": "nvidia.com/gpu", "operator": "Exists"}]
    if draw(st.integers(min_value=0, max_value=3)) == 0:
        worker["nodeSelector"] = {"cloud.google.com/gke-nodepool": draw(st.sampled_from("ab"))}
    scheduler: dict[str, Any] = {}
    if draw(st.integers(min_value=0, max_value=3)) == 0:  # a pool of its own
        scheduler["nodeSelector"] = {"cloud.google.com/gke-nodepool": draw(st.sampled_from("ab"))}
    doc = cluster(
        worker_resources={"limits": {draw(st.sampled_from(RESOURCES)): "1"}},
        worker_container={"image": draw(st.sampled_from(IMAGES))},
        worker_extra=worker,
        scheduler_extra=scheduler,
    )
    doc["spec"]["worker"]["replicas"] = draw(st.integers(min_value=0, max_value=10))
    return doc


policies = st.builds(
    Policy,
    placement=st.builds(
        PlacementSettings,
        extended_resource_toleration=st.sampled_from(
            [ExtendedResourceToleration.ENABLED, ExtendedResourceToleration.DISABLED]
        ),
    ),
)


def _runs(dc: DriverClass, cuda_major: int) -> bool:
    """The documented rule, written out independently of core/cuda.py: RAPIDS' driver floor for
    the CUDA major (12: 535, 13: 580) and a driver CUDA of that major or newer."""
    floor = {12: 535, 13: 580}[cuda_major]
    return int(dc.driver.split(".")[0]) >= floor and int(dc.cuda.split(".")[0]) >= cuda_major


def _pinned_class(patched: dict[str, Any], inventory: Inventory) -> set[DriverClass]:
    """The driver classes of the nodes the pinned workers can still land on."""
    spec = patched["spec"]["worker"]["spec"]
    return {n.driver_class for n in inventory.nodes if n.driver_class and node_fits(n, spec, True)}


@given(clusters(), inventories(), policies)
def test_placement_is_never_wrong_and_never_silent(
    doc: dict[str, Any], inventory: Inventory, policy: Policy
) -> None:
    result = evaluate(doc, policy, inventory)
    codes = {f.code for f in result.findings}
    ert = policy.placement.extended_resource_toleration is ExtendedResourceToleration.ENABLED
    dask = view(result.patched)
    assert dask is not None
    resolved = cluster_view(result.patched, dask)
    assert resolved is not None

    if "DGP014" in codes and resolved.cuda is not None:
        for dc in _pinned_class(result.patched, inventory):
            assert _runs(dc, resolved.cuda.major), f"pinned to {dc} for {resolved.cuda}"

    for side in (resolved.scheduler, resolved.worker):
        if not any(node_fits(n, side.spec, ert) for n in inventory.nodes):
            assert codes & ERROR_CODES, f"no node takes {side.ptr}, and nothing said so"

    again = evaluate(result.patched, policy, inventory)
    assert again.patched == result.patched, "not idempotent"


_DRIVER_LABELS = (
    "nvidia.com/cuda.driver-version.full",
    "nvidia.com/cuda.driver.major",
    "nvidia.com/cuda.driver.minor",
    "nvidia.com/cuda.driver.rev",
)


def _expected_driver(patched: dict[str, Any]) -> str | None:
    for container in patched["spec"]["scheduler"]["spec"].get("initContainers", []):
        for env in container.get("env", []):
            if env.get("name") == "GPU_PARITY_EXPECT_DRIVER":
                return str(env["value"])
    return None


def _most_workers(
    spec: dict[str, Any], scheduler: dict[str, Any], inventory: Inventory, ert: bool
) -> int:
    """The most workers kube-scheduler could place once the scheduler holds its GPU.

    Written out independently of core/rules/capacity.py: every node the scheduler could take
    is tried, and the best one kept.
    """
    demand = pod_gpu_demand(spec)
    ((resource, each),) = demand.items()
    own = pod_gpu_demand(scheduler).get(resource, Decimal(0))
    workers = [n for n in inventory.nodes if node_fits(n, spec, ert)]
    homes = [n.name for n in inventory.nodes if node_fits(n, scheduler, ert)] or [None]

    def room(home: str | None) -> int:
        return sum(
            int((n.allocatable.get(resource, Decimal(0)) - (own if n.name == home else 0)) // each)
            for n in workers
        )

    return max(room(home) for home in homes)


@given(clusters(), inventories(), policies)
def test_capacity_is_reported_exactly_when_workers_do_not_fit(
    doc: dict[str, Any], inventory: Inventory, policy: Policy
) -> None:
    result = evaluate(doc, policy, inventory)
    codes = {f.code for f in result.findings}
    if codes & ERROR_CODES:
        return  # one error explains a placement failure; capacity is not judged then
    ert = policy.placement.extended_resource_toleration is ExtendedResourceToleration.ENABLED
    spec = result.patched["spec"]["worker"]["spec"]
    replicas = result.patched["spec"]["worker"]["replicas"]
    fit = _most_workers(spec, result.patched["spec"]["scheduler"]["spec"], inventory, ert)
    capacity = [f for f in result.findings if f.code == "DGP026"]
    assert bool(capacity) == (fit < replicas), f"{fit} of {replicas} fit: {capacity}"
    for finding in capacity:
        assert (finding.severity is Severity.ERROR) == (fit <= 0)


@given(clusters(), inventories(), policies)
def test_expected_driver_is_never_set_without_a_pin_that_makes_it_true(
    doc: dict[str, Any], inventory: Inventory, policy: Policy
) -> None:
    result = evaluate(doc, policy, inventory)
    expected = _expected_driver(result.patched)
    if expected is None:
        return
    ert = policy.placement.extended_resource_toleration is ExtendedResourceToleration.ENABLED
    scheduler = result.patched["spec"]["scheduler"]["spec"]
    for node in inventory.nodes:
        if not node_fits(node, scheduler, ert):
            continue
        assert node.driver_class is not None
        assert node.driver_class.driver == expected
        # The pin, not today's nodes, makes it true: the same node on another driver is refused.
        other = {k: v for k, v in node.labels.items() if k not in _DRIVER_LABELS}
        other |= {_DRIVER_LABELS[0]: "999.1.1", _DRIVER_LABELS[1]: "999", _DRIVER_LABELS[2]: "1"}
        assert not node_fits(replace(node, labels=other), scheduler, ert)


def _without_driver_pins(spec: dict[str, Any]) -> dict[str, Any]:
    """The spec with every GFD driver or CUDA expression taken out of its required terms.

    A term left empty matches every node (an expression every generated node meets stands in:
    an empty term would match none).
    """
    out = copy.deepcopy(spec)
    for term in (
        out.get("affinity", {})
        .get("nodeAffinity", {})
        .get("requiredDuringSchedulingIgnoredDuringExecution", {})
        .get("nodeSelectorTerms", [])
    ):
        kept = [
            e
            for e in term.get("matchExpressions", [])
            if not e["key"].startswith("nvidia.com/cuda.")
        ]
        term["matchExpressions"] = kept or [{"key": "kubernetes.io/hostname", "operator": "Exists"}]
    return out


@given(clusters(), inventories(), policies)
def test_the_drift_watch_judges_and_repins_as_admission_pins(
    doc: dict[str, Any], inventory: Inventory, policy: Policy
) -> None:
    result = evaluate(doc, policy, inventory)
    ert = policy.placement.extended_resource_toleration is ExtendedResourceToleration.ENABLED
    scheduler = result.patched["spec"]["scheduler"]["spec"]
    worker = result.patched["spec"]["worker"]["spec"]

    # Pods wherever admission's pin lets them: the drift watch sees scheduler and workers agree.
    if _expected_driver(result.patched) is not None:
        crew = [
            PodPlace(f"w-{n.name}", n.name, n.driver_class)
            for n in inventory.nodes
            if node_fits(n, worker, ert)
        ]
        for home in inventory.nodes:
            if node_fits(home, scheduler, ert):
                place = PodPlace("s", home.name, home.driver_class)
                assert check("ns", "c", [place], crew) is None, f"scheduler on {home.name}"

    # The drift watch's repair to any class: admission's pin, on exactly that class's nodes.
    free = _without_driver_pins(scheduler)
    for target in {n.driver_class for n in inventory.nodes if n.driver_class}:
        deployment = {"spec": {"template": {"spec": copy.deepcopy(scheduler)}}}
        apply_in_place(deployment, repin(scheduler, target, legacy_pin(inventory, target)))
        repinned = deployment["spec"]["template"]["spec"]
        assert pins_driver(repinned, target)
        for n in inventory.nodes:
            expected = n.driver_class == target and node_fits(n, free, ert)
            assert node_fits(n, repinned, ert) == expected, f"{n.name} repinned to {target}"
