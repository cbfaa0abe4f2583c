"""Drift by placement: verdicts, messages, the repin patch and what counts as news."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from dask_gpu_parity.admission.decide.placement import PodPlace, Tracker, check, repin
from dask_gpu_parity.core.inventory import DriverClass
from dask_gpu_parity.core.patch import apply_in_place

D580 = ("580.95.05", "13.0")
D570 = ("570.172.08", "12.8")


def dc(pair: tuple[str, str] | None) -> Any:
    return DriverClass(*pair) if pair else None


def apply(document: dict[str, Any], ops: list[Any]) -> dict[str, Any]:
    out = copy.deepcopy(document)
    apply_in_place(out, ops)
    return out


def place(pod: str, node: str, pair: tuple[str, str] | None) -> PodPlace:
    return PodPlace(pod, node, dc(pair))


@pytest.mark.parametrize(
    ("scheduler", "workers", "mismatch"),
    [
        pytest.param([D580], [D580, D580], False, id="all-one-class"),
        pytest.param([D570], [D580], True, id="scheduler-left-behind"),
        pytest.param([D570], [D570, D580], True, id="workers-straddle"),
        pytest.param([None], [D580], False, id="scheduler-without-driver-labels"),
        pytest.param([D580], [None, None], False, id="workers-without-driver-labels"),
        pytest.param([], [D580], False, id="no-scheduler-pod"),
        pytest.param([D580], [], False, id="no-worker-pod"),
        pytest.param([D570, D580], [D580], True, id="rollout-with-two-schedulers"),
    ],
)
def test_check(scheduler: list[Any], workers: list[Any], mismatch: bool) -> None:
    schedulers = [place(f"s{i}", f"n{i}", p) for i, p in enumerate(scheduler)]
    worker_places = [place(f"w{i}", f"m{i}", p) for i, p in enumerate(workers)]
    assert (check("ns", "c", schedulers, worker_places) is not None) == mismatch


def test_message_names_both_sides_and_what_to_do() -> None:
    found = check(
        "ns",
        "c",
        [place("c-scheduler-x", "h100-0001", D570)],
        [place(f"c-worker-{i}", f"h100-000{i + 2}", D580) for i in range(5)],
    )
    assert found is not None
    assert found.target == dc(D580)
    text = found.message(repairing=False)
    assert text.startswith(
        "Scheduler pod c-scheduler-x runs on node h100-0001 with driver 570.172.08 / CUDA 12.8, "
        "but its workers run on driver 580.95.05 / CUDA 13.0 (5 pods: c-worker-0 on h100-0002, "
        "c-worker-1 on h100-0003, c-worker-2 on h100-0004 and 2 more)"
    )
    assert "no longer match its workers' (a driver upgrade in flight?)" in text
    assert "Restart the scheduler on driver 580.95.05 / CUDA 13.0" in text
    assert "spec.drift.repair" in text
    assert "Repairing: pinning the scheduler Deployment to driver 580.95.05" in found.message(
        repairing=True
    )


def test_straddling_workers_are_not_repaired() -> None:
    found = check(
        "ns", "c", [place("s", "n0", D570)], [place("w0", "n0", D570), place("w1", "n1", D580)]
    )
    assert found is not None
    assert found.target is None
    assert "nothing is repaired until they run on one" in found.message(repairing=True)


def test_repin_replaces_a_driver_pin_and_keeps_the_rest() -> None:
    template = {
        "containers": [{"name": "scheduler"}],
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {
                                    "key": "nvidia.com/gpu.product",
                                    "operator": "In",
                                    "values": ["H100"],
                                },
                                {
                                    "key": "nvidia.com/cuda.driver-version.full",
                                    "operator": "In",
                                    "values": ["570.172.08"],
                                },
                                {
                                    "key": "nvidia.com/cuda.driver.major",
                                    "operator": "In",
                                    "values": ["570"],
                                },
                            ]
                        }
                    ]
                }
            }
        },
    }
    ops = repin(template, dc(D580))
    assert all(op["path"].startswith("/spec/template/spec/") for op in ops)
    fixed = apply({"spec": {"template": {"spec": template}}}, ops)["spec"]["template"]["spec"]
    (term,) = fixed["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"][
        "nodeSelectorTerms"
    ]
    assert term["matchExpressions"] == [
        {"key": "nvidia.com/gpu.product", "operator": "In", "values": ["H100"]},
        {"key": "nvidia.com/cuda.driver-version.full", "operator": "In", "values": ["580.95.05"]},
        {"key": "nvidia.com/cuda.runtime-version.full", "operator": "In", "values": ["13.0"]},
    ]
    assert template["affinity"]["nodeAffinity"]  # the input is not changed
    again = apply({"spec": {"template": {"spec": fixed}}}, repin(fixed, dc(D580)))
    assert again["spec"]["template"]["spec"] == fixed  # idempotent


def test_repin_without_affinity_adds_one_term() -> None:
    ops = repin({"containers": [{"name": "scheduler"}]}, dc(D580))
    fixed = apply({"spec": {"template": {"spec": {"containers": [{"name": "scheduler"}]}}}}, ops)
    terms = fixed["spec"]["template"]["spec"]["affinity"]["nodeAffinity"][
        "requiredDuringSchedulingIgnoredDuringExecution"
    ]["nodeSelectorTerms"]
    assert [e["values"] for e in terms[0]["matchExpressions"]] == [["580.95.05"], ["13.0"]]


def legacy(driver: str, cuda: str) -> list[dict[str, Any]]:
    """A pin on the GFD labels older than v0.15.0 (nvidia.md §1: major, minor, rev)."""
    major, minor, rev = driver.split(".")
    cmajor, cminor = cuda.split(".")
    pairs = [("driver.major", major), ("driver.minor", minor), ("driver.rev", rev)]
    pairs += [("runtime.major", cmajor), ("runtime.minor", cminor)]
    return [{"key": f"nvidia.com/cuda.{k}", "operator": "In", "values": [v]} for k, v in pairs]


def one_term(exprs: list[dict[str, Any]]) -> dict[str, Any]:
    required = {"nodeSelectorTerms": [{"matchExpressions": exprs}]}
    return {
        "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": required}}
    }


def repinned(template: dict[str, Any], ops: list[Any]) -> list[Any]:
    fixed = apply({"spec": {"template": {"spec": template}}}, ops)["spec"]["template"]["spec"]
    required = fixed["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    return [t["matchExpressions"] for t in required["nodeSelectorTerms"]]


def test_repin_keeps_the_legacy_labels_of_a_scheduler_pinned_on_them() -> None:
    product = {"key": "nvidia.com/gpu.product", "operator": "In", "values": ["H100"]}
    template = one_term([product, *legacy(*D570)])
    assert repinned(template, repin(template, dc(D580))) == [[product, *legacy(*D580)]]


def test_repin_uses_the_legacy_labels_where_the_class_nodes_have_only_those() -> None:
    template = {"containers": [{"name": "scheduler"}]}
    assert repinned(template, repin(template, dc(D580), legacy=True)) == [legacy(*D580)]
    assert repinned(one_term(legacy(*D570)), repin(one_term(legacy(*D570)), dc(D580), False)) == [
        [
            {
                "key": "nvidia.com/cuda.driver-version.full",
                "operator": "In",
                "values": ["580.95.05"],
            },
            {"key": "nvidia.com/cuda.runtime-version.full", "operator": "In", "values": ["13.0"]},
        ]
    ]


def test_tracker_reports_changes_of_classes_not_of_pods() -> None:
    tracker = Tracker()
    first = check("ns", "c", [place("s", "n0", D570)], [place("w0", "n1", D580)])
    assert tracker.update("ns", "c", first) == (True, None)
    assert tracker.counts() == {"ns": 1}
    moved = check(
        "ns", "c", [place("s", "n0", D570)], [place("w0", "n2", D580), place("w1", "n3", D580)]
    )
    assert tracker.update("ns", "c", moved) == (False, first)  # same classes: no new Event
    straddling = check(
        "ns", "c", [place("s", "n0", D570)], [place("w0", "n2", D580), place("w1", "n0", D570)]
    )
    news, before = tracker.update("ns", "c", straddling)
    assert news
    assert before == moved
    assert tracker.update("ns", "c", None) == (True, straddling)  # restored
    assert tracker.counts() == {}
    assert tracker.update("ns", "c", None) == (False, None)
    tracker.update("ns", "c", first)
    tracker.forget("ns", "c")
    assert tracker.counts() == {}
