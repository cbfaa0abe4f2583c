"""Verdicts on DRA clusters (tests/fixtures/dra/EXPECTED.md §2 and §4), written before the code."""

from __future__ import annotations

from typing import Any

import pytest

from dask_gpu_parity.core.claims import claimed_gpus
from dask_gpu_parity.core.deviceclasses import NVIDIA_CLASSES, DeviceClasses
from dask_gpu_parity.core.engine import evaluate
from dask_gpu_parity.core.findings import Finding
from dask_gpu_parity.core.inventory import Inventory
from dask_gpu_parity.core.policy import Policy
from tests.unit.core.dra import IMPLICIT, W13, W128, catalogue, items, workload
from tests.unit.helpers import cluster

PLACEMENT = {"DGP013", "DGP014", "DGP020", "DGP021", "DGP022", "DGP023", "DGP026", "DGP028"}
PINNED = IMPLICIT + "gpu-580-95-5.nvidia.com"


def placement(fleet: str, doc: dict[str, Any], extra: str | None = None) -> list[Finding]:
    classes = catalogue(extra) if extra else None
    result = evaluate(doc, Policy(), Inventory.from_objects(items(fleet), classes))
    return [f for f in result.findings if f.code in PLACEMENT]


def pinned_driver(doc: dict[str, Any]) -> str | None:
    result = evaluate(doc, Policy(), Inventory.from_objects(items("mixed.yaml")))
    worker = result.patched["spec"]["worker"]["spec"]
    terms = worker["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    for expr in terms["nodeSelectorTerms"][0]["matchExpressions"]:
        if expr["key"] == "nvidia.com/cuda.driver-version.full":
            return str(expr["values"][0])
    return None


# --- detection (§2) -------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name", ["daskcluster-shape-a.yaml", "daskcluster-shape-b.yaml"], ids=["shape-a", "shape-b"]
)
def test_a_dra_gpu_cluster_gets_its_scheduler_the_workers_gpu_resource(name: str) -> None:
    [doc] = items(name)
    resource = next(iter(doc["spec"]["worker"]["spec"]["containers"][0]["resources"]["limits"]))
    result = evaluate(doc)
    [dgp001] = [f for f in result.findings if f.code == "DGP001"]
    assert dgp001.fixable
    scheduler = result.patched["spec"]["scheduler"]["spec"]["containers"][0]
    assert scheduler["resources"] == {"limits": {resource: "1"}}


@pytest.mark.parametrize(
    ("resource", "classes", "gpu"),
    [
        (IMPLICIT + "mig.nvidia.com", NVIDIA_CLASSES, True),
        (IMPLICIT + "vfio.gpu.nvidia.com", NVIDIA_CLASSES, False),
        ("nvidia.com/mig-1g.12gb", NVIDIA_CLASSES, True),
        (PINNED, catalogue("deviceclass-pinned-580.yaml"), True),
        ("example.com/fpga", NVIDIA_CLASSES, False),
    ],
    ids=["mig-class", "vfio-class", "mig-plugin-name", "given-class", "other"],
)
def test_workers_asking_a_gpu_class_make_a_gpu_cluster(
    resource: str, classes: DeviceClasses, gpu: bool
) -> None:
    doc = cluster(worker_resources={"limits": {resource: "1"}})
    result = evaluate(doc, device_classes=classes)
    assert result.changed is gpu
    assert ("DGP001" in {f.code for f in result.findings}) is gpu


def test_the_inventorys_device_classes_decide_detection_when_none_are_given() -> None:
    doc = cluster(worker_resources={"limits": {PINNED: "1"}})
    inventory = Inventory.from_objects(
        items("pure-dra.yaml") + items("deviceclass-pinned-580.yaml")
    )
    assert "DGP001" in {f.code for f in evaluate(doc, Policy(), inventory).findings}


def test_an_unknown_device_class_is_said_not_guessed() -> None:
    doc = cluster(worker_resources={"limits": {PINNED: "1"}})
    result = evaluate(doc)
    assert not result.changed
    [unknown] = result.findings  # no DGP025: the worker may well have a GPU
    assert unknown.code == "DGP027"
    assert (
        unknown.path
        == f"/spec/worker/spec/containers/0/resources/limits/{PINNED.replace('/', '~1')}"
    )
    assert "gpu-580-95-5.nvidia.com" in unknown.message
    assert "--device-classes" in unknown.message


# --- placement (§4) -------------------------------------------------------------------------


