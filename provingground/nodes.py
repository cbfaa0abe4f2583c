"""Create simulated Nodes in bulk and wait until kwok and the node controller make them Ready."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from kubernetes import client, config

from .objects import create_all, name_of, present
from .pools import POOL_LABEL

__all__ = ["api_client", "create_nodes", "delete_nodes", "node_is_schedulable", "wait_nodes_ready"]

NOT_READY_TAINTS = {"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"}


def api_client(kubeconfig: Path | str | None = None, pool_size: int = 32) -> client.ApiClient:
    """A Kubernetes client for ``kubeconfig`` (None: KUBECONFIG / ~/.kube/config)."""
    cfg = client.Configuration()
    config.load_kube_config(  # type: ignore[no-untyped-call]  # the loader has no annotations
        config_file=str(kubeconfig) if kubeconfig else None, client_configuration=cfg
    )
    cfg.connection_pool_maxsize = pool_size
    return client.ApiClient(cfg)


def create_nodes(
    api: client.ApiClient, manifests: Iterable[Mapping[str, Any]], concurrency: int = 16
) -> int:
    """Create Nodes concurrently; existing ones are left alone. Returns how many were created."""
    core = client.CoreV1Api(api)

    def create(body: dict[str, Any]) -> object:
        # The client serialises a plain dict as it is, as its own examples pass bodies.
        return core.create_node(body=body, _request_timeout=30)  # type: ignore[arg-type]

    return create_all(create, manifests, concurrency, kind="Node")


def node_is_schedulable(node: client.V1Node) -> bool:
    """Ready condition true and no not-ready/unreachable taint left."""
    conditions = present(node.status, "Node status").conditions or []
    ready = any(c.type == "Ready" and c.status == "True" for c in conditions)
    taints = {t.key for t in present(node.spec, "Node spec").taints or []}
    return ready and not taints & NOT_READY_TAINTS


def wait_nodes_ready(
    api: client.ApiClient, expected: int, selector: str = POOL_LABEL, timeout: float = 120
) -> list[client.V1Node]:
    """Wait until ``expected`` nodes matching ``selector`` are schedulable; return them."""
    core = client.CoreV1Api(api)
    deadline = time.monotonic() + timeout
    while True:
        nodes = core.list_node(label_selector=selector).items
        ready = [n for n in nodes if node_is_schedulable(n)]
        if len(ready) >= expected:
            return ready
        if time.monotonic() > deadline:
            waiting = sorted(name_of(n) for n in nodes if not node_is_schedulable(n))
            raise TimeoutError(
                f"{len(ready)}/{expected} nodes ({selector}) schedulable after {timeout:.0f}s; "
                f"not ready: {waiting[:10]}{' ...' if len(waiting) > 10 else ''}; "
                "is kwok running and managing nodes annotated kwok.x-k8s.io/node=fake?"
            )
        time.sleep(0.5)


def delete_nodes(api: client.ApiClient, selector: str = POOL_LABEL) -> None:
    """Delete every Node matching ``selector``."""
    client.CoreV1Api(api).delete_collection_node(label_selector=selector)
