"""Placement on node inventories shaped like real clusters (tests/fixtures/inventories).

Each row is a verdict from tests/fixtures/inventories/EXPECTED.md, written before the rules that
now produce it: the placement findings the workload gets and the driver (or node pool) that
scheduler and workers are pinned to.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import pytest
import yaml

from dask_gpu_parity.core.engine import evaluate
from dask_gpu_parity.core.inventory import Inventory
from dask_gpu_parity.core.policy import (
    ExtendedResourceToleration,
    PlacementSettings,
    Policy,
    SchedulerSettings,
)
from dask_gpu_parity.core.providers import PROVIDERS
from tests.unit.helpers import ROOT, cluster

CORPUS = ROOT / "tests" / "fixtures" / "inventories"
PLACEMENT = {"DGP013", "DGP014", "DGP020", "DGP021", "DGP022", "DGP023", "DGP026"}
W13 = "rapidsai/base:25.10-cuda13.0-py3.12"
W128 = "nvcr.io/nvidia/cuda:12.8.1-runtime-ubuntu24.04"
W129 = "rapidsai/base:25.10-cuda12.9-py3.12"
W120 = "rapidsai/base:25.10-cuda12.0-py3.12"
POOLS = [p.pool_label for p in PROVIDERS]
GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
SKU_TOLERATION = {"key": "sku", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}


@cache
def inventory(name: str) -> Inventory:
    items = yaml.safe_load((CORPUS / f"{name}.yaml").read_text())["items"]
    return Inventory.from_nodes(items)


def workload(
    image: str,
    *,
    tolerations: list[dict[str, Any]] | None = None,
    resource: str = "nvidia.com/gpu",
    selector: dict[str, str] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if tolerations:
        spec["tolerations"] = tolerations
    if selector:
        spec["nodeSelector"] = selector
    return cluster(
        worker_resources={"limits": {resource: "1"}},
        worker_container={"image": image},
        worker_extra=spec,
    )


def pinned(patched: dict[str, Any]) -> str | None:
    """The driver version (or node pool) the workers were pinned to, if any."""
    terms = (
        patched["spec"]["worker"]["spec"]
        .get("affinity", {})
        .get("nodeAffinity", {})
        .get("requiredDuringSchedulingIgnoredDuringExecution", {})
        .get("nodeSelectorTerms", [])
    )
    for term in terms:
        for expr in term.get("matchExpressions", []):
            if expr["key"] in ("nvidia.com/cuda.driver-version.full", *POOLS):
                return str(expr["values"][0])
            if expr["key"] == "nvidia.com/cuda.driver.major":
                return f"{expr['values'][0]} (legacy keys)"
    return None


T = [GPU_TOLERATION]
ON, OFF = ExtendedResourceToleration.ENABLED, ExtendedResourceToleration.DISABLED
AUTO = ExtendedResourceToleration.AUTO

# (inventory, workload, ERT, policy scheduler pool) -> (placement findings, pinned driver)
ROWS = [
    # 2. gpu-operator-gfd: A = 580.95.05/13.0 (8, tainted); B = 570.172.08/12.8 (17)
    ("gpu-operator-gfd", workload(W13, tolerations=T), AUTO, None, {"DGP014"}, "580.95.05"),
    ("gpu-operator-gfd", workload(W13), OFF, None, {"DGP020"}, None),
    ("gpu-operator-gfd", workload(W13), ON, None, {"DGP014"}, "580.95.05"),
    (
        "gpu-operator-gfd",
        workload(W128, tolerations=T),
        AUTO,
        None,
        {"DGP014"},
        "570 (legacy keys)",
    ),
    # One class, but one untainted 1-GPU node: the scheduler takes its GPU, the worker waits.
    ("gpu-operator-gfd", workload(W128), OFF, None, {"DGP026"}, None),
    # W129: both classes run CUDA 12.9, A without caveat: the full fit wins over capacity.
    ("gpu-operator-gfd", workload(W129, tolerations=T), AUTO, None, {"DGP014"}, "580.95.05"),
    # 3. gke-gpu-pools: no driver labels, GKE taint, ERT on by auto
    ("gke-gpu-pools", workload(W13), AUTO, None, {"DGP023", "DGP014"}, "h100-pool"),
    # The workers reach no node: DGP022 alone speaks (no word on nodes they cannot use).
    ("gke-gpu-pools", workload(W13), OFF, None, {"DGP022"}, None),
    (
        "gke-gpu-pools",
        workload(W13, selector={"cloud.google.com/gke-nodepool": "l4-pool"}),
        AUTO,
        None,
        {"DGP023"},
        None,
    ),
    # 4. gke-gpu-pools-gfd: a GPU Operator pool (580/13.0) beside a GKE-managed one
    # Pinned to the proven class: the pin's message names the unlabelled nodes left out.
    ("gke-gpu-pools-gfd", workload(W13), AUTO, None, {"DGP014"}, "580.95.05"),
    ("gke-gpu-pools-gfd", workload(W128, tolerations=T), AUTO, None, {"DGP014"}, "580.95.05"),
    (
        "gke-gpu-pools-gfd",
        workload(W13, selector={"cloud.google.com/gke-nodepool": "l4-managed"}),
        AUTO,
        None,
        {"DGP023"},
        None,
    ),
    # 5. aks: taint sku=gpu, which ExtendedResourceToleration never covers
    ("aks-gpu-pool", workload(W13, tolerations=T), AUTO, None, {"DGP022"}, None),
    # 6. eks: managed node group + Karpenter, no driver labels
    # Two pools (a managed node group and a Karpenter NodePool, 8 GPUs each): one is chosen.
    ("eks-gpu-pool", workload(W13, tolerations=T), AUTO, None, {"DGP014", "DGP023"}, "gpu"),
    ("eks-gpu-pool", workload(W13), OFF, None, {"DGP022"}, None),
    # 7. mig-single
    ("mig-single", workload(W13, tolerations=T), AUTO, None, {"DGP014"}, "580.95.05"),
    (
        "mig-single",
        workload(
            W13,
            tolerations=T,
            selector={"nvidia.com/gpu.product": "NVIDIA-A100-80GB-PCIe-MIG-1g.10gb"},
        ),
        AUTO,
        None,
        {"DGP020"},
        None,
    ),
    ("mig-single", workload(W128, tolerations=T), AUTO, None, {"DGP014"}, "580.95.05"),
    (
        "mig-single",
        workload(W13, tolerations=T),
        AUTO,
        {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-40GB"},
        {"DGP014"},
        "580.95.05",
    ),
    # 8. mig-mixed
    (
        "mig-mixed",
        workload(W13, tolerations=T, resource="nvidia.com/mig-1g.10gb"),
        AUTO,
        None,
        {"DGP014"},
        "580.95.05",
    ),
    (
        "mig-mixed",
        workload(W128, tolerations=T, resource="nvidia.com/mig-1g.10gb"),
        AUTO,
        None,
        {"DGP014"},
        "570.172.08",
    ),
    ("mig-mixed", workload(W13, resource="nvidia.com/mig-1g.10gb"), ON, None, {"DGP022"}, None),
    (
        "mig-mixed",
        workload(W13, tolerations=T, resource="nvidia.com/mig-3g.40gb"),
        AUTO,
        None,
        set(),
        None,
    ),
    # 9. time-sliced
    ("time-sliced", workload(W13, tolerations=T), AUTO, None, {"DGP014"}, "580.95.05"),
    (
        "time-sliced",
        workload(W13, tolerations=T, resource="nvidia.com/gpu.shared"),
        AUTO,
        None,
        set(),
        None,
    ),
    ("time-sliced", workload(W13, resource="nvidia.com/gpu.shared"), ON, None, {"DGP022"}, None),
    (
        "time-sliced",
        workload(W13, tolerations=T, selector={"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}),
        AUTO,
        {"nvidia.com/gpu.product": "Tesla-T4-SHARED"},
        set(),
        None,
    ),
    (
        "time-sliced",
        workload(W128, tolerations=T, selector={"nvidia.com/gpu.product": "Tesla-T4-SHARED"}),
        AUTO,
        None,
        {"DGP014"},
        "580.95.05",
    ),
    # 10. driver upgrade in flight: B's usable nodes are upgrade-required; h100-2 is cordoned
    ("driver-upgrade-in-flight", workload(W13, tolerations=T), AUTO, None, {"DGP014"}, "580.95.05"),
    (
        "driver-upgrade-in-flight",
        workload(W120, tolerations=T),
        AUTO,
        None,
        {"DGP014"},
        "580.95.05",
    ),
    # 11. cordoned and NotReady nodes hold all of 580's capacity
    ("cordoned-notready", workload(W13, tolerations=T), AUTO, None, {"DGP020"}, None),
    ("cordoned-notready", workload(W128, tolerations=T), AUTO, None, set(), None),
]


@pytest.mark.parametrize("row", ROWS, ids=[f"{r[0]}-{i}" for i, r in enumerate(ROWS)])
def test_verdict_on_real_cluster_shapes(row: tuple[Any, ...]) -> None:
    name, resource, ert, pool, codes, pin = row
    policy = Policy(
        scheduler=SchedulerSettings(node_selector=tuple(sorted((pool or {}).items()))),
        placement=PlacementSettings(extended_resource_toleration=ert),
    )
    result = evaluate(resource, policy, inventory(name))
    found = {f.code for f in result.findings} & PLACEMENT
    assert found == codes, [f.message for f in result.findings if f.code in PLACEMENT]
    assert pinned(result.patched) == pin
    errors = {"DGP013", "DGP020", "DGP022"} & found
    assert len(errors) <= 1, "one error explains a placement failure"
    again = evaluate(result.patched, policy, inventory(name))
    assert again.patched == result.patched


def test_no_pin_selects_a_class_that_cannot_run_the_image() -> None:
    for name in ("gpu-operator-gfd", "mig-single", "mig-mixed", "time-sliced", "cordoned-notready"):
        result = evaluate(workload(W13, tolerations=T), Policy(), inventory(name))
        assert pinned(result.patched) in (None, "580.95.05"), name
