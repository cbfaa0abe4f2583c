"""Prometheus metrics of the operator, served on their own port."""

from __future__ import annotations

from collections.abc import Callable, Iterator

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server
from prometheus_client.core import GaugeMetricFamily

__all__ = [
    "ADMISSIONS",
    "ADMISSION_SECONDS",
    "DENIALS",
    "DRIFT",
    "FIXES",
    "GPU_NODES",
    "REGISTRY",
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
DRIFT = Gauge(
    "dgp_drifted_clusters",
    "GPU DaskClusters whose scheduler Deployment lacks parity, by namespace",
    ["namespace"],
    registry=REGISTRY,
)


class _GpuNodes:
    """``dgp_gpu_nodes{driver, cuda}``, computed at scrape time from the node inventory."""

    def __init__(self) -> None:
        self._source: Callable[[], dict[tuple[str, str], int]] = dict

    def set_function_source(self, source: Callable[[], dict[tuple[str, str], int]]) -> None:
        """Read the counts from ``source`` at each scrape."""
        self._source = source

    def collect(self) -> Iterator[GaugeMetricFamily]:
        """Yield the gauge family (prometheus_client's collector protocol)."""
        family = GaugeMetricFamily(
            "dgp_gpu_nodes",
            "GPU nodes in the inventory, by driver class",
            labels=["driver", "cuda"],
        )
        for (driver, cuda), count in sorted(self._source().items()):
            family.add_metric([driver, cuda], count)
        yield family


GPU_NODES = _GpuNodes()
REGISTRY.register(GPU_NODES)


def serve(port: int, addr: str = "0.0.0.0") -> None:
    """Serve ``/metrics`` in a background thread."""
    start_http_server(port, addr=addr, registry=REGISTRY)
