"""What admission answers in each mode, without a server."""

from __future__ import annotations

import base64
import copy

import pytest

from dask_gpu_parity.admission.decide import decisions
from dask_gpu_parity.admission.decide.configurations import (
    WebhookValues,
    configurations,
    match_conditions,
    validated_by_mutation,
)
from dask_gpu_parity.core.engine import evaluate
from dask_gpu_parity.core.inventory import Inventory
from dask_gpu_parity.core.patch import apply_in_place
from dask_gpu_parity.core.policy import Mode, Policy, VerifierSettings, select
from dask_gpu_parity.core.policy_manifest import load
from dask_gpu_parity.names import SKIP_ANNOTATION
from tests.unit.helpers import cluster, example, nodes

INVENTORY = Inventory.from_nodes(nodes())


def test_enforce_mutates_with_one_short_warning_per_change() -> None:
    decision = decisions.mutate(example("gpu-cluster-tcp.yaml"), Policy(), INVENTORY)
    assert decision.patched is not None
    assert decision.denial is None
    fixed = [f for f in decision.findings if f.fixable]
    assert len(decision.warnings) == len(fixed) >= 4
    assert all(w.startswith("dask-gpu-parity DGP") and len(w) < 120 for w in decision.warnings)
    assert any("DGP001 scheduler has no gpu: fixed /spec/scheduler" in w for w in decision.warnings)
    after = decisions.validate(decision.patched, Policy(), INVENTORY)
    assert after.denial is None
    assert after.warnings == ()


def test_mutation_patch_turns_the_object_into_the_fixed_one() -> None:
    doc = example("gpu-cluster-tcp.yaml")
    decision = decisions.mutate(doc, Policy(), INVENTORY)
    assert decision.patch == tuple(evaluate(doc, Policy(), INVENTORY).patch)
    applied = copy.deepcopy(doc)
    apply_in_place(applied, decision.patch)
    assert applied == decision.patched
    audit = decisions.mutate(doc, Policy(mode=Mode.AUDIT), INVENTORY)
    assert audit.patch == ()
    assert decisions.validate(doc, Policy(), INVENTORY).patch == ()


def test_enforce_denies_what_mutation_cannot_fix() -> None:
    """The mutating webhook denies it: validation would not be called on its result."""
    ucx = example("gpu-cluster-ucx.yaml")
    decision = decisions.mutate(ucx, Policy(), INVENTORY)
    assert decision.denial is not None
    assert decision.patch == ()
    assert "DGP013 at /spec/scheduler/spec: No node can take the scheduler" in decision.denial
    # what the validating webhook says of the same object, had it been called
    fixed = evaluate(ucx, Policy(), INVENTORY).patched
    assert decisions.validate(fixed, Policy(), INVENTORY).denial == decision.denial


def test_mutation_answers_for_validation_exactly_when_it_is_not_called() -> None:
    """validated_by_mutation is the Python reading of the validating webhooks' not-verified."""
    tcp = example("gpu-cluster-tcp.yaml")
    fixed = evaluate(tcp, Policy(), INVENTORY).patched
    assert not validated_by_mutation(tcp)  # no GPU on the scheduler: validated
    assert validated_by_mutation(fixed)
    unverified = evaluate(tcp, Policy(verifier=VerifierSettings(enabled=False)), INVENTORY).patched
    assert not validated_by_mutation(unverified)  # no verifier: validated
    quantity_zero = copy.deepcopy(fixed)
    quantity_zero["spec"]["scheduler"]["spec"]["containers"][0]["resources"]["limits"] = {
        "nvidia.com/mig-anything": "0"
    }
    assert validated_by_mutation(quantity_zero)  # as the CEL reads it: the key, any quantity
    assert not validated_by_mutation(example("gpu-workergroup.yaml"))  # always validated
    # enforce and warn: validation's remaining warnings come with the mutation's
    policy = Policy(mode=Mode.WARN)
    ucx = decisions.mutate(example("gpu-cluster-ucx.yaml"), policy, INVENTORY)
    assert ucx.denial is None
    assert ucx.patched is not None
    assert any(w.startswith("dask-gpu-parity DGP") for w in ucx.warnings)  # the changes
    assert any(w.startswith("dask-gpu-parity: DGP013") for w in ucx.warnings)  # what remains
    # audit: a Git-fixed object (validation not called) is still reported on
    audit = decisions.mutate(fixed, Policy(mode=Mode.AUDIT), None)
    assert audit.patched is None
    assert audit.warnings == decisions.validate(fixed, Policy(mode=Mode.AUDIT), None).warnings


