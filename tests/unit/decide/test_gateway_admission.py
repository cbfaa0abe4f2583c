"""Admission of dask-gateway's ``DaskCluster`` (``gateway.dask.org/v1alpha1``), without a server.

Inputs: ``tests/fixtures/gateway/`` (the objects ``KubeBackend.make_cluster_object`` creates,
sources in ``SOURCES.md``). Expected verdicts, written before the code: the mutating webhook
gives the scheduler parity in ``spec.config.scheduler_extra_*`` (the traits the gateway's
controller builds the scheduler Pod from, as ``fix`` does), touches nothing else, and then
answers for validation (the ``not-verified`` condition holds for what it admits); a CPU gateway
cluster, an opted-out one and any kubernetes.dask.org object sent to the gateway's path are not
judged by the gateway's webhooks; what mutation cannot fix is denied in ``enforce``.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from dask_gpu_parity.admission.decide import decisions, reviews
from dask_gpu_parity.admission.decide.configurations import (
    GATEWAY_RESOURCE,
    WebhookValues,
    configurations,
    match_conditions,
    validated_by_mutation,
)
from dask_gpu_parity.core.inventory import Inventory
from dask_gpu_parity.core.policy import Mode, Policy
from dask_gpu_parity.names import SKIP_ANNOTATION
from tests.unit.helpers import nodes

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "gateway"
INVENTORY = Inventory.from_nodes(nodes())
RAPIDS = "rapidsai/base:25.10-cuda12.9-py3.12"  # the image of gw-crd-gpu-option.yaml


def _gateway(name: str) -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load((FIXTURES / name).read_text())
    return document


def _config(document: dict[str, Any]) -> dict[str, Any]:
    config: dict[str, Any] = document["spec"]["config"]
    return config


def _review(resource: dict[str, str], path: str) -> dict[str, Any] | None:
    data = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "u-1",
            "resource": resource,
            "operation": "CREATE",
            "userInfo": {"username": "system:serviceaccount:dask-gateway:api-dask-gateway"},
            "object": _gateway("gw-crd-gpu-option.yaml"),
        },
    }
    return reviews.triage(data, reviews.route(path))


GATEWAY_API = {"group": "gateway.dask.org", "version": "v1alpha1", "resource": "daskclusters"}
DASK_API = {"group": "kubernetes.dask.org", "version": "v1", "resource": "daskclusters"}


@pytest.mark.parametrize("inventory", [None, INVENTORY], ids=["no-inventory", "inventory"])
def test_a_gpu_gateway_cluster_gets_parity_where_its_controller_reads_the_scheduler(
    inventory: Inventory | None,
) -> None:
    original = _gateway("gw-crd-gpu-option.yaml")
    decision = decisions.mutate(original, Policy(), inventory)
    assert decision.denial is None
    assert decision.patched is not None
    assert decision.patch
    assert all(op["path"].startswith("/spec/config/") for op in decision.patch), decision.patch
    config = _config(decision.patched)
    container = config["scheduler_extra_container_config"]
    assert container["resources"]["limits"]["nvidia.com/gpu"] == "1"
    pod = config["scheduler_extra_pod_config"]
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in pod[
        "tolerations"
    ]
    assert [c["name"] for c in pod["initContainers"]] == ["gpu-parity-probe", "gpu-parity-check"]
    check = pod["initContainers"][1]
    assert check["image"] == RAPIDS  # the verifier runs in the scheduler's image
    assert check["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert {"name": "gpu-parity-probe", "emptyDir": {"sizeLimit": "1Mi"}} in pod["volumes"]
    assert any(w.startswith("dask-gpu-parity DGP001 ") for w in decision.warnings)
    # everything the gateway and its controller read besides the scheduler's traits stays
    for key in ("username", "options"):
        assert decision.patched["spec"][key] == original["spec"][key]
    assert decision.patched["metadata"] == original["metadata"]
    assert original == _gateway("gw-crd-gpu-option.yaml")  # the request's object is not changed


def test_without_an_inventory_only_the_scheduler_traits_change() -> None:
    original = _gateway("gw-crd-gpu-option.yaml")
    decision = decisions.mutate(original, Policy(), None)
    assert {op["path"].split("/")[3] for op in decision.patch} <= {
        "scheduler_extra_pod_config",
        "scheduler_extra_container_config",
    }, decision.patch


def test_what_the_gateway_mutation_admits_needs_no_validating_call() -> None:
    decision = decisions.mutate(_gateway("gw-crd-gpu-option.yaml"), Policy(), INVENTORY)
    assert validated_by_mutation(decision.patched)
    after = decisions.validate(decision.patched, Policy(), INVENTORY)
    assert after.denial is None
    assert after.warnings == ()
    # the object as the gateway sent it would be validated (no GPU, no verifier on its scheduler)
    assert not validated_by_mutation(_gateway("gw-crd-gpu-option.yaml"))


def test_a_cpu_gateway_cluster_is_admitted_unchanged() -> None:
    cpu = _gateway("gw-crd-cpu.yaml")
    decision = decisions.mutate(cpu, Policy(), INVENTORY)
    assert (decision.patch, decision.warnings, decision.denial) == ((), (), None)
    assert not validated_by_mutation(cpu)
    assert decisions.validate(cpu, Policy(), INVENTORY).warnings == ()


def test_an_opted_out_gateway_cluster_is_skipped() -> None:
    # the gateway puts c.KubeBackend.common_annotations on every DaskCluster it creates
    opted = _gateway("gw-crd-gpu-option.yaml")
    opted["metadata"]["annotations"] = {SKIP_ANNOTATION: "true"}
    decision = decisions.mutate(opted, Policy(), INVENTORY)
    assert decision.skipped is not None
    assert decision.patch == ()


def test_a_scheduler_image_the_admin_set_is_denied_not_overwritten() -> None:
    other = _gateway("gw-crd-gpu-option.yaml")
    _config(other)["scheduler_extra_container_config"] = {"image": "daskgateway/dask-gateway:1"}
    decision = decisions.mutate(other, Policy(), INVENTORY)
    assert decision.denial is not None
    assert "DGP003" in decision.denial
    assert "/spec/config/scheduler_extra_container_config" in decision.denial
    warned = decisions.mutate(other, Policy(mode=Mode.WARN), INVENTORY)
    assert warned.denial is None
    assert _config(warned.patched)["scheduler_extra_container_config"]["image"] == (
        "daskgateway/dask-gateway:1"
    )
    assert any("DGP003" in w for w in warned.warnings)


@pytest.mark.parametrize(
    ("resource", "path", "passed"),
    [
        pytest.param(GATEWAY_API, "mutate-gateway-daskcluster", True, id="gateway-mutate"),
        pytest.param(GATEWAY_API, "validate-gateway-daskcluster", True, id="gateway-validate"),
        pytest.param(GATEWAY_API, "mutate-daskcluster", False, id="gateway-to-operator-path"),
        pytest.param(DASK_API, "mutate-gateway-daskcluster", False, id="operator-to-gateway-path"),
    ],
)
def test_a_gateway_create_is_judged_on_the_gateways_paths_only(
    resource: dict[str, str], path: str, passed: bool
) -> None:
    answer = _review(resource, path)
    if passed:
        assert answer is None
        return
    assert answer is not None
    response = answer["response"]
    assert response["allowed"] is False
    assert response["status"]["code"] == 400
    wrong = "daskclusters" if resource is DASK_API else "daskclusters.gateway.dask.org"
    assert f"Webhook /{path} checks " in response["status"]["message"]
    assert f", not {wrong}: fix the rules" in response["status"]["message"]


def test_the_gateway_route_is_counted_under_its_own_labels() -> None:
    route = reviews.route("mutate-gateway-daskcluster")
    assert (route.label, route.kind, route.mutating) == (
        "mutate-gateway-daskcluster",
        "gateway-daskcluster",
        True,
    )
    assert reviews.route("mutate-daskcluster").kind == "daskcluster"


def test_the_webhook_configurations_send_gateway_clusters_to_the_gateway_paths() -> None:
    values = WebhookValues(ca_bundle=b"CA", url="https://127.0.0.1:9443")
    hooks = {w["name"]: w for c in configurations(values) for w in c["webhooks"]}
    for handler, validating in (
        ("mutate-gateway-daskcluster", False),
        ("validate-gateway-daskcluster", True),
    ):
        hook = hooks[f"{handler}.gpuparity.dask.org"]
        (rule,) = hook["rules"]
        assert rule["apiGroups"] == ["gateway.dask.org"]
        assert rule["apiVersions"] == ["v1alpha1"]
        assert rule["resources"] == ["daskclusters"]
        assert rule["operations"] == ["CREATE"]
        assert hook["clientConfig"]["url"] == f"https://127.0.0.1:9443/{handler}"
        conditions = hook["matchConditions"]
        assert conditions == match_conditions(GATEWAY_RESOURCE, validating=validating)
        names = [c["name"] for c in conditions]
        assert names == ["gpu-workers", "not-opted-out", *(["not-verified"] if validating else [])]
        gpu = conditions[0]["expression"]
        # the worker's GPU is in the worker traits: its container config, or a sidecar's
        assert "object.spec.config.worker_extra_container_config.resources" in gpu
        assert "object.spec.config.worker_extra_pod_config.containers.exists(c," in gpu
        assert "k.contains('/')" in gpu
    verified = match_conditions(GATEWAY_RESOURCE, validating=True)[2]["expression"]
    assert "object.spec.config.scheduler_extra_pod_config.initContainers" in verified
    # the operator's kinds keep their conditions
    assert hooks["mutate-daskcluster.gpuparity.dask.org"]["rules"][0]["apiGroups"] == [
        "kubernetes.dask.org"
    ]


@pytest.mark.parametrize(
    ("scheduler_container", "scheduler_pod", "verified"),
    [
        pytest.param({"resources": {"limits": {"nvidia.com/gpu": 1}}}, {}, False, id="no-verifier"),
        pytest.param(
            {},
            {"initContainers": [{"name": "gpu-parity-check"}]},
            False,
            id="verifier-without-gpu",
        ),
        pytest.param(
            {"resources": {"requests": {"nvidia.com/gpu": "1"}}},
            {"initContainers": [{"name": "gpu-parity-check"}]},
            True,
            id="gpu-and-verifier",
        ),
        pytest.param(
            {},
            {
                "containers": [{"name": "side", "resources": {"limits": {"nvidia.com/gpu": "1"}}}],
                "initContainers": [{"name": "gpu-parity-check"}],
            },
            True,
            id="gpu-on-a-sidecar",  # as the CEL reads it: any container of the scheduler pod
        ),
    ],
)
def test_validated_by_mutation_reads_the_gateway_scheduler_as_the_cel_does(
    scheduler_container: dict[str, Any], scheduler_pod: dict[str, Any], verified: bool
) -> None:
    document = copy.deepcopy(_gateway("gw-crd-gpu-option.yaml"))
    _config(document)["scheduler_extra_container_config"] = scheduler_container
    _config(document)["scheduler_extra_pod_config"] = scheduler_pod
    assert validated_by_mutation(document) is verified
