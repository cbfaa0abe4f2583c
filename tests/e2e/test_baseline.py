"""The baseline, observed on a real scheduler: with only the dask operator, a GPU DaskCluster's
scheduler Pod gets no GPU and lands away from the GPU pool its workers run on."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from kubernetes import client

from provingground import POOLS, format_table, wait_for_placements
from provingground.manifests import gpu_dask_cluster, load_gpu_examples, worker_replicas

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
A100 = POOLS["a100"]


def _baseline_manifest() -> tuple[str, dict]:
    """A DaskCluster from examples/ with A100 workers and a GPU-less scheduler, else built-in."""
    found, _ = load_gpu_examples(EXAMPLES) if EXAMPLES.is_dir() else ([], [])
    for path, doc in found:
        spec = doc.get("spec", {})
        sched = spec.get("scheduler", {}).get("spec", {}).get("containers", [])
        sched_gpu = any("nvidia.com" in str(c.get("resources", {})) for c in sched)
        selector = spec.get("worker", {}).get("spec", {}).get("nodeSelector", {})
        if (
            doc["kind"] == "DaskCluster"
            and not sched_gpu
            and selector.get("nvidia.com/gpu.product") == A100.product
        ):
            return str(path.relative_to(EXAMPLES.parent)), doc
    return "built-in", gpu_dask_cluster("baseline", workers=2, pool="a100")


@pytest.mark.e2e
@pytest.mark.timeout(360)  # the dask operator paces its work on a busy machine
def test_gpu_cluster_scheduler_lands_without_gpu(cluster, node_pools, dask_operator, namespace):
    source, doc = _baseline_manifest()
    doc["metadata"]["namespace"] = namespace
    name = doc["metadata"]["name"]
    workers = worker_replicas(doc)
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(doc))

    rows = wait_for_placements(cluster.api, namespace, name, workers, timeout=240)
    print(f"\nDaskCluster {namespace}/{name} ({source}):\n{format_table(rows)}")

    # The dask operator materialised the real objects.
    apps = client.AppsV1Api(cluster.api)
    deployments = {d.metadata.name for d in apps.list_namespaced_deployment(namespace).items}
    assert f"{name}-scheduler" in deployments
    assert sum(d.startswith(f"{name}-default-worker-") for d in deployments) == workers
    client.CoreV1Api(cluster.api).read_namespaced_service(f"{name}-scheduler", namespace)
    groups = client.CustomObjectsApi(cluster.api).list_namespaced_custom_object(
        "kubernetes.dask.org", "v1", namespace, "daskworkergroups"
    )
    assert [g["metadata"]["name"] for g in groups["items"]] == [f"{name}-default"]

    # Workers: one A100 each, on the A100 pool, driver 580 / CUDA 13.0, Running.
    worker_rows = [r for r in rows if r.component == "worker"]
    assert len(worker_rows) == workers
    for row in worker_rows:
        assert row.phase == "Running"
        assert row.pool in {"a100", "a100-mig"}  # both carry whole A100s
        assert row.gpu_product == A100.product
        assert (row.driver, row.cuda) == (A100.driver, A100.cuda)
        assert row.gpu_request == "nvidia.com/gpu=1"

    # The scheduler: Running, but no GPU request, no GPU node selector, no GPU toleration,
    # so kube-scheduler can only place it on an untainted CPU node: no GPU, no driver, no CUDA.
    (sched,) = [r for r in rows if r.component == "scheduler"]
    assert sched.phase == "Running"
    assert sched.gpu_request == "-"
    assert not [k for k in sched.node_selector if k.startswith("nvidia.com/")]
    assert not [t for t in sched.tolerations if t.startswith("nvidia.com/")]
    assert sched.pool == "cpu"
    assert (sched.gpu_product, sched.driver, sched.cuda) == ("-", "-", "-")
    node = client.CoreV1Api(cluster.api).read_node(sched.node)
    assert "nvidia.com/gpu" not in (node.status.allocatable or {})
