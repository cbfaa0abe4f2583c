"""Prometheus metrics and ``/readyz``, served from a thread of their own.

The exporter's thread never reads the operator's live state: the event loop publishes an
immutable :class:`Snapshot` (one reference, swapped whole) and scrapes read that. Counters and
histograms of admission are prometheus_client's own, which lock themselves.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

from prometheus_client import CollectorRegistry, Counter, Histogram, make_wsgi_app
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import ThreadingWSGIServer

from dask_gpu_parity.admission.decide.reviews import Answer

from .events import EventCounts
from .reports import ReportCounts

__all__ = [
    "ADMISSIONS",
    "ADMISSION_SECONDS",
    "DENIALS",
    "FIXES",
    "REGISTRY",
    "DriftFigures",
    "InformerFigures",
    "Snapshot",
    "count",
    "current",
    "publish",
    "serve",
]

REGISTRY = CollectorRegistry(auto_describe=True)
ADMISSIONS = Counter(
    "dgp_admission_requests",
    "Admission requests answered, by kind, operation, webhook and result",
    ["kind", "operation", "webhook", "result"],
    registry=REGISTRY,
)
ADMISSION_SECONDS = Histogram(
    "dgp_admission_duration_seconds",
    "Time to answer an admission request inside the operator",
    ["webhook"],
    buckets=(0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0),
    registry=REGISTRY,
)
FIXES = Counter(
    "dgp_fixes", "Fixes applied at admission, by finding code", ["code"], registry=REGISTRY
)
DENIALS = Counter("dgp_denials", "Admission denials, by finding code", ["code"], registry=REGISTRY)


def count(answer: Answer, *, seconds: float) -> None:
    """Count an answer under its labels; the rules' answers also by finding code, and their time.

    ``seconds`` is the time the rules took (with the DaskCluster read), observed for their
    answers only. Answers made before the rules ran count as ``malformed`` or ``error`` or not at
    all (``result`` ``None``: e.g. an UPDATE, allowed unchecked).
    """
    if answer.result is None:
        return
    ADMISSIONS.labels(answer.kind, answer.operation, answer.webhook, answer.result).inc()
    decision = answer.decision
    if decision is None:
        return
    if answer.result == "denied":
        for finding in decision.findings:
            DENIALS.labels(finding.code).inc()
    elif answer.result == "patched":
        for finding in decision.findings:
            if finding.fixable:
                FIXES.labels(finding.code).inc()
    ADMISSION_SECONDS.labels(answer.webhook).observe(seconds)


@dataclass(frozen=True)
class InformerFigures:
    """One informer, as published."""

    resource: str
    synced: bool
    objects: int
    lists: int
    events: int


@dataclass(frozen=True)
class DriftFigures:
    """The drift watch, as published."""

    drifted: tuple[tuple[str, int], ...] = ()  # (namespace, clusters)
    mismatched: tuple[tuple[str, int], ...] = ()  # (namespace, clusters)
    watched: int = 0
    pending: int = 0
    checks: int = 0
    first_pass_seconds: float | None = None


@dataclass(frozen=True)
class Snapshot:
    """Everything ``/metrics`` and ``/readyz`` show, as of one moment of the event loop."""

    ready: bool = False
    waiting: tuple[str, ...] = ("nodes", "namespaces", "daskgpupolicies")
    gpu_nodes: tuple[tuple[str, str, int], ...] = ()  # (driver, cuda, nodes); "" unlabelled
    gpu_shapes: int = 0
    informers: tuple[InformerFigures, ...] = ()
    drift: DriftFigures = DriftFigures()
    events: EventCounts = field(default_factory=EventCounts)
    reports: ReportCounts = field(default_factory=ReportCounts)


_current = Snapshot()


def publish(snapshot: Snapshot) -> None:
    """Make ``snapshot`` what scrapes read (called on the event loop)."""
    global _current  # noqa: PLW0603  # one reference, swapped whole: atomic for readers
    _current = snapshot


def current() -> Snapshot:
    """The snapshot scrapes read now."""
    return _current


def _gauge(
    name: str, doc: str, labels: list[str], rows: Iterable[tuple[Any, ...]]
) -> GaugeMetricFamily:
    family = GaugeMetricFamily(name, doc, labels=labels)
    for *values, number in rows:
        family.add_metric([str(v) for v in values], number)
    return family


class _SnapshotCollector:
    """The operator's gauges, from the published snapshot only."""

    def collect(self) -> Iterator[Metric]:
        """Yield the families (prometheus_client's collector protocol)."""
        s = _current  # one read: every family below comes from the same moment
        yield _gauge(
            "dgp_ready",
            "1 once nodes, namespaces and policies are listed",
            [],
            [(1.0 if s.ready else 0.0,)],
        )
        yield _gauge(
            "dgp_gpu_nodes",
            "GPU nodes in the inventory, by driver class",
            ["driver", "cuda"],
            s.gpu_nodes,
        )
        yield _gauge(
            "dgp_gpu_node_shapes",
            "Distinct GPU node shapes (placement is evaluated once per shape)",
            [],
            [(s.gpu_shapes,)],
        )
        yield _gauge(
            "dgp_informer_synced",
            "1 once the resource's first LIST is applied in full",
            ["resource"],
            [(i.resource, 1.0 if i.synced else 0.0) for i in s.informers],
        )
        yield _gauge(
            "dgp_informer_objects",
            "Objects of the resource the operator holds",
            ["resource"],
            [(i.resource, i.objects) for i in s.informers],
        )
        lists = CounterMetricFamily(
            "dgp_informer_lists", "Complete LISTs (the first, and relists)", labels=["resource"]
        )
        events = CounterMetricFamily(
            "dgp_informer_events", "Watch events applied", labels=["resource"]
        )
        for i in s.informers:
            lists.add_metric([i.resource], i.lists)
            events.add_metric([i.resource], i.events)
        yield lists
        yield events
        yield _gauge(
            "dgp_drifted_clusters",
            "GPU DaskClusters whose scheduler Deployment lacks parity, by namespace",
            ["namespace"],
            s.drift.drifted,
        )
        yield _gauge(
            "dgp_driver_mismatched_clusters",
            "DaskClusters whose scheduler pod runs on another driver class than its workers",
            ["namespace"],
            s.drift.mismatched,
        )
        yield _gauge(
            "dgp_drift_watched_clusters",
            "DaskClusters the drift watch holds",
            [],
            [(s.drift.watched,)],
        )
        yield _gauge(
            "dgp_drift_pending_checks",
            "Clusters waiting to be checked again",
            [],
            [(s.drift.pending,)],
        )
        checks = CounterMetricFamily("dgp_drift_checks", "Cluster checks made by the drift watch")
        checks.add_metric([], s.drift.checks)
        yield checks
        counted = s.events
        events = CounterMetricFamily(
            "dgp_events", "Kubernetes Events by outcome", labels=["outcome"]
        )
        for outcome, number in (
            ("posted", counted.posted),
            ("exists", counted.existing),
            ("failed", counted.failed),
            ("dropped", counted.dropped),
        ):
            events.add_metric([outcome], number)
        yield events
        yield _gauge(
            "dgp_events_pending", "Events queued, not posted yet", [], [(counted.pending,)]
        )
        yield from _report_families(s.reports)
        if s.drift.first_pass_seconds is not None:
            yield _gauge(
                "dgp_drift_first_pass_seconds",
                "Seconds from start until every DaskCluster had been checked once",
                [],
                [(s.drift.first_pass_seconds,)],
            )


