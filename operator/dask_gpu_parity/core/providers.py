"""Managed Kubernetes services' GPU node labels: node pools stand in for driver classes.

GKE, AKS and EKS install NVIDIA drivers themselves and label no driver version; GFD may be
absent. A node pool has one driver, so the pool label identifies "the workers' driver" there.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["POOL_LABELS", "PROVIDERS", "PoolClass", "Provider"]


@dataclass(frozen=True)
class Provider:
    """A managed Kubernetes service whose GPU nodes may carry no GFD labels."""

    name: str
    pool_label: str  # names the node pool (or node group) a node belongs to
    labels: tuple[str, ...]  # provider labels that place a GPU pod: pool, GPU model, driver
    extended_resource_toleration: bool = True  # the service enables the admission plugin


# Sources (tests/fixtures/inventories/README.md has the links): GKE "Run GPUs in Standard node
# pools" and node pool labels; AKS "Use labels" and "Use NVIDIA GPUs"; EKS managed node groups
# and Karpenter's well-known labels. All three list ExtendedResourceToleration as enabled.
PROVIDERS = (
    Provider(
        "GKE",
        "cloud.google.com/gke-nodepool",
        (
            "cloud.google.com/gke-nodepool",
            "cloud.google.com/gke-accelerator",
            "cloud.google.com/gke-gpu-driver-version",
        ),
    ),
    Provider("AKS", "kubernetes.azure.com/agentpool", ("kubernetes.azure.com/agentpool",)),
    Provider(
        "EKS",
        "eks.amazonaws.com/nodegroup",
        ("eks.amazonaws.com/nodegroup", "k8s.amazonaws.com/accelerator"),
    ),
    Provider(
        "Karpenter",
        "karpenter.sh/nodepool",
        ("karpenter.sh/nodepool", "karpenter.k8s.aws/instance-gpu-name"),
    ),
    # Karpenter before v0.32 (the v1alpha5 Provisioner API) labels its nodes with the
    # Provisioner's name; v1beta1 renamed the label (karpenter.sh/v0.32/upgrading/
    # v1beta1-reference, "Karpenter Labels": karpenter.sh/provisioner-name ->
    # karpenter.sh/nodepool).
    Provider("Karpenter", "karpenter.sh/provisioner-name", ("karpenter.sh/provisioner-name",)),
)
# Provider labels the scheduler copies from the workers: they stand for the driver where GFD
# labels are missing (one node pool, one driver).
POOL_LABELS = frozenset(label for p in PROVIDERS for label in p.labels)


@dataclass(frozen=True, order=True)
class PoolClass:
    """A provider's node pool: one driver for all its nodes when GFD labels are missing."""

    label: str
    pool: str

    def __str__(self) -> str:
        return f"node pool {self.label}={self.pool}"
