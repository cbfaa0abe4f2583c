"""Placement verdicts on GPU fleets as providers build them (tests/fixtures/inventories).

Each expected verdict is written in tests/fixtures/inventories/EXPECTED.md (section 14) before
the rule that produces it; the comment above each test names the measured behaviour it replaces.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import pytest
import yaml

from dask_gpu_parity.core.cuda import CudaNeed, need
from dask_gpu_parity.core.engine import evaluate
from dask_gpu_parity.core.findings import Severity
from dask_gpu_parity.core.inventory import Inventory
from dask_gpu_parity.core.policy import ExtendedResourceToleration, PlacementSettings, Policy
from tests.unit.helpers import ROOT, cluster, example

CORPUS = ROOT / "tests" / "fixtures" / "inventories"
PLACEMENT = {"DGP013", "DGP014", "DGP020", "DGP021", "DGP022", "DGP023", "DGP026"}
# RAPIDS tags: major-only since 25.12 (rapidsai/docker README, "Note on CUDA versioning").
CUDA12 = "rapidsai/base:25.12-cuda12-py3.13"
CUDA129 = "rapidsai/base:25.10-cuda12.9-py3.12"
W128 = "nvcr.io/nvidia/cuda:12.8.1-runtime-ubuntu24.04"
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
OFF = ExtendedResourceToleration.DISABLED
NO_ERT = Policy(placement=PlacementSettings(extended_resource_toleration=OFF))
# RAPIDS' guide "GPU optimization for the Dask scheduler on Kubernetes": the scheduler prefers
# the T4 pool labelled dedicated=scheduler.
GUIDE_AFFINITY = {
    "nodeAffinity": {
        "preferredDuringSchedulingIgnoredDuringExecution": [
            {
                "weight": 100,
                "preference": {
                    "matchExpressions": [
                        {"key": "dedicated", "operator": "In", "values": ["scheduler"]}
                    ]
                },
            }
        ]
    }
}


@cache
def inventory(name: str) -> Inventory:
    return Inventory.from_nodes(yaml.safe_load((CORPUS / f"{name}.yaml").read_text())["items"])


def workload(
    image: str,
    *,
    tolerations: bool = False,
    replicas: int = 1,
    worker_extra: dict[str, Any] | None = None,
    scheduler_extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    extra = dict(worker_extra or {})
    if tolerations:
        extra["tolerations"] = [GPU_TOLERATION]
    doc = cluster(
        worker_container={"image": image},
        worker_extra=extra,
        scheduler_extra=scheduler_extra,
        scheduler_resources={"limits": {"nvidia.com/gpu": "1"}},
    )
    doc["spec"]["worker"]["replicas"] = replicas
    return doc


def codes(result: Any) -> set[str]:
    return {f.code for f in result.findings} & PLACEMENT


def probe_env(patched: dict[str, Any]) -> dict[str, str]:
    init = patched["spec"]["scheduler"]["spec"]["initContainers"]
    check = next(c for c in init if c["name"] == "gpu-parity-check")
    return {e["name"]: e["value"] for e in check.get("env", []) if "value" in e}


def required_terms(spec: dict[str, Any]) -> list[Any]:
    affinity = spec.get("affinity") or {}
    node = affinity.get("nodeAffinity") or {}
    required = node.get("requiredDuringSchedulingIgnoredDuringExecution") or {}
    return list(required.get("nodeSelectorTerms", []))


# -- 1. major-only CUDA tags ---------------------------------------------------------------------
# Measured on main: "cuda12" was read as CUDA 12.0, so 570/12.8 looked like a full fit.


@pytest.mark.parametrize("image", [CUDA12, CUDA129], ids=["cuda12", "cuda12.9"])
def test_major_only_tag_gets_the_minor_caveat_its_minor_tag_gets(image: str) -> None:
    # ERT off, no tolerations: the workers reach 570.172.08 / CUDA 12.8 only (t4-legacy-0).
    result = evaluate(workload(image), NO_ERT, inventory("gpu-operator-gfd"))
    assert "DGP021" in codes(result)


def test_major_only_tag_names_no_minor_and_says_what_it_assumed() -> None:
    result = evaluate(workload(CUDA12), NO_ERT, inventory("gpu-operator-gfd"))
    message = next(f.message for f in result.findings if f.code == "DGP021")
    assert "may be older than the image's CUDA 12 (" in message
    assert "assumed 12.9" in message
    assert "gpuparity.dask.org/cuda-version annotation" in message


def test_major_only_tag_prefers_the_class_that_runs_it_without_caveat() -> None:
    # Tolerating the taint, the workers reach 580/13.0 (8 GPUs) and 570/12.8 (17):
    # 13.0 runs any 12.x.
    result = evaluate(workload(CUDA12, tolerations=True), Policy(), inventory("gpu-operator-gfd"))
    assert codes(result) == {"DGP014"}
    assert "580.95.05" in str(required_terms(result.patched["spec"]["worker"]["spec"]))


def test_verifier_is_not_told_a_minor_the_tag_does_not_name() -> None:
    result = evaluate(workload(CUDA12, tolerations=True), Policy(), inventory("gpu-operator-gfd"))
    env = probe_env(result.patched)
    assert "GPU_PARITY_EXPECT_CUDA" not in env  # the probe reads the image's own CUDA_VERSION
    assert env["GPU_PARITY_EXPECT_DRIVER"] == "580.95.05"  # pinned: the expectation is true


@pytest.mark.parametrize(
    ("annotation", "major", "minor", "known"),
    [("12", 12, 9, False), ("13", 13, 3, False), ("12.4", 12, 4, True), ("11", 11, 0, False)],
)
def test_a_major_only_version_from_any_source_is_major_only(
    annotation: str, major: int, minor: int, known: bool
) -> None:
    doc = cluster(annotations={"gpuparity.dask.org/cuda-version": annotation})
    found = need(doc, doc["spec"]["worker"]["spec"]["containers"][0])
    assert found == CudaNeed(major, minor, found.source if found else "", minor_known=known)


# -- 2. a scheduler on a pool of its own keeps it --------------------------------------------
# Measured on main: the pool pin moved the guide's scheduler onto the workers' A100 pool, and a
# scheduler selecting dedicated=scheduler got the workers' pool selector copied (then DGP013).


def test_guide_scheduler_keeps_its_t4_pool_and_only_the_workers_are_pinned() -> None:
    doc = workload(CUDA12, scheduler_extra={"affinity": GUIDE_AFFINITY})
    result = evaluate(doc, Policy(), inventory("gke-scheduler-pool"))
    assert codes(result) == {"DGP014", "DGP023"}
    scheduler = result.patched["spec"]["scheduler"]["spec"]
    assert scheduler["affinity"] == GUIDE_AFFINITY  # untouched: no pool pin, no empty term
    assert "nodeSelector" not in scheduler
    workers = required_terms(result.patched["spec"]["worker"]["spec"])
    assert workers == [
        {
            "matchExpressions": [
                {
                    "key": "cloud.google.com/gke-nodepool",
                    "operator": "In",
                    "values": ["default-pool"],
                }
            ]
        }
    ]
    message = next(f.message for f in result.findings if f.code == "DGP014")
    assert "pinned the workers to" in message
    assert "the scheduler keeps its own pool" in message
    assert (
        evaluate(result.patched, Policy(), inventory("gke-scheduler-pool")).patched
        == result.patched
    )


def test_scheduler_selecting_its_own_pool_gets_no_worker_pool_selector() -> None:
    doc = workload(
        CUDA12,
        worker_extra={"nodeSelector": {"cloud.google.com/gke-nodepool": "default-pool"}},
        scheduler_extra={"nodeSelector": {"dedicated": "scheduler"}},
    )
    result = evaluate(doc, Policy(), inventory("gke-scheduler-pool"))
    assert codes(result) == {"DGP023"}
    assert result.patched["spec"]["scheduler"]["spec"]["nodeSelector"] == {"dedicated": "scheduler"}
    assert not {f.code for f in result.findings} & {"DGP004", "DGP013"}


def test_own_pool_with_driver_labels_pins_only_driver_and_cuda_on_the_scheduler() -> None:
    # time-sliced: A (580/13.0) has a Tesla-T4-SHARED node and A100s; B (570/12.8) a T4 only.
    doc = workload(
        W128,
        tolerations=True,
        scheduler_extra={"nodeSelector": {"nvidia.com/gpu.product": "Tesla-T4-SHARED"}},
    )
    result = evaluate(doc, Policy(), inventory("time-sliced"))
    scheduler = result.patched["spec"]["scheduler"]["spec"]
    assert scheduler["nodeSelector"] == {"nvidia.com/gpu.product": "Tesla-T4-SHARED"}
    keys = {e["key"] for t in required_terms(scheduler) for e in t["matchExpressions"]}
    assert keys <= {"nvidia.com/cuda.driver-version.full", "nvidia.com/cuda.runtime-version.full"}


# -- 3. capacity, and an expected driver only where a pin makes it true -------------------------
# Measured on main: 4 workers and the scheduler on one untainted 1-GPU node, nothing said; and
# GPU_PARITY_EXPECT_DRIVER=570.172.08 set on a scheduler that nothing kept on that driver.


def test_four_workers_and_the_scheduler_on_one_gpu_is_an_error() -> None:
    result = evaluate(
        workload(W128, replicas=4),
        NO_ERT,
        inventory("gpu-operator-gfd"),
    )
    (finding,) = [f for f in result.findings if f.code == "DGP026"]
    assert finding.severity is Severity.ERROR  # not one worker fits beside the scheduler
    assert "4 worker(s) ask for 1 each, and the scheduler 1 on the same nodes" in finding.message
    assert "room for 0" in finding.message


def test_some_workers_fit_is_a_warning() -> None:
    # Pinned to 570/12.8 (legacy keys): 17 GPUs, the scheduler takes one, 16 of 20 workers fit.
    result = evaluate(
        workload(W128, tolerations=True, replicas=20), Policy(), inventory("gpu-operator-gfd")
    )
    (finding,) = [f for f in result.findings if f.code == "DGP026"]
    assert finding.severity is Severity.WARNING
    assert "room for 16 beside the scheduler" in finding.message


def test_enough_gpus_say_nothing() -> None:
    result = evaluate(
        workload(W128, tolerations=True, replicas=16), Policy(), inventory("gpu-operator-gfd")
    )
    assert "DGP026" not in codes(result)


def test_scheduler_on_its_own_pool_takes_no_worker_gpu() -> None:
    # The guide's fleet: 6 A100s for 6 workers; the scheduler prefers its T4, but can it land on
    # an A100 node? It can (preferred only), yet it also fits the T4 node: no GPU is taken.
    doc = workload(CUDA12, replicas=6, scheduler_extra={"affinity": GUIDE_AFFINITY})
    assert "DGP026" not in codes(evaluate(doc, Policy(), inventory("gke-scheduler-pool")))
    doc = workload(CUDA12, replicas=7, scheduler_extra={"affinity": GUIDE_AFFINITY})
    assert "DGP026" in codes(evaluate(doc, Policy(), inventory("gke-scheduler-pool")))


def test_expected_driver_is_not_set_where_no_pin_makes_it_true() -> None:
    result = evaluate(workload(W128), NO_ERT, inventory("gpu-operator-gfd"))
    assert "GPU_PARITY_EXPECT_DRIVER" not in probe_env(result.patched)
    assert probe_env(result.patched)["GPU_PARITY_EXPECT_CUDA"] == "12.8"


def test_expected_driver_is_set_with_the_pin_that_makes_it_true() -> None:
    result = evaluate(workload(W128, tolerations=True), Policy(), inventory("gpu-operator-gfd"))
    assert probe_env(result.patched)["GPU_PARITY_EXPECT_DRIVER"] == "570.172.08"
    (term,) = required_terms(result.patched["spec"]["scheduler"]["spec"])
    assert {"key": "nvidia.com/cuda.driver.rev", "operator": "In", "values": ["08"]} in term[
        "matchExpressions"
    ]


# -- 4. no driver-label warning where the workers reach nothing; Karpenter before v0.32 ---------
# Measured on main: DGP023 beside DGP022; provisioner-name nodes formed no node pool.


@pytest.mark.parametrize("name", ["gke-gpu-pools", "eks-gpu-pool"])
def test_workers_reaching_no_node_get_only_the_no_node_error(name: str) -> None:
    result = evaluate(workload(CUDA12), NO_ERT, inventory(name))
    assert codes(result) == {"DGP022"}


def test_karpenter_provisioners_are_node_pools() -> None:
    result = evaluate(workload(CUDA12), Policy(), inventory("eks-karpenter-v1alpha5"))
    assert codes(result) == {"DGP014", "DGP023"}
    (term,) = required_terms(result.patched["spec"]["worker"]["spec"])
    assert term["matchExpressions"] == [
        {"key": "karpenter.sh/provisioner-name", "operator": "In", "values": ["gpu"]}
    ]
    message = next(f.message for f in result.findings if f.code == "DGP023")
    assert "Karpenter node pools gpu carry" in message


def test_provisioner_name_alone_means_extended_resource_toleration_on() -> None:
    # Derived: the same nodes with only Karpenter's own label (no karpenter.k8s.aws/* labels).
    items = yaml.safe_load((CORPUS / "eks-karpenter-v1alpha5.yaml").read_text())["items"]
    for item in items:
        labels = item["metadata"]["labels"]
        for key in [k for k in labels if k.startswith("karpenter.k8s.aws/")]:
            del labels[key]
    nodes = Inventory.from_nodes(items)
    assert nodes.provider is not None
    assert nodes.provider.extended_resource_toleration
    result = evaluate(workload(CUDA12), Policy(), nodes)
    assert "DGP022" not in codes(result)  # the untolerated taint is covered by the plugin


@pytest.mark.parametrize(("replicas", "found"), [(2, False), (8, True)])
def test_a_daskjob_counts_its_cluster_s_worker_replicas(replicas: int, found: bool) -> None:
    # The example job tolerates the GPU taint and runs CUDA 13.0: pinned to 580.95.05, 8 GPUs,
    # one of them the scheduler's.
    doc = example("gpu-daskjob.yaml")
    doc["spec"]["cluster"]["spec"]["worker"]["replicas"] = replicas
    result = evaluate(doc, Policy(), inventory("gpu-operator-gfd"))
    assert ("DGP026" in codes(result)) is found