def test_pure_dra_cannot_be_pinned_by_labels_and_says_which_device_class_to_create() -> None:
    doc = workload(W13)
    result = evaluate(doc, Policy(), Inventory.from_objects(items("pure-dra.yaml")))
    [dgp014] = [f for f in result.findings if f.code in PLACEMENT]
    assert dgp014.code == "DGP014"
    assert not dgp014.fixable
    assert "driver 580.95.5 / CUDA 13.0 is on DRA nodes" in dgp014.message
    assert "create the DeviceClass gpu-580-95-5.nvidia.com" in dgp014.message
    assert f"request {PINNED} instead of nvidia.com/gpu" in dgp014.message
    assert "compareTo(semver('580.95.5')) == 0" in dgp014.message
    assert "affinity" not in result.patched["spec"]["worker"]["spec"]  # nothing pinned


def test_pure_dra_moves_scheduler_and_workers_onto_an_existing_per_driver_class() -> None:
    doc = workload(W13)
    for pod in ("scheduler", "worker"):
        doc["spec"][pod]["spec"]["containers"][0]["resources"]["requests"] = {"nvidia.com/gpu": "1"}
    inventory = Inventory.from_objects(
        items("pure-dra.yaml") + items("deviceclass-pinned-580.yaml")
    )
    result = evaluate(doc, Policy(), inventory)
    [dgp014] = [f for f in result.findings if f.code in PLACEMENT]
    assert dgp014.fixable
    assert f"pinned scheduler and workers to it by asking for {PINNED}" in dgp014.message
    for pod in ("scheduler", "worker"):
        resources = result.patched["spec"][pod]["spec"]["containers"][0]["resources"]
        assert resources == {"limits": {PINNED: "1"}, "requests": {PINNED: "1"}}
    again = evaluate(result.patched, Policy(), inventory)
    assert again.patched == result.patched
    assert not [f for f in again.findings if f.code in PLACEMENT]


def test_a_scheduler_on_its_own_gpu_resource_keeps_it_when_the_workers_move() -> None:
    doc = workload(W13)
    doc["spec"]["scheduler"]["spec"]["containers"][0]["resources"] = {
        "limits": {IMPLICIT + "mig.nvidia.com": "1"}
    }
    inventory = Inventory.from_objects(
        items("pure-dra.yaml") + items("deviceclass-pinned-580.yaml")
    )
    result = evaluate(doc, Policy(), inventory)
    [dgp014] = [f for f in result.findings if f.code == "DGP014"]
    assert "pinned the workers to it" in dgp014.message
    assert f"the scheduler keeps its own {IMPLICIT}mig.nvidia.com" in dgp014.message
    scheduler = result.patched["spec"]["scheduler"]["spec"]["containers"][0]
    assert scheduler["resources"] == {"limits": {IMPLICIT + "mig.nvidia.com": "1"}}


def test_pure_dra_picks_the_class_with_more_gpus_when_both_run_the_image() -> None:
    [dgp014] = placement("pure-dra.yaml", workload(W128))
    assert "driver 570.172.8 / CUDA 12.8 is on DRA nodes" in dgp014.message
    assert "gpu-570-172-8.nvidia.com" in dgp014.message


@pytest.mark.parametrize(
    ("resource", "extra"),
    [(PINNED, "deviceclass-pinned-580.yaml"), (IMPLICIT + "mig.nvidia.com", None)],
    ids=["per-driver-class", "mig-class"],
)
def test_workers_on_one_class_of_dra_devices_need_no_pin(resource: str, extra: str | None) -> None:
    assert placement("pure-dra.yaml", workload(W13, resource), extra) == []


def test_capacity_on_dra_nodes_is_counted_from_their_slices() -> None:
    found = placement("pure-dra.yaml", workload(W13, replicas=13))
    assert [f.code for f in found] == ["DGP014", "DGP026"]
    # 4 + 8 GPUs from the slices, one of them the scheduler's
    assert "the 2 usable GPU node(s) they can reach have room for 11" in found[1].message


@pytest.mark.parametrize("image", [W13, W128])
def test_a_mixed_fleet_pins_by_gfd_labels_and_says_which_dra_nodes_are_left_out(image: str) -> None:
    [dgp014] = placement("mixed.yaml", workload(image))
    assert dgp014.fixable
    assert "1 DRA node(s) of that class carry no GPU Feature Discovery labels" in dgp014.message
    assert pinned_driver(workload(image)) == "580.95.05"  # GFD's spelling, which labels match


def test_a_node_whose_labels_and_devices_disagree_is_reported_and_not_counted_on() -> None:
    found = placement("migrating.yaml", workload(W13))
    assert [f.code for f in found] == ["DGP028", "DGP014"]
    assert "a100-migrating-1 (labels: driver 570.172.08 / CUDA 12.8, devices: driver 580.95.5" in (
        found[0].message
    )
    assert "without driver labels" in found[1].message


