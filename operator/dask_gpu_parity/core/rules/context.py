"""What every parity rule reads: the cluster's view, the policy and the node inventory.

A rule is a small function ``rule(ctx) -> list[Finding]``. It reads :class:`Context` and, when
the fix is safe, writes the fix into the view's (patched) dicts; a fix that would overwrite
something the user wrote is reported instead (GitOps would fight the change).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dask_gpu_parity.core.findings import Finding
from dask_gpu_parity.core.inventory import Inventory
from dask_gpu_parity.core.patch import pointer
from dask_gpu_parity.core.policy import ExtendedResourceToleration, Policy
from dask_gpu_parity.core.view import ClusterView

__all__ = ["Context", "copy_or_report"]


@dataclass(frozen=True)
class Context:
    """One evaluation: the cluster as resolved once, the policy in force, the GPU nodes."""

    view: ClusterView
    policy: Policy
    inventory: Inventory | None

    @property
    def gpu_resource(self) -> str:
        """The GPU resource the scheduler should request: the policy's, else the workers'."""
        return self.policy.scheduler.gpu_resource or self.view.worker_gpus[0].resource

    @property
    def extended_tolerations(self) -> bool:
        """Whether pods tolerate the taints of the extended resources they request.

        ``auto`` assumes the ExtendedResourceToleration admission plugin where the nodes belong
        to a managed service that enables it (GKE, AKS, EKS), and not elsewhere (upstream
        Kubernetes leaves it off).
        """
        setting = self.policy.placement.extended_resource_toleration
        if setting == ExtendedResourceToleration.AUTO:  # == : a str value compares equal too
            provider = self.inventory.provider if self.inventory is not None else None
            return provider is not None and provider.extended_resource_toleration
        return setting == ExtendedResourceToleration.ENABLED

    @property
    def ucx(self) -> bool:
        """Whether the cluster speaks UCX (GPU buffers go through the scheduler)."""
        return self.view.protocol == "ucx"


def copy_or_report(
    target: dict[str, Any],
    target_ptr: str,
    key: str,
    want: Any,
    *,
    code: str,
    copied: str,
    differs: Callable[[Any], str],
) -> list[Finding]:
    """Give ``target[key]`` (at ``target_ptr``) the workers' value ``want``.

    Absent or empty, it is copied (message ``copied``); another value is the user's choice
    and is reported, not overwritten (message ``differs(value)``).
    """
    have = target.get(key)
    if not isinstance(want, str) or not want or have == want:
        return []
    path = target_ptr + pointer(key)
    if have is None or have == "":
        target[key] = want
        return [Finding.of(code, path, copied)]
    return [Finding.of(code, path, differs(have), fixable=False)]
