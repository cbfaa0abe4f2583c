"""Which container holds a GPU, and which GPU requests the API server admits.

Expected verdicts, written before the code:

1. A scheduler pod whose only GPU is on a sidecar has no scheduler GPU: DGP001 on the container
   that runs ``dask-scheduler``; ``fix`` gives *that* container the GPU, then ``check`` passes.
2. A GPU DaskWorkerGroup without ``metadata.namespace`` and its DaskCluster written with
   ``namespace: default`` are in one namespace (kubectl puts both in ``default``): DGP015.
3. A scheduler pod spec with ``containers: []`` is an error (DGP017): the DaskCluster CRD requires
   the key but sets no ``minItems``, so the API server admits the DaskCluster, and the dask
   operator copies ``spec.scheduler.spec`` verbatim into the scheduler Deployment's
   ``template.spec`` (dask-kubernetes ``build_scheduler_deployment_spec``;
   /work/shared/reference/dask-kubernetes.md "Scheduler = Deployment"), which the API server
   refuses: ``validateContainers`` in k8s.io/kubernetes ``pkg/apis/core/validation/validation.go``
   returns ``field.Required`` for an empty list (``spec.template.spec.containers: Required value``).
4. GPU quantities the API server refuses (k8s ``validateResourceRequirements`` and
   ``ValidateResourceQuantityValue`` in ``pkg/apis/core/validation/validation.go``; Kubernetes
   docs "Schedule GPUs", https://kubernetes.io/docs/tasks/manage-gpus/scheduling-gpus/, and
   "Device Plugins", https://kubernetes.io/docs/concepts/extend-kubernetes/compute-storage-net/device-plugins/):
   extended resources are integers only (``must be an integer``); with both set, the request must
   equal the limit (``must be equal to nvidia.com/gpu limit``); a request without a limit is
   refused (``Limit must be set for non overcommitable resources``). Such a scheduler GPU is no
   GPU, and the finding (DGP024) says the Pod is refused. A worker with such a request is still a
   GPU worker (it is what the user meant), and gets DGP024 too.
5. Workers that run ``dask-cuda-worker`` / ``dask cuda worker`` and request no GPU are GPU workers
   in intent: DGP025 (kube-scheduler neither counts nor places the GPUs they use).
6. A CPU-only DaskCluster with a GPU DaskWorkerGroup: ``fix`` never changes the CPU-only cluster,
   so DGP015 must not send the user to ``fix``; it names the scheduler container's ``limits`` to
   set by hand.
7. ``--extended-resource-toleration auto|enabled`` act as such, not as ``disabled``: on GKE (which
   enables the ExtendedResourceToleration plugin) workers that request ``nvidia.com/gpu`` tolerate
   the ``nvidia.com/gpu=present:NoSchedule`` taint, so only ``disabled`` gives DGP022.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from .helpers import ROOT, cluster
from .reports import cli

INVENTORIES = ROOT / "tests" / "fixtures" / "inventories"
GPU = "nvidia.com/gpu"
SCHEDULER = "/spec/scheduler/spec/containers"
WORKER = "/spec/worker/spec/containers"


def _write(tmp_path: Path, *documents: dict[str, Any], name: str = "c.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump_all(documents, sort_keys=False))
    return path


def _findings(path: Path, *flags: str) -> tuple[int, list[dict[str, Any]]]:
    code, out, err = cli(["check", str(path), "-o", "json", *flags])
    assert code in (0, 1), err
    return code, json.loads(out)["findings"]


def _codes(findings: list[dict[str, Any]]) -> list[str]:
    return sorted(f["code"] for f in findings)


# --- 2. namespaces as kubectl resolves them ----------------------------------------------------


def _group(namespace: str | None) -> dict[str, Any]:
    group: dict[str, Any] = yaml.safe_load((ROOT / "examples" / "gpu-workergroup.yaml").read_text())
    group["spec"]["cluster"] = "c"
    if namespace is not None:
        group["metadata"]["namespace"] = namespace
    return group


def _cpu_cluster(namespace: str | None) -> dict[str, Any]:
    doc = cluster(worker_resources={}, worker_container={"args": ["dask-worker"]})
    if namespace is None:
        del doc["metadata"]["namespace"]
    else:
        doc["metadata"]["namespace"] = namespace
    return doc


@pytest.mark.parametrize(
    ("cluster_ns", "group_ns", "dgp015"),
    [
        ("default", None, True),
        (None, "default", True),
        (None, None, True),
        ("default", "default", True),
        ("team-a", None, False),
        (None, "team-a", False),
    ],
    ids=[
        "cluster-default",
        "group-default",
        "both-absent",
        "both-default",
        "other-ns",
        "other-ns-2",
    ],
)
def test_worker_group_meets_its_cluster_in_the_namespace_kubectl_would_put_it(
    tmp_path: Path, cluster_ns: str | None, group_ns: str | None, dgp015: bool
) -> None:
    path = _write(tmp_path, _cpu_cluster(cluster_ns), _group(group_ns))
    code, findings = _findings(path)
    assert ("DGP015" in _codes(findings)) is dgp015
    assert code == int(dgp015)


# --- 7. --extended-resource-toleration takes its value ------------------------------------------


@pytest.mark.parametrize(
    ("value", "unschedulable"),
    [("auto", False), ("enabled", False), ("disabled", True)],
)
def test_extended_resource_toleration_flag_takes_its_value_on_gke(
    tmp_path: Path, value: str, unschedulable: bool
) -> None:
    # W13·N of tests/fixtures/inventories/EXPECTED.md §3: RAPIDS CUDA 13 workers requesting
    # nvidia.com/gpu with no toleration, on GKE pools tainted nvidia.com/gpu=present:NoSchedule;
    # the scheduler already has its GPU, so only placement can fail.
    doc = cluster(
        scheduler_resources={"limits": {GPU: "1"}},
        worker_container={"image": "rapidsai/base:25.10-cuda13.0-py3.12"},
        scheduler_container={"image": "rapidsai/base:25.10-cuda13.0-py3.12"},
    )
    path = _write(tmp_path, doc)
    nodes = str(INVENTORIES / "gke-gpu-pools.yaml")
    argv = ["--extended-resource-toleration", value, "--nodes", nodes]
    code, findings = _findings(path, *argv)
    assert ("DGP022" in _codes(findings)) is unschedulable
    assert code == int(unschedulable)
