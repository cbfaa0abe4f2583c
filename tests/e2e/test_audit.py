"""`dask-gpu-parity audit` on the proving ground: the real CLI, as a subprocess, with the proving
ground's kubeconfig, against the dask operator's real Pods on the simulated GPU pools (kwok:
GPU Feature Discovery labels; the gpu-parity-check init container completes with exit 0).

The webhooks are not installed here: the examples run as written, so the unfixed one drifts.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from dask_gpu_parity.core.engine import evaluate
from dask_gpu_parity.core.inventory import Inventory
from provingground import POOLS, wait_for_placements

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
DOCS = EXAMPLES.parent / "docs" / "operator.md"
A100 = POOLS["a100"]


def _example(name: str, namespace: str, rename: str | None = None) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load((EXAMPLES / name).read_text())
    doc["metadata"]["namespace"] = namespace
    if rename:
        doc["metadata"]["name"] = rename
    return doc


def _fixed(name: str, namespace: str, rename: str) -> dict[str, Any]:
    """The example as `dask-gpu-parity fix --nodes examples/nodes.yaml` writes it."""
    nodes = yaml.safe_load((EXAMPLES / "nodes.yaml").read_text())["items"]
    fixed: dict[str, Any] = evaluate(
        _example(name, namespace, rename), None, Inventory.from_nodes(nodes)
    ).patched
    return fixed


def _audit(kubeconfig: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "dask_gpu_parity.cli",
            "audit",
            "--kubeconfig",
            str(kubeconfig),
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


@pytest.mark.e2e
@pytest.mark.timeout(420)
def test_audit_reports_each_clusters_observed_parity(cluster, node_pools, dask_operator, namespace):
    docs = [
        _example("gpu-cluster-tcp.yaml", namespace),  # scheduler without a GPU
        _fixed("gpu-cluster-tcp.yaml", namespace, "rapids-fixed"),
        _example("cpu-cluster.yaml", namespace),
    ]
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(docs))
    for doc in docs:
        workers = doc["spec"]["worker"]["replicas"]
        wait_for_placements(cluster.api, namespace, doc["metadata"]["name"], workers, timeout=240)

    started = time.perf_counter()
    done = _audit(cluster.kubeconfig, "-n", namespace, "-o", "json")
    seconds = time.perf_counter() - started
    assert done.returncode == 1, done.stderr  # the unfixed example: drift and DGP001
    report = {(r["kind"], r["name"]): r for r in json.loads(done.stdout)["resources"]}
    print(f"\naudit -n {namespace}: {len(report)} resources in {seconds:.2f} s")
    names = {name for kind, name in report if kind == "DaskCluster"}
    assert {d["metadata"]["name"] for d in docs} <= names

    unfixed = report[("DaskCluster", docs[0]["metadata"]["name"])]
    assert unfixed["verdict"] == "drift"
    (scheduler,) = unfixed["scheduler"]
    assert not scheduler["gpu"]
    assert unfixed["reason"] == f"scheduler on {scheduler['node']}, a node without a GPU"
    assert "DGP001" in {f["code"] for f in unfixed["findings"]}
    assert {w["product"] for w in unfixed["workers"]} == {A100.product}

    fixed = report[("DaskCluster", "rapids-fixed")]
    assert fixed["verdict"] == "ok", fixed["reason"]
    (scheduler,) = fixed["scheduler"]
    assert (scheduler["product"], scheduler["driver"], scheduler["cuda"]) == (
        A100.product,
        A100.driver,
        A100.cuda,
    )
    assert scheduler["check"] == "passed"
    assert scheduler["image"] == {w["image"] for w in fixed["workers"]}.pop()
    assert not [f for f in fixed["findings"] if f["severity"] == "error"]

    cpu = report[("DaskCluster", docs[2]["metadata"]["name"])]
    assert cpu["verdict"] == "no-gpu"
    # The worker groups the dask operator made are audited with their clusters.
    assert ("DaskWorkerGroup", "rapids-fixed-default") in report

    text = _audit(cluster.kubeconfig, "-n", namespace)
    print(text.stdout)
    rows = {line.split()[2]: line.split() for line in text.stdout.splitlines()[1:4]}
    assert rows["rapids-fixed"][3:6] == ["ok", scheduler["node"], A100.driver]
    policy = _audit(cluster.kubeconfig, "-n", namespace, "-o", "policyreport").stdout
    reports = list(yaml.safe_load_all(policy))
    assert {r["metadata"]["namespace"] for r in reports} == {namespace}
    assert {(r["scope"]["kind"], r["scope"]["name"]) for r in reports} == set(report)
    assert sum(r["summary"]["fail"] for r in reports) >= 1


@pytest.mark.e2e
def test_audit_as_a_service_account_that_may_read_nothing_is_forbidden(
    cluster, namespace, tmp_path
):
    cluster.kubectl("-n", namespace, "create", "serviceaccount", "nobody")
    token = cluster.kubectl("-n", namespace, "create", "token", "nobody").stdout.strip()
    admin = yaml.safe_load(Path(cluster.kubeconfig).read_text())
    kubeconfig = tmp_path / "nobody.kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": admin["clusters"],
                "users": [{"name": "nobody", "user": {"token": token}}],
                "contexts": [
                    {
                        "name": "nobody",
                        "context": {
                            "cluster": admin["clusters"][0]["name"],
                            "user": "nobody",
                            "namespace": namespace,
                        },
                    }
                ],
                "current-context": "nobody",
            }
        )
    )
    done = _audit(kubeconfig)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.count("\n") == 1, done.stderr
    assert done.stderr.startswith(
        f"error: Forbidden: cannot list daskclusters.kubernetes.dask.org in namespace {namespace} ("
    )
    assert f"system:serviceaccount:{namespace}:nobody" in done.stderr
    assert "Traceback" not in done.stderr

    # The ClusterRole docs/operator.md lists is enough, for one namespace and for all.
    role = next(
        d
        for d in yaml.safe_load_all(_yaml_blocks(DOCS))
        if isinstance(d, dict) and d.get("kind") == "ClusterRole"
    )
    role["metadata"]["name"] = f"audit-{namespace}"
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(role))
    try:
        cluster.kubectl(
            "create",
            "clusterrolebinding",
            f"audit-{namespace}",
            f"--clusterrole=audit-{namespace}",
            f"--serviceaccount={namespace}:nobody",
        )
        for args in ((), ("-A",)):
            done = _audit(kubeconfig, *args)
            assert done.returncode in (0, 1), done.stderr
            assert "error" not in done.stderr
    finally:
        cluster.kubectl("delete", "clusterrolebinding", f"audit-{namespace}", check=False)
        cluster.kubectl("delete", "clusterrole", f"audit-{namespace}", check=False)


def _yaml_blocks(path: Path) -> str:
    """The ```yaml blocks of a Markdown file, as one multi-document stream."""
    blocks = path.read_text().split("```yaml\n")[1:]
    return "\n---\n".join(b.split("```", 1)[0] for b in blocks)
