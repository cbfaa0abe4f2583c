"""Each DaskGPUPolicy mode, through the real API server: enforce, warn, audit, off."""

from __future__ import annotations

import json
import re

import pytest

from provingground.parity import dask_object, eventually, example, policy_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]
# A marker only this test's policy produces, to know the policy reached the operator's index.
MIN_CC = "8.0"


def _scheduler(doc: dict) -> dict:
    return doc["spec"]["scheduler"]["spec"]


def _has_gpu(doc: dict) -> bool:
    return "nvidia.com/gpu" in json.dumps(_scheduler(doc)["containers"][0].get("resources", {}))


def _policy_in_force(parity, tcp: dict, mode: str) -> bool:
    fixed, warnings = parity.create(tcp, dry_run=True)
    if mode in ("enforce", "warn"):
        init = _scheduler(fixed).get("initContainers", [])
        return bool(init) and {"name": "GPU_PARITY_MIN_COMPUTE_CAPABILITY", "value": MIN_CC} in (
            init[-1].get("env", [])  # gpu-parity-check, after the gpu-parity-probe copy step
        )
    if mode == "audit":
        return bool(warnings) and all(w.startswith("dask-gpu-parity audit: ") for w in warnings)
    return not warnings


@pytest.mark.parametrize("mode", ["enforce", "warn", "audit", "off"])
def test_mode(parity, cluster, kubectl, namespace, apply_policy, mode):  # noqa: PLR0917 - fixtures
    apply_policy(policy_for(namespace, mode=mode, verifier={"minComputeCapability": MIN_CC}))
    tcp = example("gpu-cluster-tcp.yaml", namespace=namespace)
    ucx = example("gpu-cluster-ucx.yaml", namespace=namespace)
    for doc in (tcp, ucx):
        doc["spec"]["worker"]["replicas"] = 1  # GPUs are scarce on the proving ground
    eventually(lambda: _policy_in_force(parity, tcp, mode), what=f"policy mode {mode} in force")

    made_tcp = kubectl("apply", "-f", "-", input=json.dumps(tcp))
    made_ucx = kubectl("apply", "-f", "-", input=json.dumps(ucx))
    assert made_tcp.rc == 0, made_tcp.stderr
    stored_tcp = dask_object(cluster.api, namespace, "daskclusters", "rapids-tcp")
    codes = set(re.findall(r"\bDGP\d{3}\b", " ".join(made_tcp.warnings)))

    if mode == "enforce":  # mutate what is fixable, deny what is left
        assert _has_gpu(stored_tcp)
        assert {"DGP001", "DGP009"} <= codes, made_tcp.warnings
        assert made_ucx.rc != 0
        assert "DGP013 at /spec/scheduler/spec" in made_ucx.stderr
    elif mode == "warn":  # mutate, never deny: what is left is a warning
        assert _has_gpu(stored_tcp)
        assert {"DGP001", "DGP009"} <= codes, made_tcp.warnings
        assert made_ucx.rc == 0, made_ucx.stderr
        assert any(
            w.startswith("dask-gpu-parity: DGP013 /spec/scheduler/spec") for w in made_ucx.warnings
        ), made_ucx.warnings
        assert _has_gpu(dask_object(cluster.api, namespace, "daskclusters", "rapids-ucx"))
    elif mode == "audit":  # never mutate, never deny: report every finding
        assert not _has_gpu(stored_tcp)
        assert "initContainers" not in _scheduler(stored_tcp)
        assert made_tcp.warnings
        assert all(w.startswith("dask-gpu-parity audit: ") for w in made_tcp.warnings)
        assert "DGP001" in codes
        assert made_ucx.rc == 0, made_ucx.stderr
        assert any(" DGP013 " in w for w in made_ucx.warnings), made_ucx.warnings
        assert not _has_gpu(dask_object(cluster.api, namespace, "daskclusters", "rapids-ucx"))
    else:  # off: not a word, not a change
        assert not made_tcp.warnings
        assert not made_ucx.warnings
        assert made_ucx.rc == 0, made_ucx.stderr
        assert not _has_gpu(stored_tcp)
        assert "initContainers" not in _scheduler(stored_tcp)
