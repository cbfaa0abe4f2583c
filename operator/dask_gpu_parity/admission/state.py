"""The running operator's state, in one owner: options, kopf's indices, inventory, drift.

kopf fills the indices as it watches; the webhook server and the drift watch read them through
:class:`OperatorState`, never through module globals.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dask_gpu_parity.core.inventory import GpuNode, Inventory
from dask_gpu_parity.core.policy import Policy, select

from . import drift

__all__ = ["INDEX_NAMES", "OperatorState", "Options"]

# The kopf indices (handler ids in ``handlers.py``): the webhooks read the first three;
# ``dask_clusters`` is the drift watch's, registered only with it.
INDEX_NAMES = ("policies", "namespaces", "gpu_nodes", "dask_clusters")


@dataclass(frozen=True)
class Options:
    """How ``dask-gpu-parity run`` serves."""

    certfile: str
    keyfile: str
    port: int = 9443
    addr: str = "0.0.0.0"  # a Pod serves on all its addresses
    metrics_port: int = 8080
    health_port: int = 8081
    drift: bool = True


class OperatorState:
    """What one operator process holds while it runs.

    Indices are kopf's ``kopf.Index`` objects (mapping-like: key -> store of values), handed
    over by the startup handler once kopf has created them.
    """

    def __init__(self, options: Options, *, inventory_ttl: float = 1.0) -> None:
        self.options = options
        self.tracker = drift.Tracker()
        self._indices: Mapping[str, Any] = {}
        self._inventory_ttl = inventory_ttl
        self._inventory_built = -float("inf")
        self._inventory: Inventory | None = None

    def attach(self, indices: Mapping[str, Any]) -> None:
        """Keep kopf's indices (empty at startup, filled as kopf watches)."""
        self._indices = dict(indices)

    def namespace(self, name: str) -> tuple[dict[str, str], bool]:
        """The namespace's labels and whether it opted out."""
        for labels, skip in self._indices["namespaces"].get(name, []):
            return labels, skip
        return {"kubernetes.io/metadata.name": name}, False

    def policy(self, labels: Mapping[str, str]) -> Policy:
        """The policy in force for a namespace with these labels."""
        policies = self._indices["policies"]
        return select((p for key in policies for p in policies[key]), labels)

    def inventory(self) -> Inventory | None:
        """The GPU nodes, or ``None`` before any was seen (placement rules off).

        Rebuilt at most once per ``inventory_ttl`` seconds instead of per request: building it
        walks and sorts every GPU node (milliseconds with thousands of nodes); node labels and
        capacity change rarely, and the index itself lags the cluster by about as much.
        """
        now = time.monotonic()
        if now - self._inventory_built > self._inventory_ttl:
            nodes = self._indices.get("gpu_nodes")
            found: tuple[GpuNode, ...] = (
                tuple(node for key in nodes for node in nodes[key]) if nodes is not None else ()
            )
            self._inventory = (
                Inventory(tuple(sorted(found, key=lambda n: n.name))) if found else None
            )
            self._inventory_built = now
        return self._inventory

    def cluster(self, namespace: str, name: str) -> dict[str, Any] | None:
        """A DaskCluster as indexed (drift watch only), if it is."""
        clusters = self._indices.get("dask_clusters")
        if clusters is None:
            return None
        return next(iter(clusters.get((namespace, name), [])), None)