# --- Pods with claims (§2) ------------------------------------------------------------------


def pods() -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in items("pod-claims.yaml") if o["kind"] == "Pod"}


TEMPLATES = [o for o in items("pod-claims.yaml") if o["kind"] == "ResourceClaimTemplate"]


@pytest.mark.parametrize("pod", ["pod1", "pod-first-available"])
def test_a_pod_claiming_a_gpu_class_claims_a_gpu(pod: str) -> None:
    found = claimed_gpus(pods()[pod], NVIDIA_CLASSES, TEMPLATES)
    assert [(g.container, g.claim) for g in found.gpus] == [(0, "gpu")]
    assert found.unresolved == ()


def test_a_claim_that_cannot_be_resolved_is_said_never_read_as_no_gpu() -> None:
    found = claimed_gpus(pods()["pod-unresolved"], NVIDIA_CLASSES, TEMPLATES)
    assert found.gpus == ()
    assert found.unresolved == ("Pod claim 'gpu': ResourceClaim shared-gpu-claim was not given",)


def test_a_claim_template_not_given_is_unresolved() -> None:
    found = claimed_gpus(pods()["pod1"], NVIDIA_CLASSES)
    assert found.gpus == ()
    assert found.unresolved == ("Pod claim 'gpu': ResourceClaimTemplate single-gpu was not given",)


FLEETS = ["pure-dra.yaml", "mixed.yaml", "migrating.yaml"]
RESOURCES = ["nvidia.com/gpu", IMPLICIT + "gpu.nvidia.com", IMPLICIT + "mig.nvidia.com", PINNED]


@pytest.mark.parametrize("fleet", FLEETS)
@pytest.mark.parametrize("resource", RESOURCES)
@pytest.mark.parametrize("image", [W13, W128])
@pytest.mark.parametrize("given", [False, True], ids=["catalogue", "pinned-class-given"])
def test_evaluate_on_dra_fleets_is_idempotent(
    fleet: str, resource: str, image: str, given: bool
) -> None:
    extra = items("deviceclass-pinned-580.yaml") if given else []
    inventory = Inventory.from_objects(items(fleet) + extra)
    doc = cluster(worker_resources={"limits": {resource: "1"}}, worker_container={"image": image})
    once = evaluate(doc, Policy(), inventory)
    twice = evaluate(once.patched, Policy(), inventory)
    assert twice.patched == once.patched
    assert not [f for f in twice.findings if f.fixable]


def test_a_product_the_two_sources_name_differently_is_reported_but_placement_keeps_it() -> None:
    objects = items("migrating.yaml")
    objects[0]["metadata"]["labels"]["nvidia.com/gpu.product"] = "NVIDIA-H100-80GB-HBM3"
    inventory = Inventory.from_objects(objects)
    found = [f for f in evaluate(workload(W13), Policy(), inventory).findings if f.code == "DGP028"]
    assert [f.message.split("; where")[0] for f in found] == [
        "2 GPU node(s) the workers can reach are described differently by GPU Feature "
        "Discovery's labels and the DRA driver's devices (a100-migrating-0 (product: labels "
        "NVIDIA-H100-80GB-HBM3, devices NVIDIA A100-SXM4-80GB); a100-migrating-1 (labels: "
        "driver 570.172.08 / CUDA 12.8, devices: driver 580.95.5 / CUDA 13.0))"
    ]


def test_the_cuda_floor_reads_the_drivers_the_devices_report() -> None:
    h100_only = [o for o in items("pure-dra.yaml") if "a100" not in o["metadata"]["name"]]
    h100_only = [o for o in h100_only if "gh200" not in o["metadata"]["name"]]
    result = evaluate(workload(W13), Policy(), Inventory.from_objects(h100_only))
    [dgp020] = [f for f in result.findings if f.code in PLACEMENT]
    assert dgp020.code == "DGP020"
    assert "the workers can reach driver 570.172.8 / CUDA 12.8 (dra-h100-0)" in dgp020.message


def test_an_older_cuda_minor_on_dra_devices_is_the_minor_version_caveat() -> None:
    doc = workload("rapidsai/base:26.08-cuda13-py3.13", IMPLICIT + "mig.nvidia.com")
    found = placement("pure-dra.yaml", doc)
    assert [f.code for f in found] == ["DGP021"]
    assert "driver 580.95.5 / CUDA 13.0" in found[0].message
