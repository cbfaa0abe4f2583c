"""Behaviours of the other deployers and of DGP029, through ``evaluate`` (the pure core).

Inputs follow the deployers' documentation: the gateway's ``KubeClusterConfig`` traits and
``make_pod`` merge (dask/dask-gateway ``backends/kubernetes``), the classic chart's values keys
and Deployment labels (dask/helm-chart ``dask`` chart), RAPIDS' image tags (docs.rapids.ai).
"""

from __future__ import annotations

from typing import Any

import pytest

from dask_gpu_parity.core.engine import evaluate
from dask_gpu_parity.core.resources import view

RAPIDS = "nvcr.io/nvidia/rapidsai/base:25.10-cuda12.9-py3.12"  # docs.rapids.ai image tags
GPU = {"limits": {"nvidia.com/gpu": "1"}}


def _job(runner: dict[str, Any], *, worker_gpu: bool = True) -> dict[str, Any]:
    worker: dict[str, Any] = {"name": "worker", "image": RAPIDS, "args": ["dask-cuda-worker"]}
    if worker_gpu:
        worker["resources"] = GPU
    return {
        "apiVersion": "kubernetes.dask.org/v1",
        "kind": "DaskJob",
        "metadata": {"name": "etl"},
        "spec": {
            "job": {"spec": {"containers": [runner]}},
            "cluster": {
                "spec": {
                    "scheduler": {
                        "spec": {"containers": [{"name": "scheduler", "image": RAPIDS}]},
                        "service": {},
                    },
                    "worker": {"spec": {"containers": [worker]}},
                }
            },
        },
    }


def _codes(result: Any, code: str) -> list[Any]:
    return [f for f in result.findings if f.code == code]


def _runner_env(document: dict[str, Any]) -> Any:
    return document["spec"]["job"]["spec"]["containers"][0].get("env")


def test_a_cuda_runner_without_a_gpu_is_given_void() -> None:
    result = evaluate(_job({"name": "job", "image": RAPIDS, "args": ["python", "submit.py"]}))
    (finding,) = _codes(result, "DGP029")
    assert finding.fixable
    assert finding.path == "/spec/job/spec/containers/0/env"
    assert _runner_env(result.patched) == [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}]
    assert not _codes(evaluate(result.patched), "DGP029")


def test_a_value_the_user_wrote_is_reported_not_overwritten() -> None:
    env = [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]
    result = evaluate(_job({"name": "job", "image": RAPIDS, "env": env}))
    (finding,) = _codes(result, "DGP029")
    assert not finding.fixable
    assert _runner_env(result.patched) == env


@pytest.mark.parametrize(
    "runner",
    [
        pytest.param({"name": "job", "image": RAPIDS, "resources": GPU}, id="requests-a-gpu"),
        pytest.param({"name": "job", "image": "python:3.12"}, id="not-a-cuda-image"),
        pytest.param(
            {
                "name": "job",
                "image": RAPIDS,
                "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}],
            },
            id="already-void",
        ),
    ],
)
def test_runners_that_cannot_see_stray_gpus_get_no_finding(runner: dict[str, Any]) -> None:
    assert not _codes(evaluate(_job(runner)), "DGP029")


def test_a_cpu_only_cluster_is_never_judged_nor_changed() -> None:
    document = _job({"name": "job", "image": RAPIDS}, worker_gpu=False)
    document["spec"]["cluster"]["spec"]["worker"]["spec"]["containers"][0]["args"] = ["dask-worker"]
    result = evaluate(document)
    assert not _codes(result, "DGP029")
    assert not result.changed


def test_a_runner_that_runs_cuda_code_is_told_to_request_a_gpu() -> None:
    runner = {"name": "job", "image": RAPIDS, "args": ["python", "-c", "import cudf"]}
    result = evaluate(_job(runner))
    (finding,) = _codes(result, "DGP029")
    assert not finding.fixable
    assert "request one in limits" in finding.message
    assert _runner_env(result.patched) is None


def _gateway(config: dict[str, Any]) -> dict[str, Any]:
    """A gateway DaskCluster as KubeBackend.make_cluster_object writes it."""
    return {
        "apiVersion": "gateway.dask.org/v1alpha1",
        "kind": "DaskCluster",
        "metadata": {"name": "abc", "namespace": "gw"},
        "spec": {"username": "u", "options": {}, "config": config},
    }


