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

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from dask_gpu_parity.core.engine import evaluate
from dask_gpu_parity.core.findings import RULES, Severity
from tests.unit.helpers import ROOT, cluster
from tests.unit.reports import cli

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


# --- 1. the scheduler container, not a sidecar, holds the GPU ---------------------------------

# A log-shipping sidecar beside the scheduler, as in the Kubernetes "Sidecar containers" pattern;
# the GPU on it is what the bug counted as the scheduler's.
_SIDECAR = {"name": "log-shipper", "image": "fluent/fluent-bit:3.1", "resources": {}}


def _sidecar_gpu_cluster(scheduler_first: bool) -> dict[str, Any]:
    doc = cluster()
    sidecar = copy.deepcopy(_SIDECAR)
    sidecar["resources"] = {"limits": {GPU: "1"}}
    containers = doc["spec"]["scheduler"]["spec"]["containers"]
    doc["spec"]["scheduler"]["spec"]["containers"] = (
        [*containers, sidecar] if scheduler_first else [sidecar, *containers]
    )
    return doc


@pytest.mark.parametrize("scheduler_first", [True, False], ids=["sidecar-after", "sidecar-first"])
def test_a_sidecars_gpu_is_not_the_schedulers_and_fix_gives_the_scheduler_one(
    tmp_path: Path, scheduler_first: bool
) -> None:
    path = _write(tmp_path, _sidecar_gpu_cluster(scheduler_first))
    index = 0 if scheduler_first else 1
    code, findings = _findings(path)
    assert code == 1
    dgp001 = [f for f in findings if f["code"] == "DGP001"]
    assert [f["path"] for f in dgp001] == [f"{SCHEDULER}/{index}/resources"]

    code, out, _ = cli(["fix", str(path)])
    assert code == 0
    fixed = yaml.safe_load(out)
    containers = fixed["spec"]["scheduler"]["spec"]["containers"]
    assert containers[index]["name"] == "scheduler"
    assert containers[index]["resources"]["limits"][GPU] == "1"
    assert containers[1 - index]["resources"] == {"limits": {GPU: "1"}}  # the sidecar's, kept
    again = _write(tmp_path, fixed, name="fixed.yaml")
    assert _findings(again)[0] == 0


def test_the_container_running_dask_scheduler_is_the_scheduler_whatever_its_name() -> None:
    doc = cluster()
    scheduler = doc["spec"]["scheduler"]["spec"]["containers"][0]
    scheduler["name"] = "main"
    scheduler["command"] = ["dask", "scheduler"]
    sidecar = {"name": "proxy", "image": "envoyproxy/envoy:v1.31", "resources": {"limits": {}}}
    sidecar["resources"]["limits"][GPU] = "1"
    doc["spec"]["scheduler"]["spec"]["containers"] = [sidecar, scheduler]
    result = evaluate(doc)
    assert [f.path for f in result.findings if f.code == "DGP001"] == [f"{SCHEDULER}/1/resources"]


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


# --- 3. a scheduler with no containers ---------------------------------------------------------


def test_a_scheduler_pod_spec_without_containers_is_an_error(tmp_path: Path) -> None:
    doc = cluster()
    doc["spec"]["scheduler"]["spec"]["containers"] = []
    code, findings = _findings(_write(tmp_path, doc))
    assert code == 1
    assert [(f["code"], f["path"], f["severity"]) for f in findings] == [
        ("DGP017", SCHEDULER, "error")
    ]
    assert "Required value" in findings[0]["message"]


def test_a_cpu_cluster_without_scheduler_containers_is_an_error_too() -> None:
    doc = _cpu_cluster("ns")
    doc["spec"]["scheduler"]["spec"]["containers"] = []
    result = evaluate(doc)
    assert [(f.code, f.path) for f in result.findings] == [("DGP017", SCHEDULER)]
    assert not result.changed


# --- 4. GPU quantities the API server refuses ---------------------------------------------------

_REFUSED = [
    pytest.param({"requests": {GPU: "1"}}, "Limit must be set", id="requests-only"),
    pytest.param({"limits": {GPU: "0.5"}}, "must be an integer", id="half"),
    pytest.param({"limits": {GPU: "500m"}}, "must be an integer", id="500m"),
    pytest.param({"limits": {GPU: "2"}, "requests": {GPU: "1"}}, "must be equal", id="req-ne-lim"),
]


@pytest.mark.parametrize(("resources", "says"), _REFUSED)
def test_a_refused_scheduler_gpu_is_no_gpu(tmp_path: Path, resources: Any, says: str) -> None:
    path = _write(tmp_path, cluster(scheduler_resources=resources))
    code, findings = _findings(path)
    assert code == 1
    refused = [f for f in findings if f["code"] == "DGP024"]
    assert [f["path"].rsplit("/", 2)[0] for f in refused] == [f"{SCHEDULER}/0/resources"]
    assert says in refused[0]["message"]
    assert refused[0]["severity"] == "error"
    assert not any(f["code"] == "DGP009" for f in findings)  # no verifier for a refused GPU


