"""The gateway webhooks' matchConditions, as the real API server evaluates them.

Expected, written before the run: a gateway DaskCluster costs one call (the mutating webhook,
which answers for validation) when a worker trait of ``spec.config`` names an extended resource
(in the container config's limits or requests, or on a worker sidecar), none when it names none,
has no worker traits or no config at all (never a CEL error, which would fail the create), or is
opted out. Inputs: ``tests/fixtures/gateway/`` (``KubeBackend.make_cluster_object``'s objects).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.e2e.webhook_calls import calls_for

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "gateway"
ONE_CALL = {"mutate-gateway-daskcluster": 1}


def _fixture(name: str, namespace: str) -> dict[str, Any]:
    document: dict[str, Any] = yaml.safe_load((FIXTURES / name).read_text())
    document["metadata"]["namespace"] = namespace
    return document


def _cases(namespace: str) -> dict[str, tuple[dict[str, Any], dict[str, float]]]:
    gpu = _fixture("gw-crd-gpu-option.yaml", namespace)
    cpu = _fixture("gw-crd-cpu.yaml", namespace)

    def variant(doc: dict[str, Any], **config: Any) -> dict[str, Any]:
        doc = copy.deepcopy(doc)
        doc["spec"]["config"].update(config)
        return doc

    requests_only = variant(
        gpu, worker_extra_container_config={"resources": {"requests": {"nvidia.com/gpu": 1}}}
    )
    sidecar = variant(
        gpu,
        worker_extra_container_config={},
        worker_extra_pod_config={
            "containers": [{"name": "side", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]
        },
    )
    pinned = variant(gpu, scheduler_extra_container_config={"image": "other/image:1"})
    bare = copy.deepcopy(cpu)
    bare["spec"]["config"] = {"image": "daskgateway/dask-gateway:latest"}
    no_config = copy.deepcopy(cpu)
    del no_config["spec"]["config"]
    opted = copy.deepcopy(gpu)
    opted["metadata"]["annotations"] = {"gpuparity.dask.org/skip": "true"}
    return {
        "gpu-option": (gpu, ONE_CALL),
        "gpu-in-requests-only": (requests_only, ONE_CALL),
        "gpu-on-a-worker-sidecar": (sidecar, ONE_CALL),
        "denied-scheduler-image": (pinned, ONE_CALL),  # the mutating webhook denies it
        "cpu": (cpu, {}),
        "no-worker-traits": (bare, {}),
        "no-config": (no_config, {}),
        "opted-out": (opted, {}),
    }


@pytest.mark.parametrize("case", list(_cases("x")))
def test_only_gpu_gateway_clusters_reach_the_operator(
    parity, gateway_crds, kubectl, namespace, case
):
    doc, expected = _cases(namespace)[case]
    assert calls_for(kubectl, doc) == expected
