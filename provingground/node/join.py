"""Join a real node to a proving-ground control plane: its certificates, its spec, its root.

The control plane must have been started with ``advertise_address`` (the node's address, see
``provingground.apiserver.apiserver_args``), so pods reach the API server through the
``kubernetes`` Service.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from .binaries import NodeBinaries
from .configs import NodeSpec
from .harness import RealNode

if TYPE_CHECKING:
    from provingground.cluster import ControlPlane

__all__ = ["REAL_NODE_LABEL", "REAL_NODE_NAME", "REAL_NODE_SELECTOR", "join", "real_node_spec"]

REAL_NODE_NAME = "real-node"
# Beside the kwok pools' dask-gpu-parity.test/pool (which the real node does not carry, so
# pool tables and pool clean-ups never include it): select it with REAL_NODE_SELECTOR.
REAL_NODE_LABEL = "dask-gpu-parity.test/real-node"
REAL_NODE_SELECTOR = {REAL_NODE_LABEL: "true"}


def real_node_spec(name: str = REAL_NODE_NAME) -> NodeSpec:
    """The proving ground's real node: labelled, untainted, no GPU, Services and DNS on."""
    return NodeSpec(name=name, labels=dict(REAL_NODE_SELECTOR), services=True)


def join(
    cp: ControlPlane,
    binaries: NodeBinaries,
    *,
    images: Sequence[Path] = (),
    spec: NodeSpec | None = None,
) -> RealNode:
    """A ``RealNode`` (not started) for ``cp``: kubelet's and kube-proxy's certificates signed.

    Raises:
        ValueError: the control plane has no ``advertise_address`` or is not started.
    """
    if cp.advertise_address is None or cp.ca is None:
        raise ValueError(
            "The real node needs a started control plane with an advertise_address "
            "(ProvingGround(real_node=True) sets it)"
        )
    spec = spec or real_node_spec()
    kubelet = cp.ca.issue(
        f"kubelet-{spec.name}",
        common_name=f"system:node:{spec.name}",
        organizations=["system:nodes"],
        client=True,
    )
    # system:kube-proxy is bound to the system:node-proxier ClusterRole by the default RBAC.
    proxy = cp.ca.issue("kube-proxy", common_name="system:kube-proxy", client=True)
    return RealNode(
        cp.run_dir / "node",
        binaries.root,
        server=cp.server,
        ca=cp.ca_cert_path,
        kubelet_cert=kubelet,
        proxy_cert=proxy,
        admin_kubeconfig=cp.kubeconfig,
        address=cp.advertise_address,
        spec=spec,
        images=images,
    )
