"""The whole proving ground in one object: control plane, node pools, CRDs and the dask operator."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from kubernetes import client

from .binaries import Binaries
from .cluster import ControlPlane
from .dask_operator import DaskOperator, install_crds
from .dra import publish
from .node import NodeBinaries, RealNode, find_node_binaries
from .node.host import node_ip
from .node.join import join
from .nodes import api_client, create_nodes, wait_nodes_ready
from .policyreports import install_policyreport_crd
from .pools import node_manifests, pools

__all__ = ["ProvingGround"]


class ProvingGround:
    """``ControlPlane`` + kwok node pools + the Dask CRDs + the dask-kubernetes operator.

    ``start()`` runs the stages in order and records how long each took in ``timings``;
    ``stop()`` (or leaving the ``with`` block) stops everything it started.

    ``real_node=True`` also joins a real node (``provingground.node``: kubelet, containerd,
    kube-proxy, CoreDNS; ``make node`` builds it) to the same API server, once the kwok nodes
    are Ready, with the test image and ``node_images`` (OCI archives) imported; it raises
    ``NodeBinariesMissingError`` at construction when the binaries are not built.

    ``sizes`` may name DRA pools (e.g. ``pools.FLEETS["mixed"]``): NVIDIA's DeviceClasses and
    each DRA node's ResourceSlice are then published once the nodes are Ready.
    """

    def __init__(
        self,
        run_dir: Path,
        *,
        sizes: Mapping[str, int] | None = None,
        dask_operator: bool = True,
        binaries: Binaries | None = None,
        real_node: bool = False,
        node_images: Sequence[Path] = (),
    ) -> None:
        self.node_binaries: NodeBinaries | None = find_node_binaries() if real_node else None
        self.control_plane = ControlPlane(
            run_dir, binaries=binaries, advertise_address=node_ip() if real_node else None
        )
        self.node_images = list(node_images)
        self.real_node: RealNode | None = None
        self.sizes = dict(sizes or {})
        self.with_dask_operator = dask_operator
        self.dask_operator: DaskOperator | None = None
        self.api: client.ApiClient | None = None
        self.timings: dict[str, float] = {}

    def start(self) -> ProvingGround:
        """Start the control plane, create and await the nodes, install CRDs, run the operator."""
        t0 = time.monotonic()
        cp = self.control_plane
        try:
            cp.start()
            self.timings["control plane ready"] = time.monotonic() - t0
            self.api = api_client(cp.kubeconfig)
            expected = sum(p.size for p in pools(self.sizes))
            create_nodes(self.api, node_manifests(self.sizes))
            wait_nodes_ready(self.api, expected)
            self.timings["nodes ready"] = time.monotonic() - t0
            if any(p.dra for p in pools(self.sizes)):
                publish(self.api, self.sizes)
                self.timings["resource slices published"] = time.monotonic() - t0
            if self.node_binaries is not None:
                images = [self.node_binaries.test_image, *self.node_images]
                self.real_node = join(cp, self.node_binaries, images=images).start()
                self.timings["real node ready"] = time.monotonic() - t0
            if self.with_dask_operator:
                install_crds(cp.kubectl)
                install_policyreport_crd(cp.kubectl)  # as on a cluster that runs Kyverno
                self.dask_operator = DaskOperator(cp.kubeconfig, cp.logs, env=cp.env).start()
                self.timings["dask operator live"] = time.monotonic() - t0
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """Stop the operator, the real node (removing its host state), then the control plane."""
        if self.dask_operator is not None:
            self.dask_operator.stop()
        if self.real_node is not None:
            self.real_node.stop()
        if self.api is not None:
            self.api.close()
            self.api = None
        self.control_plane.stop()

    def __enter__(self) -> ProvingGround:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