def _report_families(c: ReportCounts) -> Iterator[Metric]:
    for name, doc, value in (
        ("dgp_policyreports_served", "1 when wgpolicyk8s.io/v1alpha2 is served", float(c.served)),
        ("dgp_policyreports", "PolicyReports of ours on the API server", c.reports),
        ("dgp_policyreports_pending", "DaskClusters whose PolicyReport waits", c.pending),
    ):
        yield _gauge(name, doc, [], [(value,)])
    writes = CounterMetricFamily(
        "dgp_policyreport_writes", "PolicyReport writes by outcome", labels=["outcome"]
    )
    for outcome in ("written", "deleted", "failed"):
        writes.add_metric([outcome], getattr(c, outcome))
    yield writes


REGISTRY.register(_SnapshotCollector())


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:  # the stdlib's name
        """No access log (a line per scrape and probe)."""


def _app() -> Callable[..., Iterable[bytes]]:
    metrics_app = make_wsgi_app(REGISTRY)

    def app(environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        if environ.get("PATH_INFO") != "/readyz":
            return metrics_app(environ, start_response)  # type: ignore[no-any-return]
        s = _current
        if s.ready:
            status, body = "200 OK", b"ok\n"
        else:
            waiting = ", ".join(s.waiting) or "startup"
            status, body = "503 Service Unavailable", f"waiting for: {waiting}\n".encode()
        start_response(status, [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
        return [body]

    return app


def serve(port: int, addr: str = "0.0.0.0") -> None:
    """Serve ``/metrics`` and ``/readyz`` in a background thread."""

    class Server(ThreadingWSGIServer):
        address_family = socket.AF_INET6 if ":" in addr else socket.AF_INET

    httpd = make_server(addr, port, _app(), Server, handler_class=_Quiet)
    threading.Thread(target=httpd.serve_forever, name="metrics", daemon=True).start()