@pytest.mark.parametrize(("resources", "says"), _REFUSED)
def test_a_worker_with_a_refused_gpu_request_is_a_gpu_worker_and_is_told_so(
    resources: Any, says: str
) -> None:
    result = evaluate(cluster(worker_resources=resources))
    codes = [f.code for f in result.findings]
    assert "DGP001" in codes  # a GPU cluster: the scheduler is still given a GPU
    refused = [f for f in result.findings if f.code == "DGP024"]
    assert len(refused) == 1
    assert refused[0].path.startswith(f"{WORKER}/0/resources/")
    assert says in refused[0].message
    assert refused[0].severity is Severity.ERROR
    assert not refused[0].fixable


@pytest.mark.parametrize(
    "resources",
    [
        {"limits": {GPU: "1"}},
        {"limits": {GPU: "1"}, "requests": {GPU: "1"}},
        {"limits": {GPU: "1"}, "requests": {GPU: "1000m"}},  # equal quantities
        {"limits": {GPU: "2.0"}},
    ],
    ids=["limits", "both-equal", "equal-spelled-apart", "two-point-zero"],
)
def test_an_admitted_scheduler_gpu_counts(resources: Any) -> None:
    result = evaluate(cluster(scheduler_resources=resources))
    codes = {f.code for f in result.findings}
    assert not codes & {"DGP001", "DGP024"}


# --- 5. dask-cuda-worker with no GPU request ----------------------------------------------------


@pytest.mark.parametrize(
    "container",
    [
        {"args": ["dask-cuda-worker", "--rmm-pool-size", "10GB"]},
        {"command": ["dask", "cuda", "worker"]},
        {"command": ["/bin/sh", "-c"], "args": ["exec dask cuda worker --nthreads 1"]},
    ],
    ids=["dask-cuda-worker", "dask-cuda-worker-subcommand", "in-a-shell"],
)
def test_cuda_workers_without_a_gpu_request_are_gpu_workers_in_intent(
    tmp_path: Path, container: dict[str, Any]
) -> None:
    doc = cluster(worker_resources={}, worker_container={"args": [], **container})
    code, findings = _findings(_write(tmp_path, doc))
    assert code == 1
    assert _codes(findings) == ["DGP025"]
    assert findings[0]["path"] == f"{WORKER}/0"
    assert GPU in findings[0]["message"]


def test_cuda_workers_without_a_gpu_request_beside_a_gpu_scheduler_are_a_warning() -> None:
    doc = cluster(worker_resources={}, scheduler_resources={"limits": {GPU: "1"}})
    findings = evaluate(doc).findings
    assert [(f.code, f.severity) for f in findings] == [("DGP025", Severity.WARNING)]


def test_a_plain_dask_worker_without_gpu_is_a_cpu_worker() -> None:
    doc = cluster(worker_resources={}, worker_container={"args": ["dask-worker"]})
    assert evaluate(doc).findings == ()


def test_a_cuda_worker_group_without_gpu_request_is_reported() -> None:
    group = _group(None)
    container = group["spec"]["worker"]["spec"]["containers"][0]
    container["args"] = ["dask", "cuda", "worker"]
    container["resources"] = {}
    assert [f.code for f in evaluate(group).findings] == ["DGP025"]


def test_new_codes_are_in_the_one_table() -> None:
    assert RULES["DGP024"].severity is Severity.ERROR
    assert RULES["DGP025"].severity is Severity.ERROR
    assert not RULES["DGP024"].fixable
    assert not RULES["DGP025"].fixable


# --- 6. a hybrid cluster: the advice must not loop ---------------------------------------------


def test_hybrid_cluster_advice_is_what_resolves_it_not_fix(tmp_path: Path) -> None:
    path = _write(tmp_path, _cpu_cluster("ns"), _group("ns"))
    _, findings = _findings(path)
    (dgp015,) = [f for f in findings if f["code"] == "DGP015"]
    message = dgp015["message"]
    assert "dask-gpu-parity fix on the DaskCluster" not in message
    assert f"{SCHEDULER}/0/resources/limits" in message
    assert f'{GPU}: "1"' in message
    # fix indeed leaves the CPU-only cluster as it is: the advice must be a change by hand
    code, out, err = cli(["fix", str(path)])
    assert code == 0
    assert next(iter(yaml.safe_load_all(out))) == _cpu_cluster("ns")
    assert "need a change by hand" in err


def test_worker_group_joining_a_cluster_whose_scheduler_sidecar_has_the_gpu_is_dgp015() -> None:
    doc = _sidecar_gpu_cluster(scheduler_first=True)
    doc["spec"]["worker"]["spec"]["containers"][0]["resources"] = {}
    result = evaluate(_group("ns"), cluster=doc)
    assert [f.code for f in result.findings] == ["DGP015"]


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
