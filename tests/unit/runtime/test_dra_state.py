"""The operator on a scripted API server with and without ``resource.k8s.io/v1`` (DRA).

With it, readiness waits for DeviceClasses and ResourceSlices as for Nodes, and the inventory
holds the DRA nodes (``tests/fixtures/dra/pure-dra.yaml``, EXPECTED.md §3: three GPU nodes, never
none). Without it (Kubernetes before 1.34, or DRA off: discovery answers 404) the operator starts
as before, lists no DRA kind, and says so once in its log.
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import aiohttp.web
import pytest
import yaml
from aiohttp.test_utils import TestServer

from dask_gpu_parity.admission.runtime.apiserver import ApiClient
from dask_gpu_parity.admission.runtime.kube import Connection
from dask_gpu_parity.admission.runtime.state import OperatorState, Options

DRA = Path(__file__).parents[2] / "fixtures" / "dra"
IMPLICIT = "deviceclass.resource.kubernetes.io/"


def _listed(obj: dict[str, Any]) -> dict[str, Any]:
    """An item as a LIST returns it: without kind and apiVersion (the List carries them)."""
    return {k: v for k, v in obj.items() if k not in ("kind", "apiVersion")}


def _fleet() -> dict[str, list[dict[str, Any]]]:
    items = yaml.safe_load((DRA / "pure-dra.yaml").read_text())["items"]
    classes = yaml.safe_load((DRA / "deviceclasses.yaml").read_text())["items"]
    return {kind: [_listed(o) for o in found] for kind, found in _lists(items, classes).items()}


def _lists(
    items: list[dict[str, Any]], classes: list[dict[str, Any]]
) -> dict[str, list[dict[str, Any]]]:
    return {
        "/api/v1/nodes": [o for o in items if o["kind"] == "Node"],
        "/apis/resource.k8s.io/v1/resourceslices": [
            o for o in items if o["kind"] == "ResourceSlice"
        ],
        "/apis/resource.k8s.io/v1/deviceclasses": classes,
        "/api/v1/namespaces": [{"metadata": {"name": "team"}}],
        "/apis/gpuparity.dask.org/v1alpha1/daskgpupolicies": [],
    }


async def _started(dra: bool) -> tuple[OperatorState, list[str]]:
    lists = _fleet()
    asked: list[str] = []

    async def handle(request: aiohttp.web.Request) -> aiohttp.web.StreamResponse:
        asked.append(request.path)
        if request.path == "/apis/resource.k8s.io/v1":
            if not dra:
                return aiohttp.web.json_response({"kind": "Status", "code": 404}, status=404)
            names = ["deviceclasses", "resourceclaims", "resourceslices"]
            return aiohttp.web.json_response({"resources": [{"name": n} for n in names]})
        if request.path == "/version":  # as v1.36.3's API server answers, less build fields
            return aiohttp.web.json_response({"major": "1", "minor": "36", "gitVersion": "v1.36.3"})
        if request.query.get("watch") == "1":
            await asyncio.sleep(3600)
        items = lists.get(request.path)
        if items is None:
            return aiohttp.web.json_response({"kind": "Status", "code": 404}, status=404)
        meta = {"resourceVersion": "1"}
        return aiohttp.web.json_response({"kind": "List", "metadata": meta, "items": items})

    app = aiohttp.web.Application()
    app.router.add_get("/{tail:.*}", handle)
    server = TestServer(app)
    await server.start_server()
    api = ApiClient(Connection(str(server.make_url("")).rstrip("/")))
    state = OperatorState(Options(certfile="", keyfile=""))
    state.start(api)
    try:
        async with asyncio.timeout(10):
            await state.ready.wait()
    finally:
        await state.stop()
        await api.close()
        await server.close()
    return state, asked


def test_ready_with_dra_nodes_and_their_devices_where_dra_is_served(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.INFO, "dask_gpu_parity"):
        state, _ = asyncio.run(_started(dra=True))
    assert {i.resource.kind for i in state.informers} >= {"deviceclasses", "resourceslices"}
    assert all(i.synced.is_set() for i in state.informers)
    assert state.kube == (1, 36)  # the verifier's DRA device is the scheduler's from 1.35 on
    inventory = state.inventory()
    assert inventory is not None
    assert [n.name for n in inventory.nodes] == ["dra-a100-0", "dra-gh200-0", "dra-h100-0"]
    assert "nvidia.com/mig-1g.12gb" in state.device_classes().gpu_names  # the cluster's class
    assert IMPLICIT + "mig-1g-12gb.gpu.nvidia.com" in inventory.device_classes.gpu_names
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("DRA:")]
    assert said == [
        "DRA: resource.k8s.io/v1 is served; GPU nodes are read from Nodes, ResourceSlices and "
        "DeviceClasses"
    ]


def test_starts_as_before_and_says_so_once_where_dra_is_not_served(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.INFO, "dask_gpu_parity"):
        state, asked = asyncio.run(_started(dra=False))
    assert state.ready.is_set()
    assert {i.resource.kind for i in state.informers} == {
        "nodes",
        "namespaces",
        "daskgpupolicies",
    }
    assert not any("resourceslices" in p or "deviceclasses" in p for p in asked)
    assert state.kube is None  # not asked: no DRA, no question of DRA devices
    assert state.inventory() is None  # DRA nodes list no nvidia.com/gpu: none seen, as before
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("DRA:")]
    assert said == [
        "DRA: resource.k8s.io/v1 is not served (Kubernetes older than 1.34, or DRA off); "
        "GPU nodes are read from Nodes only"
    ]