def test_a_gateway_scheduler_sidecar_is_fixed_in_the_extra_pod_config() -> None:
    sidecar = {"name": "log-shipper", "image": RAPIDS}
    config = {
        "image": RAPIDS,
        "scheduler_extra_pod_config": {"containers": [sidecar]},  # appended after dask-scheduler
        "scheduler_extra_container_config": {},
        "worker_extra_pod_config": {},
        "worker_extra_container_config": {"resources": GPU},
    }
    result = evaluate(_gateway(config))
    (finding,) = _codes(result, "DGP029")
    assert finding.path == "/spec/config/scheduler_extra_pod_config/containers/0/env"
    fixed = result.patched["spec"]["config"]
    assert fixed["scheduler_extra_pod_config"]["containers"][0]["env"] == [
        {"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}
    ]
    assert fixed["scheduler_extra_container_config"]["resources"] == GPU
    assert evaluate(result.patched).patched == result.patched


def test_a_gateway_cluster_whose_scheduler_already_matches_is_left_alone() -> None:
    matching = {"resources": GPU}
    config = {
        "image": RAPIDS,
        "scheduler_extra_container_config": matching,
        "worker_extra_container_config": matching,
    }
    fixed = evaluate(_gateway(config)).patched
    again = evaluate(fixed)
    assert again.patched == fixed
    assert not [f for f in again.findings if f.fixable]


def _chart(component: str, release: str, container: dict[str, Any]) -> dict[str, Any]:
    labels = {"app": "dask", "release": release, "component": component}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": f"{release}-dask-{component}", "labels": labels},
        "spec": {"template": {"metadata": {"labels": labels}, "spec": {"containers": [container]}}},
    }


def test_a_chart_scheduler_is_judged_only_against_its_own_release() -> None:
    scheduler = _chart("scheduler", "a", {"name": "s", "image": RAPIDS, "args": ["dask-scheduler"]})
    other = _chart("worker", "b", {"name": "w", "image": RAPIDS, "resources": GPU})
    alone = evaluate(scheduler, peers=[scheduler, other])
    assert not alone.findings
    assert not alone.changed
    mine = _chart("worker", "a", {"name": "w", "image": RAPIDS, "resources": GPU})
    paired = evaluate(scheduler, peers=[scheduler, other, mine])
    assert {f.code for f in paired.findings} >= {"DGP001"}


def test_a_chart_scheduler_image_the_user_wrote_is_not_overwritten() -> None:
    values = {
        "scheduler": {"image": {"repository": "ghcr.io/dask/dask", "tag": "2023.10.1"}},
        "worker": {
            "image": {"repository": "rapidsai/base", "tag": "25.10-cuda12.9-py3.12"},
            "resources": GPU,
        },
    }
    result = evaluate(values)
    (finding,) = _codes(result, "DGP003")
    assert not finding.fixable
    assert result.patched["scheduler"]["image"] == values["scheduler"]["image"]


@pytest.mark.parametrize(
    "document",
    [
        pytest.param({"scheduler": {"replicas": 1}, "workers": {"replicas": 2}}, id="airflow-like"),
        pytest.param({"gateway": {"service": {"type": "ClusterIP"}}}, id="some-other-gateway"),
        pytest.param({"worker": {"image": {"repository": "x"}}}, id="no-scheduler"),
    ],
)
def test_other_charts_values_are_not_dask_resources(document: dict[str, Any]) -> None:
    assert view(document) is None


def test_a_single_string_extra_config_is_read() -> None:
    values = {
        "gateway": {
            "backend": {"image": {"name": "rapidsai/base", "tag": "25.10-cuda12.9-py3.12"}},
            "extraConfig": (
                'c.KubeClusterConfig.worker_extra_container_config = {"resources": '
                '{"limits": {"nvidia.com/gpu": "1"}}}\n'
            ),
        }
    }
    result = evaluate(values)
    assert {f.code for f in result.findings} >= {"DGP001"}
    scheduler = result.patched["gateway"]["backend"]["scheduler"]
    assert scheduler["extraContainerConfig"]["resources"]["limits"]["nvidia.com/gpu"] == "1"