@pytest.mark.parametrize("mode", [Mode.WARN, Mode.AUDIT])
def test_warn_and_audit_never_deny(mode: Mode) -> None:
    policy = Policy(mode=mode)
    mutated = decisions.mutate(example("gpu-cluster-ucx.yaml"), policy, INVENTORY)
    if mode is Mode.AUDIT:
        assert mutated.patched is None
    body = mutated.patched or example("gpu-cluster-ucx.yaml")
    decision = decisions.validate(body, policy, INVENTORY)
    assert decision.denial is None
    assert any("DGP013" in w for w in decision.warnings)
    if mode is Mode.AUDIT:
        assert any("DGP001" in w for w in decision.warnings)
        assert all(w.startswith("dask-gpu-parity audit: ") for w in decision.warnings)


def test_off_and_opt_outs_skip_everything() -> None:
    ucx = example("gpu-cluster-ucx.yaml")
    assert decisions.mutate(ucx, Policy(mode=Mode.OFF), INVENTORY).skipped
    assert decisions.validate(ucx, Policy(), INVENTORY, namespace_skip=True).skipped
    opted = cluster(annotations={"gpuparity.dask.org/skip": "true"})
    decision = decisions.mutate(opted, Policy(), INVENTORY)
    assert decision.patched is None
    assert "resource opted out" in (decision.skipped or "")


def test_cpu_only_is_allowed_untouched() -> None:
    cpu = example("cpu-cluster.yaml")
    assert decisions.mutate(cpu, Policy(), INVENTORY).patched is None
    assert decisions.validate(cpu, Policy(), INVENTORY) == decisions.Decision()


def test_worker_group_against_its_cluster() -> None:
    group, cpu = example("gpu-workergroup.yaml"), example("cpu-cluster.yaml")
    lookup = decisions.ClusterLookup("cpu-only", found=cpu)
    denied = decisions.validate(group, Policy(), INVENTORY, cluster=lookup)
    assert denied.denial is not None
    assert "DGP015" in denied.denial
    gpu = decisions.mutate(example("gpu-cluster-tcp.yaml"), Policy(), INVENTORY).patched
    lookup = decisions.ClusterLookup("rapids-tcp", found=gpu)
    assert decisions.validate(group, Policy(), INVENTORY, cluster=lookup) == decisions.Decision()


def _cpu_group() -> dict[str, object]:
    group = example("gpu-workergroup.yaml")
    del group["spec"]["worker"]["spec"]["containers"][0]["resources"]
    return group


@pytest.mark.parametrize(
    ("group", "policy", "namespace_skip", "expected"),
    [
        pytest.param(example("gpu-workergroup.yaml"), Policy(), False, "cpu-only", id="gpu-group"),
        pytest.param(_cpu_group(), Policy(), False, None, id="cpu-group"),
        pytest.param(example("gpu-workergroup.yaml"), Policy(), True, None, id="namespace-skip"),
        pytest.param(
            example("gpu-workergroup.yaml"), Policy(mode=Mode.OFF), False, None, id="mode-off"
        ),
        pytest.param(example("gpu-cluster-tcp.yaml"), Policy(), False, None, id="daskcluster"),
    ],
)
def test_only_a_checked_gpu_worker_group_needs_its_cluster(
    group: dict[str, object], policy: Policy, namespace_skip: bool, expected: str | None
) -> None:
    assert decisions.cluster_to_read(group, policy, namespace_skip=namespace_skip) == expected


@pytest.mark.parametrize("mode", [Mode.ENFORCE, Mode.WARN, Mode.AUDIT])
def test_worker_group_whose_cluster_does_not_exist_is_allowed_with_a_warning(mode: Mode) -> None:
    lookup = decisions.ClusterLookup("cpu-only")
    decision = decisions.validate(
        example("gpu-workergroup.yaml"), Policy(mode=mode), INVENTORY, cluster=lookup
    )
    assert decision.denial is None
    (warning,) = decision.warnings
    assert "DaskCluster 'cpu-only' does not exist (yet)" in warning
    assert "create the DaskCluster first" in warning


@pytest.mark.parametrize("mode", [Mode.ENFORCE, Mode.WARN])
def test_worker_group_whose_cluster_cannot_be_read_fails_closed_in_enforce(mode: Mode) -> None:
    lookup = decisions.ClusterLookup("cpu-only", error="no answer within 2 s")
    decision = decisions.validate(
        example("gpu-workergroup.yaml"), Policy(mode=mode), INVENTORY, cluster=lookup
    )
    text = decision.denial if mode is Mode.ENFORCE else " ".join(decision.warnings)
    assert text is not None
    assert "DaskCluster 'cpu-only' could not be read" in text
    assert "(DGP015): no answer within 2 s; retry" in text
    if mode is Mode.WARN:
        assert decision.denial is None


