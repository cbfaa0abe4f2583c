"""PolicyReports on the real API server, with the community's CRD (Kyverno's copy, pinned).

Expected, written before the code: a GPU DaskCluster admitted with parity gets one report with
nothing failing; when its scheduler Deployment loses the GPU the report fails with DGP001; when the
cluster is deleted the report goes. A CPU cluster and an opted-out namespace get none.
``kubectl get policyreports`` prints the cluster's kind and name (the CRD's printer columns).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from provingground.parity import eventually, example

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]


@pytest.fixture
def namespace(policyreport_crd, parity, cluster) -> Iterator[str]:
    name = f"e2e-polr-{uuid.uuid4().hex[:5]}"
    cluster.kubectl("create", "namespace", name)
    try:
        yield name
    finally:
        cluster.release_namespace(name)


def _reports(cluster, namespace: str) -> dict[str, dict[str, Any]]:
    out = cluster.kubectl("get", "policyreports", "-n", namespace, "-o", "json").stdout
    return {r["scope"]["name"]: r for r in json.loads(out)["items"]}


def _rules(report: dict[str, Any]) -> set[tuple[str, str]]:
    return {(r["rule"], r["result"]) for r in report["results"]}


def _apply(cluster, doc: dict[str, Any]) -> None:
    cluster.kubectl("apply", "-f", "-", input=json.dumps(doc))


def test_a_gpu_clusters_report_appears_changes_and_disappears(cluster, namespace):
    doc = example("gpu-cluster-tcp.yaml", namespace=namespace)
    doc["spec"]["worker"]["replicas"] = 1
    _apply(cluster, doc)
    name = doc["metadata"]["name"]

    report = eventually(
        lambda: _reports(cluster, namespace).get(name), timeout=120, what="a report appears"
    )
    print(json.dumps(report["results"], indent=1))
    assert report["summary"]["fail"] == 0
    uid = json.loads(
        cluster.kubectl("get", "daskcluster", name, "-n", namespace, "-o", "json").stdout
    )["metadata"]["uid"]
    assert report["metadata"]["ownerReferences"][0]["uid"] == uid
    assert report["scope"]["kind"] == "DaskCluster"

    # Someone edits the scheduler Deployment: its GPU goes. The report fails with DGP001.
    deployment = f"{name}-scheduler"
    template = json.loads(
        cluster.kubectl("get", "deployment", deployment, "-n", namespace, "-o", "json").stdout
    )["spec"]["template"]["spec"]
    index = next(
        i
        for i, c in enumerate(template["containers"])
        if "nvidia.com/gpu" in json.dumps(c.get("resources", {}))
    )
    ops = [{"op": "remove", "path": f"/spec/template/spec/containers/{index}/resources"}]
    cluster.kubectl(
        "patch", "deployment", deployment, "-n", namespace, "--type=json", "-p", json.dumps(ops)
    )
    changed = eventually(
        lambda: ("DGP001", "fail") in _rules(_reports(cluster, namespace).get(name) or {}),
        timeout=120,
        what="the report fails with DGP001",
    )
    assert changed
    listed = cluster.kubectl("get", "policyreports", "-n", namespace).stdout
    print(listed)
    header, row = listed.splitlines()[:2]
    assert header.split()[:4] == ["NAME", "KIND", "NAME", "PASS"]
    assert row.split()[1:3] == ["DaskCluster", name]

    cluster.kubectl("delete", "daskcluster", name, "-n", namespace)
    eventually(
        lambda: name not in _reports(cluster, namespace), timeout=120, what="the report goes"
    )


def test_cpu_clusters_and_opted_out_namespaces_get_no_report(cluster, namespace):
    cpu = example("cpu-cluster.yaml", namespace=namespace, name="cpu-only")
    _apply(cluster, cpu)
    gpu = example("gpu-cluster-tcp.yaml", namespace=namespace, name="gpu-marker")
    gpu["spec"]["worker"]["replicas"] = 1
    _apply(cluster, gpu)
    # The GPU cluster's report shows the drift watch has checked this namespace's clusters.
    eventually(lambda: "gpu-marker" in _reports(cluster, namespace), timeout=120)
    eventually(
        lambda: json.loads(
            cluster.kubectl(
                "get", "deployment", "cpu-only-scheduler", "-n", namespace, "-o", "json"
            ).stdout
        ),
        timeout=120,
        retry_on=(AssertionError, Exception),
    )
    assert "cpu-only" not in _reports(cluster, namespace)

    cluster.kubectl("annotate", "namespace", namespace, "gpuparity.dask.org/skip=true")
    eventually(lambda: not _reports(cluster, namespace), timeout=120, what="reports removed")
