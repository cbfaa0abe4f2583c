"""The collector's thresholds: LIST pages passing through a long-lived heap do not make CPython
walk that heap again and again, and the operator sets them before kopf starts."""

from __future__ import annotations

import gc
import json
from collections.abc import Iterator
from typing import Any

import pytest

from dask_gpu_parity.admission.runtime import collector, handlers

# One LIST page as the API server sends Nodes: 500 objects with labels and managedFields.
_ITEM = {
    "metadata": {
        "name": "gpu-node",
        "labels": {f"example.com/label-{i}": "value" for i in range(20)},
        "managedFields": [{"manager": "kubelet", "fieldsV1": {"f:status": {}}}] * 5,
    },
    "status": {"allocatable": {"nvidia.com/gpu": "8"}, "conditions": [{"type": "Ready"}] * 5},
}
_PAGE = json.dumps({"items": [_ITEM] * 500}).encode()


@pytest.fixture
def clean_heap() -> Iterator[None]:
    """Whatever earlier tests left is set aside, so each run starts from the same heap."""
    thresholds = gc.get_threshold()
    gc.collect()
    gc.freeze()
    try:
        yield
    finally:
        gc.set_threshold(*thresholds)
        gc.unfreeze()


def _full_collections(thresholds: tuple[int, int, int]) -> int:
    """Full collections while 100 pages are decoded and applied beside a long-lived heap."""
    gc.set_threshold(*thresholds)
    gc.collect()
    held: list[Any] = [[i] for i in range(200_000)]  # the stores, the node index
    full: list[int] = []

    def count(phase: str, info: dict[str, Any]) -> None:
        if phase == "start" and info["generation"] == 2:
            full.append(1)

    gc.callbacks.append(count)
    try:
        for _ in range(100):
            page = json.loads(_PAGE)
            held.extend([item["metadata"]["name"]] for item in page["items"][:25])
            del page
    finally:
        gc.callbacks.remove(count)
    return len(full)


@pytest.mark.usefixtures("clean_heap")
def test_pages_through_a_long_lived_heap_make_at_most_one_full_collection() -> None:
    cpython = _full_collections((700, 10, 10))
    ours = _full_collections(collector.THRESHOLDS)
    assert cpython >= 5  # the workload is one that CPython's defaults walk the heap for
    assert ours <= 1


def test_the_operator_sets_them_before_kopf_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[tuple[int, ...]] = []
    monkeypatch.setattr(handlers.kopf, "configure", lambda **_: None)
    monkeypatch.setattr(handlers.kopf, "run", lambda **_: seen.append(gc.get_threshold()))
    thresholds = gc.get_threshold()
    try:
        gc.set_threshold(700, 10, 10)
        handlers.run(handlers.Options(certfile="tls.crt", keyfile="tls.key"))
    finally:
        gc.set_threshold(*thresholds)
    assert seen == [collector.THRESHOLDS]