def test_validation_leaves_the_schema_to_the_api_server() -> None:
    doc = cluster()
    del doc["spec"]["worker"]
    assert "DGP011" in {f.code for f in evaluate(doc).findings}
    decision = decisions.validate(doc, Policy(), INVENTORY)
    assert decision.denial is None
    assert not decision.findings


def test_policy_selection_by_namespace_and_priority() -> None:
    def policy(name: str, priority: int, selector: dict[str, object]) -> Policy:
        return load(
            {
                "apiVersion": "gpuparity.dask.org/v1alpha1",
                "kind": "DaskGPUPolicy",
                "metadata": {"name": name},
                "spec": {"priority": priority, "namespaceSelector": selector, "mode": "warn"},
            }
        )

    team = policy("team", 10, {"matchLabels": {"team": "ml"}})
    everyone = policy("everyone", 0, {})
    not_dev = policy(
        "not-dev", 5, {"matchExpressions": [{"key": "env", "operator": "NotIn", "values": ["dev"]}]}
    )
    assert select([everyone, team, not_dev], {"team": "ml"}).name == "team"
    assert select([everyone, team, not_dev], {"env": "prod"}).name == "not-dev"
    assert select([everyone, not_dev], {"env": "dev"}).name == "everyone"
    assert select([team], {"env": "dev"}) == Policy()


@pytest.mark.parametrize("url", ["https://127.0.0.1:9443", None])
def test_webhook_configurations(url: str | None) -> None:
    values = WebhookValues(ca_bundle=b"CA", url=url, service_name="dgp", service_namespace="ops")
    mutating, validating = configurations(values)

    def resources(config: dict) -> list[tuple[str, str]]:
        return [(w["rules"][0]["apiGroups"][0], w["rules"][0]["resources"][0]) for w in config]

    dask, gateway = "kubernetes.dask.org", "gateway.dask.org"
    assert resources(mutating["webhooks"]) == [
        (dask, "daskclusters"),
        (dask, "daskjobs"),
        (gateway, "daskclusters"),
    ]
    assert resources(validating["webhooks"]) == [
        (dask, "daskclusters"),
        (dask, "daskjobs"),
        (dask, "daskworkergroups"),
        (gateway, "daskclusters"),
    ]
    for webhook in mutating["webhooks"] + validating["webhooks"]:
        assert webhook["rules"][0]["operations"] == ["CREATE"]
        assert webhook["sideEffects"] == "None"
        assert base64.b64decode(webhook["clientConfig"]["caBundle"]) == b"CA"
        handler = webhook["name"].split(".")[0]
        if url:
            assert webhook["clientConfig"]["url"] == f"{url}/{handler}"
        else:
            assert webhook["clientConfig"]["service"]["path"] == f"/{handler}"
        excluded = webhook["namespaceSelector"]["matchExpressions"][0]
        assert excluded["values"] == ["kube-system"]


def test_match_conditions_keep_what_needs_no_answer_away() -> None:
    """CPU-only and opted-out Dask resources never reach the operator (CEL in the API server).

    The conditions' behaviour is checked against the real API server in the e2e test
    ``tests/e2e/admission/test_match_conditions.py``.
    """
    values = WebhookValues(ca_bundle=b"CA", url="https://127.0.0.1:9443")
    for config in configurations(values):
        for webhook in config["webhooks"]:
            plural = webhook["rules"][0]["resources"][0]
            if webhook["rules"][0]["apiGroups"] == ["gateway.dask.org"]:
                continue  # tests/unit/decide/test_gateway_admission.py
            validating = config["kind"].startswith("Validating")
            assert webhook["matchConditions"] == match_conditions(plural, validating=validating)
            (gpu, skip, *verified) = webhook["matchConditions"]
            assert bool(verified) == (validating and plural != "daskworkergroups")
            worker = (
                "object.spec.cluster.spec.worker" if plural == "daskjobs" else "object.spec.worker"
            )
            assert f"{worker}.spec.containers.exists(c," in gpu["expression"]
            assert "k.contains('/')" in gpu["expression"]  # any extended resource: DRA's too
            assert SKIP_ANNOTATION in skip["expression"]
    before = WebhookValues(ca_bundle=b"CA", url="https://127.0.0.1:9443", match_conditions=False)
    for config in configurations(before):
        assert all("matchConditions" not in w for w in config["webhooks"])
