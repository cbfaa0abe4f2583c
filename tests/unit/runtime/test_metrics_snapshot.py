"""``/metrics`` and ``/readyz`` read only published snapshots: scrapes never fail under churn.

The exporter runs in its own thread; here the event loop adds and removes thousands of GPU
nodes (and publishes) while another thread scrapes as fast as it can.
"""

from __future__ import annotations

import asyncio
import threading
import urllib.error
import urllib.request

from prometheus_client.parser import text_string_to_metric_families

from dask_gpu_parity.admission.decide import decisions, reviews
from dask_gpu_parity.admission.runtime import metrics
from dask_gpu_parity.admission.runtime.state import NODES, OperatorState, Options
from dask_gpu_parity.core.policy import Policy
from provingground.cluster import free_port
from tests.unit.gpunodes import CLASSES, node
from tests.unit.helpers import example


def _get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def test_scrapes_while_nodes_come_and_go() -> None:
    port = free_port()
    metrics.serve(port, "127.0.0.1")
    base = f"http://127.0.0.1:{port}"
    state = OperatorState(Options(certfile="", keyfile=""))
    state.publish()
    status, body = _get(base + "/readyz")
    assert (status, body) == (503, "waiting for: nodes, namespaces, daskgpupolicies\n")

    stop = threading.Event()
    failures: list[str] = []
    scrapes = [0]

    def scrape() -> None:
        while not stop.is_set():
            status, text = _get(base + "/metrics")
            try:
                families = {f.name: f for f in text_string_to_metric_families(text)}
                assert status == 200
                assert "dgp_gpu_nodes" in families
            except Exception as exc:
                failures.append(repr(exc))
            scrapes[0] += 1

    async def churn() -> None:
        sink = dict(state.sinks())[NODES]
        for round_ in range(6):
            for i in range(500):
                sink.upsert(node(f"n{i}", *CLASSES[(i + round_) % 3]))
                if i % 50 == 0:
                    state.publish()
                    await asyncio.sleep(0)  # let the scraper in, as the event loop would
            for i in range(0, 500, 2):
                sink.delete(f"n{i}", None)
            state.publish()
            await asyncio.sleep(0.01)
        state.ready.set()
        state.publish()

    thread = threading.Thread(target=scrape)
    thread.start()
    try:
        asyncio.run(churn())
    finally:
        stop.set()
        thread.join()
    assert failures == []
    assert scrapes[0] > 0
    text = _get(base + "/metrics")[1]
    gpu = {
        tuple(sorted(s.labels.items())): s.value
        for f in text_string_to_metric_families(text)
        if f.name == "dgp_gpu_nodes"
        for s in f.samples
    }
    assert sum(gpu.values()) == 250
    assert _get(base + "/readyz") == (200, "ok\n")


def _sample(name: str, **labels: str) -> float:
    return metrics.REGISTRY.get_sample_value(name, labels) or 0.0


def test_an_answer_is_counted_under_the_labels_it_carries() -> None:
    # The example's GPU workers and CPU scheduler: mutation gives the scheduler parity (fixes).
    route = reviews.route("mutate-daskcluster")
    decision = decisions.mutate(example("gpu-cluster-tcp.yaml"), Policy(), None)
    assert decision.patched is not None
    fixed = {f.code for f in decision.findings if f.fixable}
    labels = {"kind": "daskcluster", "operation": "CREATE", "webhook": "mutate-daskcluster"}
    before = _sample("dgp_admission_requests_total", **labels, result="patched")
    fixes = {code: _sample("dgp_fixes_total", code=code) for code in fixed}
    timed = _sample("dgp_admission_duration_seconds_count", webhook="mutate-daskcluster")
    metrics.count(reviews.ruled({}, route, decision), seconds=0.001)
    assert _sample("dgp_admission_requests_total", **labels, result="patched") == before + 1
    assert {code: _sample("dgp_fixes_total", code=code) for code in fixed} == {
        code: n + 1 for code, n in fixes.items()
    }
    assert _sample("dgp_admission_duration_seconds_count", webhook="mutate-daskcluster") == (
        timed + 1
    )

    # Before the rules: a path with no webhook is counted as "unknown", never by its name.
    odd = reviews.route("mutate-" + "x" * 300)
    unknown = {"kind": "-", "operation": "-", "webhook": "unknown", "result": "malformed"}
    before = _sample("dgp_admission_requests_total", **unknown)
    metrics.count(reviews.answered(reviews.malformed(None, "bad"), odd), seconds=0.0)
    assert _sample("dgp_admission_requests_total", **unknown) == before + 1
    # An UPDATE allowed unchecked is not counted at all.
    allowed = reviews.answered(reviews.review({}, allowed=True), route)
    assert allowed.result is None
