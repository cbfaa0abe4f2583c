"""Admission on DRA fleets: verdicts with the watched DeviceClasses and slice-fed inventory.

Fleets and DaskClusters from ``tests/fixtures/dra/`` (sources: its SOURCES.md); verdicts from its
EXPECTED.md §2 and §4, here reached through the operator's watch (:class:`DraNodes`) and the
webhook's answer (``decisions.mutate``), not the offline inventory.
"""

from __future__ import annotations

from typing import Any

import pytest

from dask_gpu_parity.admission.decide import decisions
from dask_gpu_parity.admission.decide.dranodes import DraNodes
from dask_gpu_parity.admission.decide.nodeindex import NodeIndex
from dask_gpu_parity.core.policy import Policy, PolicyError
from dask_gpu_parity.core.policy_manifest import load
from tests.unit.core.dra import IMPLICIT, items

PINNED = IMPLICIT + "gpu-580-95-5.nvidia.com"


def _watched(*files: str) -> DraNodes:
    dra = DraNodes(NodeIndex())
    for name in files:
        for obj in items(name):
            key = obj["metadata"]["name"]
            if obj["kind"] == "Node":
                dra.node_upserted(obj, key)
            elif obj["kind"] == "ResourceSlice":
                dra.slice_upserted(obj, key)
            elif obj["kind"] == "DeviceClass":
                dra.class_upserted(obj, key)
    dra.release()
    return dra


def _mutate(doc: dict[str, Any], dra: DraNodes, policy: Policy | None = None) -> Any:
    return decisions.mutate(
        doc, policy or Policy(), dra.index.snapshot(), classes=dra.index.classes
    )


def _limits(doc: dict[str, Any], role: str) -> dict[str, str]:
    return dict(doc["spec"][role]["spec"]["containers"][0]["resources"]["limits"])


def _policy(gpu_resource: str) -> Policy:
    return load(
        {
            "apiVersion": "gpuparity.dask.org/v1alpha1",
            "kind": "DaskGPUPolicy",
            "metadata": {"name": "dra"},
            "spec": {"scheduler": {"gpuResource": gpu_resource}},
        }
    )


@pytest.mark.parametrize("shape", ["daskcluster-shape-a.yaml", "daskcluster-shape-b.yaml"])
def test_admission_moves_scheduler_and_workers_onto_the_watched_per_driver_class(
    shape: str,
) -> None:
    [doc] = items(shape)
    decision = _mutate(doc, _watched("pure-dra.yaml", "deviceclass-pinned-580.yaml"))
    assert decision.patched is not None
    assert _limits(decision.patched, "scheduler") == {PINNED: "1"}
    assert _limits(decision.patched, "worker") == {PINNED: "1"}
    assert any("DGP014" in w for w in decision.warnings)


def test_without_the_class_watched_the_pin_is_said_not_made() -> None:
    [doc] = items("daskcluster-shape-b.yaml")
    decision = _mutate(doc, _watched("pure-dra.yaml"))
    assert decision.patched is not None
    assert PINNED not in _limits(decision.patched, "worker")
    [dgp014] = [f for f in decision.findings if f.code == "DGP014"]
    assert not dgp014.fixable
    assert "DeviceClass" in dgp014.message


def test_workers_on_a_watched_class_are_gpu_workers_and_unknown_without_it() -> None:
    [doc] = items("daskcluster-shape-a.yaml")
    worker = doc["spec"]["worker"]["spec"]["containers"][0]
    worker["resources"] = {"limits": {PINNED: "1"}}
    known = _mutate(doc, _watched("pure-dra.yaml", "deviceclass-pinned-580.yaml"))
    assert known.patched is not None
    assert _limits(known.patched, "scheduler") == {PINNED: "1"}  # DGP001 fixed
    unknown = _mutate(doc, _watched("pure-dra.yaml"))
    assert unknown.patched is None
    assert any("gpu-580-95-5.nvidia.com" in f.message for f in unknown.findings)


@pytest.mark.parametrize(
    "resource",
    [PINNED, IMPLICIT + "mig.nvidia.com", "nvidia.com/mig-1g.12gb", "nvidia.com/gpu-580"],
)
def test_a_policy_may_name_a_dra_class_for_the_scheduler(resource: str) -> None:
    assert _policy(resource).scheduler.gpu_resource == resource


@pytest.mark.parametrize("resource", ["gpu", "deviceclass.resource.kubernetes.io/", "nvidia.com/"])
def test_a_policy_naming_no_resource_is_invalid_in_one_line(resource: str) -> None:
    with pytest.raises(PolicyError) as raised:
        _policy(resource)
    assert "\n" not in str(raised.value)
    assert "deviceclass.resource.kubernetes.io/<DeviceClass>" in str(raised.value)


