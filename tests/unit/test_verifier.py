"""The injected ``gpu-parity-check`` init container."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from dask_gpu_parity import probe
from dask_gpu_parity.core import schema, verifier
from dask_gpu_parity.core.engine import evaluate
from dask_gpu_parity.core.inventory import Inventory
from dask_gpu_parity.core.plain import get_in
from dask_gpu_parity.core.policy import Policy

from .helpers import cluster, example, nodes

SCHED = ("spec", "scheduler", "spec")
RESTRICTED = {
    "runAsNonRoot": True,
    "allowPrivilegeEscalation": False,
    "capabilities": {"drop": ["ALL"]},
    "seccompProfile": {"type": "RuntimeDefault"},
}


def init_of(doc: dict[str, Any], policy: Policy | None = None, **kw: Any) -> dict[str, Any]:
    result = evaluate(doc, policy or Policy(), **kw)
    containers = get_in(result.patched, (*SCHED, "initContainers"))
    [init] = [c for c in containers if c["name"] == "gpu-parity-check"]
    return dict(init)


def test_probe_source_is_probe_py_byte_for_byte() -> None:
    init = init_of(cluster())
    source = Path(probe.__file__).read_text(encoding="utf-8")
    assert init["command"] == ["python", "-I", "-c", source]


def test_init_container_mirrors_the_scheduler() -> None:
    doc = cluster(
        scheduler_container={
            "image": "rapids:26.10",
            "env": [{"name": "CUDA_VISIBLE_DEVICES", "value": "0"}],
            "envFrom": [{"configMapRef": {"name": "dask-env"}}],
            "securityContext": RESTRICTED,
            "imagePullPolicy": "Always",
        },
        worker_container={"image": "rapids:26.10"},
    )
    init = init_of(doc)
    assert init["image"] == "rapids:26.10"
    assert init["env"] == [{"name": "CUDA_VISIBLE_DEVICES", "value": "0"}]
    assert init["envFrom"] == [{"configMapRef": {"name": "dask-env"}}]
    assert init["securityContext"] == RESTRICTED
    assert init["imagePullPolicy"] == "Always"
    assert init["terminationMessagePolicy"] == "FallbackToLogsOnError"
    assert init["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert init["resources"]["requests"] == {
        "nvidia.com/gpu": "1",
        "cpu": "100m",
        "memory": "256Mi",
    }
    assert "restartPolicy" not in init  # a native sidecar field the 1.21 CRD schema would prune


def test_same_gpu_resource_as_the_scheduler() -> None:
    doc = cluster(worker_resources={"limits": {"nvidia.com/mig-1g.10gb": "1"}})
    assert init_of(doc)["resources"]["limits"]["nvidia.com/mig-1g.10gb"] == "1"


def test_expectations_from_policy_and_inventory() -> None:
    policy = Policy(verifier_min_compute_capability="8.0")
    init = init_of(example("gpu-cluster-tcp.yaml"), policy, inventory=Inventory.from_nodes(nodes()))
    env = {e["name"]: e.get("value") for e in init["env"]}
    assert env[probe.ENV_EXPECT_DRIVER] == "580.95.05"
    assert env[probe.ENV_MIN_COMPUTE_CAPABILITY] == "8.0"
    assert env["EXTRA_PIP_PACKAGES"] == "xgboost==3.1.0"  # the scheduler's env, copied from workers


def test_expect_driver_can_be_turned_off() -> None:
    policy = Policy(verifier_expect_driver=False)
    init = init_of(example("gpu-cluster-tcp.yaml"), policy, inventory=Inventory.from_nodes(nodes()))
    assert probe.ENV_EXPECT_DRIVER not in {e["name"] for e in init.get("env", [])}


def test_own_image_runs_verify_gpu() -> None:
    init = init_of(
        cluster(), Policy(verifier_image="ghcr.io/dask-gpu-parity/dask-gpu-parity:0.1.0")
    )
    assert init["image"] == "ghcr.io/dask-gpu-parity/dask-gpu-parity:0.1.0"
    assert init["command"] == ["dask-gpu-parity", "verify-gpu"]


def test_disabled_verifier_injects_nothing() -> None:
    result = evaluate(cluster(), Policy(verifier_enabled=False))
    assert get_in(result.patched, (*SCHED, "initContainers")) is None


def test_user_init_containers_are_kept_and_the_check_runs_last() -> None:
    doc = cluster(scheduler_extra={"initContainers": [{"name": "download", "image": "busybox"}]})
    result = evaluate(doc, Policy())
    names = [c["name"] for c in get_in(result.patched, (*SCHED, "initContainers"))]
    assert names == ["download", "gpu-parity-check"]


@pytest.mark.parametrize("kind", ["DaskCluster", "DaskJob"])
def test_injected_container_is_schema_valid(kind: str) -> None:
    doc = example("gpu-cluster-tcp.yaml" if kind == "DaskCluster" else "gpu-daskjob.yaml")
    result = evaluate(doc, Policy(), Inventory.from_nodes(nodes()))
    assert schema.validate(result.patched, kind) == []


def test_env_names_are_the_probes() -> None:
    assert verifier.EXPECT_DRIVER in probe.ENV_VARS
    assert verifier.MIN_COMPUTE_CAPABILITY in probe.ENV_VARS
