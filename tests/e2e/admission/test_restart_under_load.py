"""Ready means right: restarted under load on a large inventory, no verdict from a partial view.

About 700 GPU nodes in two driver classes of A100s, named so that the first page of a node
LIST (the API server lists by name) holds more of the smaller class: an operator answering from
a partial inventory pins the example TCP cluster to the wrong class, and counts fewer GPU nodes
in the UCX example's DGP013 denial. While clients send both through the API server without
pause, the operator is restarted with its webhooks left in place (``failurePolicy: Fail``).
Every answer must be either "webhook unreachable" (no process serving yet) or the full view's.

Also: ``/metrics`` is scraped without pause while nodes are added and removed.
"""

from __future__ import annotations

import dataclasses
import threading
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from provingground import POOL_LABEL, POOLS, create_nodes, wait_nodes_ready
from provingground.parity import eventually, example
from provingground.pools import node_manifest

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(900)]

FULL = "580.95.05"  # the class with the most A100 GPUs once every node is listed
EARLY = "580.105.08"  # the class a partial (first-page) view would pick
SMALL, LARGE = 300, 400  # nodes of EARLY ("scale-a-*", listed first) and FULL ("scale-b-*")
SCALE_POOLS = (
    dataclasses.replace(POOLS["a100"], name="scale-a", size=SMALL, driver=EARLY),
    dataclasses.replace(POOLS["a100"], name="scale-b", size=LARGE),
)


def _pinned_driver(obj: dict[str, Any]) -> str | None:
    affinity = obj["spec"]["worker"]["spec"].get("affinity", {})
    terms = (
        affinity.get("nodeAffinity", {})
        .get("requiredDuringSchedulingIgnoredDuringExecution", {})
        .get("nodeSelectorTerms", [])
    )
    for term in terms:
        for expr in term.get("matchExpressions", []):
            if expr["key"] == "nvidia.com/cuda.driver-version.full":
                return str(expr["values"][0])
    return None


def _gpu_nodes(api: client.ApiClient) -> int:
    nodes = client.CoreV1Api(api).list_node().items
    return sum(1 for n in nodes if int((n.status.allocatable or {}).get("nvidia.com/gpu", 0)))


@pytest.fixture(scope="module")
def large_inventory(cluster, parity) -> Iterator[int]:
    """The scale pools, Ready; yields how many GPU nodes the cluster has; deleted afterwards."""
    manifests = [node_manifest(pool, i) for pool in SCALE_POOLS for i in range(pool.size)]
    create_nodes(cluster.api, manifests, concurrency=16)
    try:
        for pool in SCALE_POOLS:
            wait_nodes_ready(cluster.api, pool.size, f"{POOL_LABEL}={pool.name}", timeout=300)
        yield _gpu_nodes(cluster.api)
    finally:
        core = client.CoreV1Api(cluster.api)
        for pool in SCALE_POOLS:
            core.delete_collection_node(label_selector=f"{POOL_LABEL}={pool.name}")


@dataclasses.dataclass
class Answers:
    """What the clients saw, by kind."""

    counts: Counter[str] = dataclasses.field(default_factory=Counter)
    wrong: list[str] = dataclasses.field(default_factory=list)
    full_after_ready: int = 0


def _classify(parity, doc: dict[str, Any], nodes: int) -> tuple[str, str | None]:
    """("unreachable" | "full" | "partial" | "other", detail) for one dry-run create."""
    try:
        created, _ = parity.create(doc, dry_run=True)
    except ApiException as exc:
        body = str(exc.body)
        if "failed calling webhook" in body:
            return "unreachable", None
        if "DGP013" in body:
            if f"none of the {nodes} GPU nodes" in body:
                return "full", None
            return "partial", body[:300]
        return "other", body[:300]
    pinned = _pinned_driver(created)
    return ("full", None) if pinned == FULL else ("partial", f"pinned to {pinned}")


def test_no_verdict_from_a_partial_inventory_across_a_restart(cluster, parity, large_inventory):
    nodes = large_inventory
    tcp = example("gpu-cluster-tcp.yaml", namespace="default")
    ucx = example("gpu-cluster-ucx.yaml", namespace="default")
    # Warm, before the restart: both answers are the full view's.
    assert eventually(lambda: _classify(parity, tcp, nodes)[0] == "full", timeout=120)
    assert _classify(parity, ucx, nodes)[0] == "full"

    answers = Answers()
    stop = threading.Event()
    ready = threading.Event()
    lock = threading.Lock()

    def client_loop(doc: dict[str, Any], name: str) -> None:
        i = 0
        while not stop.is_set():
            i += 1
            doc["metadata"]["name"] = f"{name}-{i}"
            kind, detail = _classify(parity, doc, nodes)
            with lock:
                answers.counts[kind] += 1
                if kind in ("partial", "other"):
                    answers.wrong.append(f"{name}: {kind}: {detail}")
                if kind == "full" and ready.is_set():
                    answers.full_after_ready += 1

    threads = [
        threading.Thread(target=client_loop, args=(dict(tcp), "probe-tcp")),
        threading.Thread(target=client_loop, args=(dict(ucx), "probe-ucx")),
    ]
    for thread in threads:
        thread.start()
    try:
        time.sleep(2)
        serving = parity.restart()
        ready.set()
        print(f"\nrestarted: serving TLS {serving:.1f}s after start with {nodes} GPU nodes")
        eventually(lambda: answers.full_after_ready >= 40, timeout=120)
    finally:
        stop.set()
        for thread in threads:
            thread.join()
    print(f"answers: {dict(answers.counts)}")
    assert answers.wrong == []
    assert answers.counts["unreachable"] > 0  # the clients did run across the restart


def test_metrics_scrapes_never_fail_while_nodes_come_and_go(cluster, parity, large_inventory):
    core = client.CoreV1Api(cluster.api)
    pool = dataclasses.replace(POOLS["h100"], name="churn", size=60)
    failures: list[str] = []
    scrapes = [0]
    stop = threading.Event()

    def scrape() -> None:
        while not stop.is_set():
            if parity.metrics() is None:
                failures.append("no answer")
            scrapes[0] += 1

    logged_before = len(parity.log_path.read_text())
    thread = threading.Thread(target=scrape)
    thread.start()
    try:
        for _ in range(3):
            create_nodes(cluster.api, [node_manifest(pool, i) for i in range(pool.size)])
            eventually(
                lambda: parity.metric("dgp_gpu_nodes") >= large_inventory + pool.size, timeout=60
            )
            core.delete_collection_node(label_selector=f"{POOL_LABEL}=churn")
            eventually(lambda: parity.metric("dgp_gpu_nodes") == large_inventory, timeout=60)
    finally:
        stop.set()
        thread.join()
    print(f"\n{scrapes[0]} scrapes while {3 * pool.size} nodes came and went")
    assert failures == []
    assert scrapes[0] > 0
    logged = parity.log_path.read_text()[logged_before:]  # what the churn made it log
    assert "Traceback" not in logged
