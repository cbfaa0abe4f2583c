"""One table-driven test per parity rule, on small DaskClusters."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from dask_gpu_parity.core.engine import evaluate
from dask_gpu_parity.core.findings import Severity
from dask_gpu_parity.core.inventory import Inventory
from dask_gpu_parity.core.plain import get_in
from dask_gpu_parity.core.policy import (
    Placement,
    PlacementSettings,
    Policy,
    SchedulerSettings,
    VerifierSettings,
)
from tests.unit.helpers import cluster, example, nodes

SCHED = ("spec", "scheduler", "spec")
SCHED_C = (*SCHED, "containers", 0)
OFF = VerifierSettings(enabled=False)
NO_VERIFY = Policy(verifier=OFF)


def codes(doc: Any, policy: Policy | None = NO_VERIFY, **kw: Any) -> list[str]:
    return [f.code for f in evaluate(doc, policy, **kw).findings]


def test_input_is_never_mutated() -> None:
    doc = example("gpu-cluster-ucx.yaml")
    before = copy.deepcopy(doc)
    result = evaluate(doc, None, Inventory.from_nodes(nodes()))
    assert doc == before
    assert result.patched != doc


@pytest.mark.parametrize(
    ("worker_resources", "expected"),
    [
        ({"limits": {"nvidia.com/gpu": "1"}}, "nvidia.com/gpu"),
        (
            {"requests": {"nvidia.com/gpu": "2"}, "limits": {"nvidia.com/gpu": "2"}},
            "nvidia.com/gpu",
        ),
        ({"limits": {"nvidia.com/gpu.shared": "1"}}, "nvidia.com/gpu.shared"),
        ({"limits": {"nvidia.com/mig-1g.10gb": "1"}}, "nvidia.com/mig-1g.10gb"),
        ({"limits": {"nvidia.com/gpu": 1}}, "nvidia.com/gpu"),
    ],
    ids=["limits", "requests-and-limits", "shared", "mig", "integer-quantity"],
)
def test_dgp001_scheduler_gets_the_workers_gpu_resource(
    worker_resources: dict[str, Any], expected: str
) -> None:
    result = evaluate(cluster(worker_resources=worker_resources), NO_VERIFY)
    [finding] = [f for f in result.findings if f.code == "DGP001"]
    assert finding.severity is Severity.ERROR
    assert finding.fixable
    assert "Scheduler requests no GPU" in finding.message
    assert get_in(result.patched, (*SCHED_C, "resources", "limits", expected)) == "1"
    if "requests" in worker_resources:
        assert get_in(result.patched, (*SCHED_C, "resources", "requests", expected)) == "1"


def test_dgp001_gpu_in_a_second_worker_container_counts() -> None:
    doc = cluster(worker_resources={})
    doc["spec"]["worker"]["spec"]["containers"].append(
        {"name": "sidecar", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "1"}}}
    )
    assert "DGP001" in codes(doc)


def test_dgp001_tcp_severity_can_be_lowered_but_not_for_ucx() -> None:
    lenient = Policy(tcp_severity=Severity.WARNING, verifier=OFF)
    tcp = evaluate(cluster(), lenient).findings[0]
    assert (tcp.code, tcp.severity) == ("DGP001", Severity.WARNING)
    ucx = cluster(scheduler_container={"args": ["dask", "scheduler", "--protocol", "ucx"]})
    first = evaluate(ucx, lenient).findings[0]
    assert (first.code, first.severity) == ("DGP001", Severity.ERROR)
    assert "UCX" in first.message


def test_dgp002_other_gpu_resource_is_a_warning_left_alone() -> None:
    doc = cluster(scheduler_resources={"limits": {"nvidia.com/mig-1g.10gb": "1"}})
    result = evaluate(doc, NO_VERIFY)
    [finding] = result.findings
    assert (finding.code, finding.severity, finding.fixable) == ("DGP002", Severity.WARNING, False)
    assert result.patched == doc
    policy = Policy(
        scheduler=SchedulerSettings(gpu_resource="nvidia.com/mig-1g.10gb"), verifier=OFF
    )
    assert codes(doc, policy) == []


@pytest.mark.parametrize(
    ("scheduler_image", "fixable", "patched_image"),
    [(None, True, "rapids:1"), ("", True, "rapids:1"), ("other:2", False, "other:2")],
    ids=["missing-is-set", "empty-is-set", "different-is-reported"],
)
def test_dgp003_image(scheduler_image: str | None, fixable: bool, patched_image: str) -> None:
    doc = cluster(scheduler_resources={"limits": {"nvidia.com/gpu": "1"}})
    container = doc["spec"]["scheduler"]["spec"]["containers"][0]
    if scheduler_image is None:
        del container["image"]
    else:
        container["image"] = scheduler_image
    result = evaluate(doc, NO_VERIFY)
    [finding] = [f for f in result.findings if f.code == "DGP003"]
    assert finding.fixable is fixable
    assert finding.severity is Severity.ERROR
    assert get_in(result.patched, (*SCHED_C, "image")) == patched_image


GPU_TOLERATION = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
AFFINITY = {
    "nodeAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": {
            "nodeSelectorTerms": [
                {
                    "matchExpressions": [
                        {
                            "key": "nvidia.com/cuda.driver-version.major",
                            "operator": "In",
                            "values": ["580"],
                        },
                        {"key": "topology.kubernetes.io/zone", "operator": "In", "values": ["a"]},
                    ]
                }
            ]
        }
    }
}


@pytest.mark.parametrize(
    ("worker_extra", "code", "field", "expected"),
    [
        (
            {"nodeSelector": {"nvidia.com/gpu.product": "A100", "pool": "big"}},
            "DGP004",
            "nodeSelector",
            {"nvidia.com/gpu.product": "A100"},
        ),
        (
            {"affinity": AFFINITY},
            "DGP004",
            "affinity",
            {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    AFFINITY["nodeAffinity"][
                                        "requiredDuringSchedulingIgnoredDuringExecution"
                                    ]["nodeSelectorTerms"][0]["matchExpressions"][0]
                                ]
                            }
                        ]
                    }
                }
            },
        ),
        (
            {"tolerations": [GPU_TOLERATION, {"key": "spot", "operator": "Exists"}]},
            "DGP005",
            "tolerations",
            [GPU_TOLERATION],
        ),
        ({"runtimeClassName": "nvidia"}, "DGP006", "runtimeClassName", "nvidia"),
    ],
    ids=[
        "node-selector-nvidia-keys-only",
        "affinity-nvidia-terms-only",
        "gpu-tolerations",
        "runtime-class",
    ],
)
def test_placement_copies_only_gpu_constraints(
    worker_extra: dict[str, Any], code: str, field: str, expected: Any
) -> None:
    doc = cluster(
        worker_extra=worker_extra, scheduler_resources={"limits": {"nvidia.com/gpu": "1"}}
    )
    result = evaluate(doc, NO_VERIFY)
    assert [f.code for f in result.findings] == [code]
    assert result.findings[0].fixable
    assert get_in(result.patched, (*SCHED, field)) == expected


@pytest.mark.parametrize(
    ("scheduler_class", "fixable", "patched_class"),
    [(None, True, "nvidia"), ("", True, "nvidia"), ("runc", False, "runc")],
    ids=["null-is-set", "empty-is-set", "different-is-reported"],
)
def test_dgp006_runtime_class(
    scheduler_class: str | None, fixable: bool, patched_class: str
) -> None:
    """An empty runtimeClassName is no runtime class the API server accepts: it is replaced."""
    doc = cluster(
        worker_extra={"runtimeClassName": "nvidia"},
        scheduler_extra={"runtimeClassName": scheduler_class},
        scheduler_resources={"limits": {"nvidia.com/gpu": "1"}},
    )
    result = evaluate(doc, NO_VERIFY)
    [finding] = result.findings
    assert (finding.code, finding.fixable) == ("DGP006", fixable)
    assert get_in(result.patched, (*SCHED, "runtimeClassName")) == patched_class


def test_placement_conflicts_are_reported_not_overwritten() -> None:
    doc = cluster(
        worker_extra={
            "nodeSelector": {"nvidia.com/cuda.driver-version.major": "580"},
            "runtimeClassName": "nvidia",
        },
        scheduler_extra={
            "nodeSelector": {"nvidia.com/cuda.driver-version.major": "570"},
            "runtimeClassName": "runc",
        },
        scheduler_resources={"limits": {"nvidia.com/gpu": "1"}},
    )
    result = evaluate(doc, NO_VERIFY)
    assert [(f.code, f.fixable) for f in result.findings] == [("DGP004", False), ("DGP006", False)]
    assert result.patched == doc


def test_placement_strategy_none_leaves_placement_alone() -> None:
    doc = cluster(worker_extra={"nodeSelector": {"nvidia.com/gpu.product": "A100"}})
    assert codes(
        doc, Policy(placement=PlacementSettings(strategy=Placement.NONE), verifier=OFF)
    ) == ["DGP001"]


def test_scheduler_pool_copies_driver_keys_but_not_the_product() -> None:
    doc = cluster(
        worker_extra={
            "nodeSelector": {
                "nvidia.com/gpu.product": "A100",
                "nvidia.com/cuda.driver-version.full": "580.95.05",
            }
        }
    )
    policy = Policy(
        scheduler=SchedulerSettings(node_selector=(("nvidia.com/gpu.product", "Tesla-T4"),)),
        verifier=OFF,
    )
    patched = evaluate(doc, policy).patched
    assert get_in(patched, (*SCHED, "nodeSelector")) == {
        "nvidia.com/cuda.driver-version.full": "580.95.05",
        "nvidia.com/gpu.product": "Tesla-T4",
    }


@pytest.mark.parametrize(
    ("worker_env", "scheduler_env", "expected_codes", "fixable"),
    [
        ([{"name": "EXTRA_PIP_PACKAGES", "value": "xgboost"}], None, ["DGP007"], [True]),
        ([{"name": "UCX_TLS", "value": "tcp"}], [{"name": "UCX_TLS", "value": "tcp"}], [], []),
        (
            [{"name": "EXTRA_CONDA_PACKAGES", "value": "a"}],
            [{"name": "EXTRA_CONDA_PACKAGES", "value": "b"}],
            ["DGP007"],
            [False],
        ),
        ([{"name": "HOME", "value": "/x"}], None, [], []),
    ],
    ids=["missing-copied", "same-ok", "different-reported", "other-vars-ignored"],
)
def test_dgp007_environment(
    worker_env: list[Any],
    scheduler_env: list[Any] | None,
    expected_codes: list[str],
    fixable: list[bool],
) -> None:
    doc = cluster(
        worker_container={"env": worker_env},
        scheduler_container={"env": scheduler_env} if scheduler_env is not None else {},
        scheduler_resources={"limits": {"nvidia.com/gpu": "1"}},
    )
    result = evaluate(doc, NO_VERIFY)
    assert [f.code for f in result.findings] == expected_codes
    assert [f.fixable for f in result.findings] == fixable


@pytest.mark.parametrize(
    ("selector", "value", "expected"),
    [
        ({"args": ["dask", "scheduler", "--protocol", "ucx"]}, None, ("DGP008", True)),
        ({"args": ["dask scheduler --protocol=ucxx"]}, None, ("DGP008", True)),
        (
            {"env": [{"name": "DASK_DISTRIBUTED__COMM__DEFAULT_SCHEME", "value": "ucx"}]},
            None,
            ("DGP008", True),
        ),
        ({"args": ["dask", "scheduler", "--protocol", "ucx"]}, "False", ("DGP008", False)),
        ({"args": ["dask", "scheduler", "--protocol", "ucx"]}, "True", None),
        ({"args": ["dask", "scheduler", "--protocol", "tcp"]}, None, None),
    ],
    ids=["flag", "flag-equals-ucxx", "env-scheme", "explicitly-false", "already-true", "tcp"],
)
def test_dgp008_ucx_scheduler_creates_a_cuda_context(
    selector: dict[str, Any], value: str | None, expected: tuple[str, bool] | None
) -> None:
    container = dict(selector)
    if value is not None:
        container["env"] = [
            *container.get("env", []),
            {"name": "DASK_DISTRIBUTED_UCXX__CREATE_CUDA_CONTEXT", "value": value},
        ]
    doc = cluster(
        scheduler_container=container, scheduler_resources={"limits": {"nvidia.com/gpu": "1"}}
    )
    found = [(f.code, f.fixable) for f in evaluate(doc, NO_VERIFY).findings if f.code == "DGP008"]
    assert found == ([expected] if expected else [])


def test_dgp008_a_ucx_worker_address_makes_it_ucx() -> None:
    doc = cluster(
        worker_container={"args": ["dask", "worker", "ucx://sched:8786"]},
        scheduler_resources={"limits": {"nvidia.com/gpu": "1"}},
    )
    assert codes(doc) == ["DGP008"]


@pytest.mark.parametrize(
    ("path", "value", "fixable"),
    [
        (
            ("spec", "worker", "spec", "containers", 0, "resources", "limits", "nvidia.com/gpu"),
            1,
            True,
        ),
        (("spec", "worker", "spec", "containers", 0, "resources", "limits", "cpu"), 0.5, True),
    ],
    ids=["integer-gpu", "float-cpu"],
)
def test_dgp010_number_quantities_become_strings(
    path: tuple[Any, ...], value: Any, fixable: bool
) -> None:
    doc = cluster()
    node = doc
    for segment in path[:-1]:
        node = node[segment]
    node[path[-1]] = value
    result = evaluate(doc, NO_VERIFY)
    [finding] = [f for f in result.findings if f.code == "DGP010"]
    assert finding.fixable is fixable
    assert isinstance(get_in(result.patched, path), str)
    assert "quantities as strings" in finding.message


def test_dgp010_cpu_only_quantities_are_reported_not_fixed() -> None:
    doc = cluster(
        worker_resources={"limits": {"cpu": 1}}, worker_container={"args": ["dask-worker"]}
    )
    result = evaluate(doc, NO_VERIFY)
    assert [(f.code, f.fixable) for f in result.findings] == [("DGP011", False)]
    assert result.patched == doc


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (
            lambda d: d["spec"]["scheduler"]["service"]["ports"][0].update(targetPort=8786),
            "must be of type string",
        ),
        (
            lambda d: d["spec"]["worker"]["spec"].update(containers={"name": "worker"}),
            "must be of type array",
        ),
        (lambda d: d["spec"].pop("worker"), "Required value"),
        (lambda d: d["spec"]["worker"]["spec"].update(containers=None), "Required value"),
        (lambda d: d["spec"]["worker"].update(replicas="two"), "must be of type integer"),
    ],
    ids=[
        "integer-target-port",
        "containers-not-a-list",
        "missing-worker",
        "null-containers-dropped",
        "string-replicas",
    ],
)
def test_dgp011_schema_violations(mutate: Any, message: str) -> None:
    doc = cluster()
    mutate(doc)
    findings = [f for f in evaluate(doc, NO_VERIFY).findings if f.code == "DGP011"]
    assert findings, "expected a schema finding"
    assert any(message in f.message for f in findings)
    assert all(f.severity is Severity.ERROR and not f.fixable for f in findings)


@pytest.mark.parametrize(
    "second", [{"containerPort": 8786}, {"containerPort": 8786, "protocol": "TCP"}]
)
def test_dgp011_duplicate_list_map_keys(second: dict[str, Any]) -> None:
    """``ports`` is a list-map keyed by containerPort and protocol (default TCP)."""
    ports = [{"containerPort": 8786, "name": "tcp-comm"}, {"containerPort": 8787}, second]
    doc = cluster(scheduler_container={"ports": ports})
    findings = [f for f in evaluate(doc, NO_VERIFY).findings if f.code == "DGP011"]
    assert [(f.path, f.message) for f in findings] == [
        (
            "/spec/scheduler/spec/containers/0/ports/2",
            'Duplicate value: [8786, "TCP"]: fix the manifest',
        )
    ]


def test_dgp012_fields_newer_than_kubernetes_1_21_are_pruned() -> None:
    doc = cluster(
        scheduler_extra={"schedulingGates": [{"name": "x"}]},
        scheduler_resources={"limits": {"nvidia.com/gpu": "1"}},
    )
    doc["spec"]["scheduler"]["spec"]["containers"][0]["restartPolicy"] = "Always"
    findings = evaluate(doc, NO_VERIFY).findings
    assert sorted(f.path for f in findings if f.code == "DGP012") == [
        "/spec/scheduler/spec/containers/0/restartPolicy",
        "/spec/scheduler/spec/schedulingGates",
    ]


def test_cpu_only_cluster_is_untouched() -> None:
    doc = example("cpu-cluster.yaml")
    result = evaluate(doc)
    assert result.findings == ()
    assert result.patched == doc
    assert result.patch == []


@pytest.mark.parametrize("where", ["resource", "resource-uppercase"])
def test_opt_out_annotation(where: str) -> None:
    value = "true" if where == "resource" else "True"
    doc = cluster(annotations={"gpuparity.dask.org/skip": value})
    result = evaluate(doc)
    assert result.findings == ()
    assert result.patched == doc


def test_opt_out_needs_true() -> None:
    assert codes(cluster(annotations={"gpuparity.dask.org/skip": "false"}))


def test_non_dask_documents_pass_through() -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "spec": {"containers": [{"resources": {"limits": {"nvidia.com/gpu": 1}}}]},
    }
    result = evaluate(pod)
    assert result.findings == ()
    assert result.patched is pod


def test_daskjob_scheduler_and_runner() -> None:
    doc = example("gpu-daskjob.yaml")
    doc["spec"]["job"]["spec"]["containers"][0]["image"] = "python:3.12"
    result = evaluate(doc, NO_VERIFY)
    found = [f.code for f in result.findings]
    assert found[:1] == ["DGP001"]
    assert "DGP016" in found
    sched = ("spec", "cluster", "spec", "scheduler", "spec", "containers", 0)
    assert get_in(result.patched, (*sched, "resources", "limits", "nvidia.com/gpu")) == "1"


def test_dgp015_worker_group_against_cpu_scheduler() -> None:
    group = example("gpu-workergroup.yaml")
    cpu = example("cpu-cluster.yaml")
    [finding] = evaluate(group, cluster=cpu).findings
    assert finding.code == "DGP015"
    assert "cpu-only" in finding.message
    gpu = copy.deepcopy(cpu)
    gpu["spec"]["scheduler"]["spec"]["containers"][0]["resources"] = {
        "limits": {"nvidia.com/gpu": "1"}
    }
    assert evaluate(group, cluster=gpu).findings == ()
    assert evaluate(group).findings == ()  # cluster unknown: nothing to compare


def test_dgp009_verifier_is_injected_once() -> None:
    result = evaluate(cluster(), Policy())
    init = get_in(result.patched, (*SCHED, "initContainers"))
    assert [c["name"] for c in init] == ["gpu-parity-probe", "gpu-parity-check"]
    assert evaluate(result.patched, Policy()).findings == ()


INVENTORY = Inventory.from_nodes(nodes())


def test_dgp014_pins_the_class_with_most_gpus() -> None:
    doc = example("gpu-cluster-tcp.yaml")
    result = evaluate(doc, NO_VERIFY, INVENTORY)
    [pin] = [f for f in result.findings if f.code == "DGP014"]
    assert "580.95.05" in pin.message
    for spec in (SCHED, ("spec", "worker", "spec")):
        terms = get_in(
            result.patched,
            (
                *spec,
                "affinity",
                "nodeAffinity",
                "requiredDuringSchedulingIgnoredDuringExecution",
                "nodeSelectorTerms",
            ),
        )
        exprs = terms[0]["matchExpressions"]
        assert {
            "key": "nvidia.com/cuda.driver-version.full",
            "operator": "In",
            "values": ["580.95.05"],
        } in exprs
    fitting = INVENTORY.fitting(get_in(result.patched, SCHED))
    assert {n.name for n in fitting} == {"a100-0", "a100-1"}
    assert evaluate(result.patched, NO_VERIFY, INVENTORY).findings == ()


def test_dgp014_expected_driver_reaches_the_verifier() -> None:
    result = evaluate(example("gpu-cluster-tcp.yaml"), Policy(), INVENTORY)
    [_, init] = get_in(result.patched, (*SCHED, "initContainers"))
    assert {"name": "GPU_PARITY_EXPECT_DRIVER", "value": "580.95.05"} in init["env"]


def test_scheduler_pool_lands_on_t4_in_the_workers_class() -> None:
    policy = Policy(
        scheduler=SchedulerSettings(node_selector=(("nvidia.com/gpu.product", "Tesla-T4"),)),
        verifier=OFF,
    )
    result = evaluate(example("gpu-cluster-tcp.yaml"), policy, INVENTORY)
    assert "DGP013" not in [f.code for f in result.findings]
    assert [n.name for n in INVENTORY.fitting(get_in(result.patched, SCHED))] == ["t4-0"]


def test_dgp013_no_node_can_take_the_scheduler() -> None:
    result = evaluate(example("gpu-cluster-ucx.yaml"), NO_VERIFY, INVENTORY)
    [finding] = [f for f in result.findings if f.code == "DGP013"]
    assert finding.severity is Severity.ERROR
    assert not finding.fixable
    assert "Tesla-T4" in finding.message
    assert "570.172.08" in finding.message


def test_legacy_labels_pin_with_legacy_keys() -> None:
    legacy = [n for n in nodes() if n["metadata"]["name"] in ("a100-old-0", "a100-0")]
    doc = cluster(worker_extra={"tolerations": [GPU_TOLERATION]})
    result = evaluate(doc, NO_VERIFY, Inventory.from_nodes(legacy))
    [pin] = [f for f in result.findings if f.code == "DGP014"]
    assert pin.fixable
    inv = Inventory.from_nodes(legacy)
    assert len(inv.classes()) == 2
