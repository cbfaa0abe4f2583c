"""A real Kubernetes node (kubelet, containerd, runc, CNI bridge, kube-proxy, CoreDNS).

One harness for the proving ground's real node on this machine and for the GPU node on the
GPU machine (``benchmarks/gpu/node/``: the same node plus the NVIDIA device plugin, or with
``--dra`` the DRA GPU plugin of ``draplugin/``, ``dra.py``). The
binaries are built from Go modules by ``build.sh`` (``make node``, ``make gpunode``); see
docs/proving-ground.md. The modules here need only the standard library, except ``join``
(the proving ground's PKI).
"""

from .binaries import (
    NodeBinaries,
    NodeBinariesMissingError,
    dra_plugin_dir,
    find_dra_plugin,
    find_node_binaries,
    node_bin_dir,
    node_dir,
)
from .configs import CLUSTER_DOMAIN, PAUSE_IMAGE, NodeSpec
from .dra import DraPlugin
from .harness import RealNode

__all__ = [
    "CLUSTER_DOMAIN",
    "PAUSE_IMAGE",
    "DraPlugin",
    "NodeBinaries",
    "NodeBinariesMissingError",
    "NodeSpec",
    "RealNode",
    "dra_plugin_dir",
    "find_dra_plugin",
    "find_node_binaries",
    "node_bin_dir",
    "node_dir",
]