def test_the_policys_dra_class_is_the_schedulers_gpu() -> None:
    [doc] = items("daskcluster-shape-b.yaml")
    decision = _mutate(
        doc,
        _watched("pure-dra.yaml", "deviceclasses.yaml"),
        _policy(IMPLICIT + "mig.nvidia.com"),
    )
    assert decision.patched is not None
    assert IMPLICIT + "mig.nvidia.com" in _limits(decision.patched, "scheduler")


def _verifier_env(doc: dict[str, Any]) -> dict[str, str]:
    init = doc["spec"]["scheduler"]["spec"]["initContainers"]
    [check] = [c for c in init if c["name"] == "gpu-parity-check"]
    return {e["name"]: e.get("value", "") for e in check.get("env", [])}


def _verifier_limits(doc: dict[str, Any]) -> dict[str, str]:
    init = doc["spec"]["scheduler"]["spec"]["initContainers"]
    [check] = [c for c in init if c["name"] == "gpu-parity-check"]
    return dict(check["resources"]["limits"])


def test_the_verifier_asks_for_the_schedulers_dra_class_and_expects_its_pinned_driver() -> None:
    [doc] = items("daskcluster-shape-a.yaml")
    decision = _mutate(doc, _watched("pure-dra.yaml", "deviceclass-pinned-580.yaml"))
    assert decision.patched is not None
    # The same extended resource as the scheduler: one device with PR #134882 (v1.36.3, measured)
    limits = _verifier_limits(decision.patched)
    assert limits[PINNED] == "1"
    assert "nvidia.com/gpu" not in limits
    # The class selects driverVersion 580.95.5: the probe expects it (either spelling matches)
    assert _verifier_env(decision.patched)["GPU_PARITY_EXPECT_DRIVER"] == "580.95.5"


def test_the_verifier_expects_no_driver_where_the_class_pins_none() -> None:
    [doc] = items("daskcluster-shape-b.yaml")
    decision = _mutate(doc, _watched("pure-dra.yaml"))
    assert decision.patched is not None
    assert "GPU_PARITY_EXPECT_DRIVER" not in _verifier_env(decision.patched)


SECOND = "is a second device, not the scheduler's"


@pytest.mark.parametrize(
    ("kube", "warned"),
    [((1, 34), True), ((1, 35), False), ((1, 36), False), (None, False)],
    ids=["1.34-no-reuse", "1.35", "1.36-measured", "unknown"],
)
def test_a_verifier_on_a_dra_class_is_a_second_device_before_kubernetes_1_35(
    kube: tuple[int, int] | None, warned: bool
) -> None:
    [doc] = items("daskcluster-shape-b.yaml")
    dra = _watched("pure-dra.yaml")
    decision = decisions.mutate(
        doc, Policy(), dra.index.snapshot(), classes=dra.index.classes, kube=kube
    )
    said = [w for w in decision.warnings if SECOND in w]
    assert bool(said) is warned
    if warned:
        assert said == [
            "dask-gpu-parity: on Kubernetes 1.34 the gpu-parity-check init container's "
            "deviceclass.resource.kubernetes.io/gpu.nvidia.com is a second device, not the "
            "scheduler's (kubernetes PR #134882 is in 1.35 and later): the Pod asks for two; "
            "upgrade, or set spec.verifier.enabled: false in the DaskGPUPolicy"
        ]


@pytest.mark.parametrize(
    ("fleet", "warned"), [("pure-dra.yaml", True), ("mixed.yaml", True)], ids=["dra", "mixed"]
)
def test_nvidia_gpu_on_dra_nodes_is_dra_backed_on_kubernetes_1_34(fleet: str, warned: bool) -> None:
    [doc] = items("daskcluster-shape-a.yaml")
    dra = _watched(fleet)
    decision = decisions.mutate(
        doc, Policy(), dra.index.snapshot(), classes=dra.index.classes, kube=(1, 34)
    )
    assert any(SECOND in w for w in decision.warnings) is warned


def test_nvidia_gpu_on_a_device_plugin_fleet_is_no_second_device() -> None:
    [doc] = items("daskcluster-shape-a.yaml")
    dra = _watched("migrating.yaml")  # GFD-labelled nodes serving nvidia.com/gpu by the plugin
    plugin_only = DraNodes(NodeIndex())
    for obj in items("migrating.yaml"):
        if obj["kind"] == "Node":
            plugin_only.node_upserted(obj, obj["metadata"]["name"])
    plugin_only.release()
    decision = decisions.mutate(
        doc, Policy(), plugin_only.index.snapshot(), classes=dra.index.classes, kube=(1, 34)
    )
    assert not any(SECOND in w for w in decision.warnings)
