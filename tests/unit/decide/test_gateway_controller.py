"""The gateway's own code around our mutating webhook, without a cluster.

``KubeBackend.make_cluster_object`` builds the DaskCluster for a user's options (the
administrator's ``provingground.gateway.ADMIN_OPTIONS``, loaded as the gateway loads its config
file); ``decisions.mutate`` answers as the webhook does; ``KubeController.make_pod`` builds the
scheduler Pod from the mutated ``spec.config``, as the controller does on the cluster. Expected,
written before the run: the Pod requests the workers' GPU, runs their image, tolerates the GPU
taint, selects their product and starts with the verifier; a CPU cluster's object is not changed.
dask-gateway-server comes from the ``test`` extra; without it this module skips (fails under CI).
"""

from __future__ import annotations

import asyncio
import importlib.util
import os
from pathlib import Path
from typing import Any

import pytest

from dask_gpu_parity.admission.decide import decisions
from dask_gpu_parity.core.policy import Policy
from provingground.gateway import ADMIN_OPTIONS, GATEWAY_IMAGE, RAPIDS_IMAGE, gateway_config

if importlib.util.find_spec("dask_gateway_server") is None:
    REASON = "dask-gateway-server is not installed: pip install -e '.[test]'"
    if os.environ.get("CI"):
        pytest.fail(f"{REASON} (CI is set: these tests must run)", pytrace=False)
    pytest.skip(REASON, allow_module_level=True)

from dask_gateway_server.backends.kubernetes.backend import KubeBackend
from dask_gateway_server.backends.kubernetes.controller import KubeController
from dask_gateway_server.utils import FrozenAttrDict
from traitlets.config.loader import PyFileConfigLoader


class _User:
    name = "alice"
    groups: tuple[str, ...] = ()
    admin = False


@pytest.fixture(scope="module")
def config(tmp_path_factory: pytest.TempPathFactory) -> Any:
    path: Path = tmp_path_factory.mktemp("gateway") / "dask_gateway_config.py"
    path.write_text(
        gateway_config(
            namespace="team",
            instance="gw-team",
            api_port=8000,
            controller_port=8001,
            options=ADMIN_OPTIONS,
        )
    )
    return PyFileConfigLoader(str(path)).load_config()


def _cluster_object(config: Any, options: dict[str, Any]) -> dict[str, Any]:
    backend = KubeBackend(config=config)
    chosen, cluster_config = asyncio.run(backend.process_cluster_options(_User(), options))
    document: dict[str, Any] = backend.make_cluster_object("alice", chosen, cluster_config)
    return document


def _scheduler_pod(config: Any, document: dict[str, Any]) -> dict[str, Any]:
    controller = KubeController(config=config)
    name = document["metadata"]["name"]
    pod: dict[str, Any] = controller.make_pod(
        "team", name, FrozenAttrDict(document["spec"]["config"])
    )
    return pod


def test_the_controller_builds_a_scheduler_with_parity_from_the_mutated_cluster(
    config: Any,
) -> None:
    document = _cluster_object(config, {"gpu": "a100"})
    before = _scheduler_pod(config, document)["spec"]
    assert before["containers"][0]["image"] == GATEWAY_IMAGE  # what the options alone give
    assert "nvidia.com/gpu" not in before["containers"][0]["resources"]["limits"]
    decision = decisions.mutate(document, Policy(), None)
    assert decision.denial is None
    spec = _scheduler_pod(config, decision.patched)["spec"]
    (main,) = spec["containers"]
    assert main["name"] == "dask-scheduler"
    assert main["image"] == RAPIDS_IMAGE
    assert main["resources"]["limits"]["nvidia.com/gpu"] == "1"
    assert (
        main["resources"]["requests"]["cpu"]
        == before["containers"][0]["resources"]["requests"]["cpu"]
    )  # the gateway's own settings survive the merge
    assert spec["nodeSelector"] == {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}
    assert {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"} in spec[
        "tolerations"
    ]
    assert [c["name"] for c in spec["initContainers"]] == ["gpu-parity-probe", "gpu-parity-check"]
    assert [v["name"] for v in spec["volumes"]] == ["dask-credentials", "gpu-parity-probe"]
    worker = KubeController(config=config).make_pod(
        "team", "c", FrozenAttrDict(decision.patched["spec"]["config"]), is_worker=True
    )["spec"]
    assert (
        worker
        == KubeController(config=config).make_pod(
            "team", "c", FrozenAttrDict(document["spec"]["config"]), is_worker=True
        )["spec"]
    )  # the workers are built as the options made them


def test_a_cpu_cluster_object_is_not_changed(config: Any) -> None:
    document = _cluster_object(config, {})
    decision = decisions.mutate(document, Policy(), None)
    assert (decision.patched, decision.patch, decision.warnings) == (None, (), ())
