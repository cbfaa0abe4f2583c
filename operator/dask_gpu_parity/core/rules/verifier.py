"""DGP009: the scheduler pod proves its GPU before the scheduler starts."""

from __future__ import annotations

from collections.abc import Mapping

from dask_gpu_parity.core.findings import Finding
from dask_gpu_parity.core.inventory import DriverClass
from dask_gpu_parity.core.verifier import init_container
from dask_gpu_parity.names import VERIFIER_CONTAINER

from .context import Context

__all__ = ["verifier"]


def verifier(ctx: Context, pinned: DriverClass | None) -> list[Finding]:
    """Inject the ``gpu-parity-check`` init container, expecting ``pinned``'s driver if known."""
    policy, scheduler = ctx.policy, ctx.view.scheduler
    if not policy.verifier_enabled:
        return []
    init = scheduler.spec.get("initContainers")
    if init is None:
        init = []
    if not isinstance(init, list) or any(
        isinstance(c, Mapping) and c.get("name") == VERIFIER_CONTAINER for c in init
    ):
        return []
    gpus = scheduler.gpu_requests()
    if not gpus or not scheduler.container.get("image"):
        return []  # DGP001/DGP003 could not be fixed; the verifier would not run
    init.append(
        init_container(
            scheduler.container,
            gpu_resource=gpus[0].resource,
            gpu_count=str(gpus[0].quantity),
            expect_driver=pinned.driver if pinned and policy.verifier_expect_driver else None,
            min_compute_capability=policy.verifier_min_compute_capability,
            expect_cuda=cuda.version if (cuda := ctx.view.cuda) and cuda.minor_known else None,
            image=policy.verifier_image,
            cpu=policy.verifier_cpu,
            memory=policy.verifier_memory,
        )
    )
    scheduler.spec["initContainers"] = init
    return [
        Finding.of(
            "DGP009",
            f"{scheduler.ptr}/initContainers",
            f"Scheduler pod does not prove its GPU before starting: add the {VERIFIER_CONTAINER} "
            "init container (fails fast with the reason instead of a hang or a pickling error)",
        )
    ]
