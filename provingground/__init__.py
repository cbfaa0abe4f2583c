"""The proving ground: a real Kubernetes control plane with simulated GPU node pools.

Built from Go modules by ``make controlplane`` (see ``docs/proving-ground.md``). Nothing here
needs Go, a cluster or the binaries at import time.
"""

from .binaries import (
    K8S_VERSION,
    Binaries,
    BinariesMissingError,
    StaleCacheError,
    default_bin_dir,
    find_binaries,
)
from .cluster import ControlPlane, Ports
from .dask_operator import DaskOperator, crd_paths, install_crds
from .ground import ProvingGround
from .nodes import api_client, create_nodes, wait_nodes_ready
from .placement import PodPlacement, format_table, placements, wait_for_placements
from .pools import FLEETS, POOL_LABEL, POOLS, Pool, inventory_yaml, node_manifests, pools
from .process import ComponentError

__all__ = [
    "FLEETS",
    "K8S_VERSION",
    "POOLS",
    "POOL_LABEL",
    "Binaries",
    "BinariesMissingError",
    "ComponentError",
    "ControlPlane",
    "DaskOperator",
    "PodPlacement",
    "Pool",
    "Ports",
    "ProvingGround",
    "StaleCacheError",
    "api_client",
    "crd_paths",
    "create_nodes",
    "default_bin_dir",
    "find_binaries",
    "format_table",
    "install_crds",
    "inventory_yaml",
    "node_manifests",
    "placements",
    "pools",
    "wait_for_placements",
    "wait_nodes_ready",
]
