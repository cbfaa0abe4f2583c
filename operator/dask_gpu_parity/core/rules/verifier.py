"""DGP009 and DGP018: the scheduler pod proves its GPU, with this release's verifier.

DGP009 injects the verifier where there is none. DGP018 converges one that an earlier release (or
another policy) injected: an older probe image tag becomes this release's (one line), the inline
form becomes the by-reference form (or back, where the policy asks for ``inline``). A
``gpu-parity-check`` that is not in one of our forms was written by hand and is left alone.
Both also make sure the scheduler container can reach the driver's compute libraries under the
legacy nvidia-container-runtime, which the verifier then proves with the scheduler's own env.

Under DRA the init container asks for the scheduler's own extended resource: Kubernetes with
PR #134882 (measured on v1.36.3) hands it the device the scheduler container then gets
(docs/operator.md, "The verifier under DRA"). Where the scheduler asks for a DeviceClass that
pins ``driverVersion``, the probe expects that driver, as the devices spell it (semver).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dask_gpu_parity.core.deviceclasses import IMPLICIT_PREFIX, DeviceClasses
from dask_gpu_parity.core.findings import Finding
from dask_gpu_parity.core.inventory import DriverClass
from dask_gpu_parity.core.policy import Delivery, Policy
from dask_gpu_parity.core.verifier import (
    CAPABILITIES,
    Form,
    copy_container,
    default_probe_image,
    form_of,
    init_container,
    probe_source,
    volume,
)
from dask_gpu_parity.names import VERIFIER_CONTAINER, VERIFIER_COPY_CONTAINER, VERIFIER_VOLUME

from .context import Context

__all__ = ["probe_image", "verifier"]


def probe_image(policy: Policy) -> str:
    """The probe image the policy asks for: its own reference, else this release's (mirrored)."""
    return policy.verifier.image or default_probe_image(policy.verifier.registry)


def _expected_driver(ctx: Context, pinned: DriverClass | None, resource: str) -> str | None:
    """The driver the scheduler is pinned to: by node labels, or by its DeviceClass' selector."""
    if pinned is not None:
        return pinned.driver
    classes: DeviceClasses | None = ctx.inventory.device_classes if ctx.inventory else None
    if classes is None:
        return None
    named = classes.by_name.get(resource.removeprefix(IMPLICIT_PREFIX))
    found = (
        [named]
        if resource.startswith(IMPLICIT_PREFIX) and named is not None
        else [c for c in classes.gpu_classes() if c.extended_resource_name == resource]
    )
    drivers = {c.pins.get("driverVersion") for c in found if c.gpu and c.exact}
    return drivers.pop() if len(drivers) == 1 else None


def verifier(ctx: Context, pinned: DriverClass | None) -> list[Finding]:
    """Inject or converge the verifier, expecting ``pinned``'s driver if known."""
    policy, scheduler = ctx.policy, ctx.view.scheduler
    gpus = scheduler.gpu_requests()
    if not gpus or not scheduler.container.get("image"):
        return []  # DGP001/DGP003 could not be fixed; the verifier would not run
    findings = _compute_capability(ctx)
    init = scheduler.spec.get("initContainers", [])
    if not policy.verifier.enabled or not isinstance(init, list):
        return findings
    init = list(init)
    at = next((i for i, c in enumerate(init) if _named(c, VERIFIER_CONTAINER)), None)
    inline = policy.verifier.delivery is Delivery.INLINE
    wanted = init_container(
        scheduler.container,
        inline=inline,
        gpu_resource=gpus[0].resource,
        gpu_count=str(gpus[0].quantity),
        expect_driver=_expected_driver(ctx, pinned, gpus[0].resource)
        if policy.verifier.expect_driver
        else None,
        min_compute_capability=policy.verifier.min_compute_capability,
        expect_cuda=cuda.version if (cuda := ctx.view.cuda) and cuda.minor_known else None,
        cpu=policy.verifier.resources.cpu,
        memory=policy.verifier.resources.memory,
    )
    ptr = f"{scheduler.ptr}/initContainers"
    copy = None if inline else copy_container(probe_image(policy))
    if at is None:
        _install(scheduler.spec, init, len(init), wanted, copy)
        return [
            *findings,
            Finding.of(
                "DGP009",
                ptr,
                f"Scheduler pod does not prove its GPU before starting: add the "
                f"{VERIFIER_CONTAINER} init container (fails fast with the reason instead of a "
                "hang or a pickling error)",
            ),
        ]
    outdated = _converge(scheduler.spec, init, at, wanted, copy, ptr=ptr)
    return findings + ([outdated] if outdated else [])


def _converge(
    spec: dict[str, Any],
    init: list[Any],
    at: int,
    wanted: dict[str, Any],
    copy: dict[str, Any] | None,
    *,
    ptr: str,
) -> Finding | None:
    """Bring an injected verifier to the wanted form (``copy``: by reference); ``None`` if it is.

    Within the same form only what a release changes is touched: the probe image's reference,
    or the inline source. Between forms, our init containers are replaced where they stand.
    """
    form = form_of(init[at], init)
    if form is None:
        return None  # a gpu-parity-check written by hand: the user's
    if form is Form.REFERENCE and copy is not None:
        index = next(i for i, c in enumerate(init) if _named(c, VERIFIER_COPY_CONTAINER))
        have, volumes = init[index].get("image"), _list(spec, "volumes")
        if have == copy["image"] and any(_named(v, VERIFIER_VOLUME) for v in volumes):
            return None
        init[index] = {**init[index], "image": copy["image"]}
        spec["initContainers"] = init
        _add_volume(spec)
        return Finding.of(
            "DGP018",
            f"{ptr}/{index}/image",
            f"Scheduler verifier copies the probe from {have}, not {copy['image']} (this "
            "release's, or the policy's verifier.image or registry): update the reference",
        )
    if form is Form.INLINE and copy is None:
        if init[at]["command"][3] == probe_source():
            return None
        init[at] = {**init[at], "command": wanted["command"]}
        spec["initContainers"] = init
        return Finding.of(
            "DGP018",
            f"{ptr}/{at}/command/3",
            "Scheduler verifier embeds the probe of another release: embed this release's",
        )
    was = {
        Form.REFERENCE: "copies the probe from the probe image",
        Form.INLINE: "embeds the probe's source",
        Form.OWN_IMAGE: "runs verify-gpu in the operator's image, not the scheduler's",
    }[form]
    ours = (VERIFIER_CONTAINER, VERIFIER_COPY_CONTAINER)
    kept = [c for c in init if not _named(c, *ours)]
    at = sum(1 for c in init[:at] if not _named(c, *ours))
    if copy is None and any(_named(v, VERIFIER_VOLUME) for v in _list(spec, "volumes")):
        spec["volumes"] = [v for v in spec["volumes"] if not _named(v, VERIFIER_VOLUME)]
        if not spec["volumes"]:
            del spec["volumes"]
    _install(spec, kept, at, wanted, copy)
    now = f"copies it from {copy['image']}" if copy else "embeds its source (verifier.delivery)"
    return Finding.of(
        "DGP018",
        f"{ptr}/{at}",
        f"Scheduler verifier {was}; this release's {now}: replace it",
    )


def _install(
    spec: dict[str, Any],
    init: list[Any],
    at: int,
    check: dict[str, Any],
    copy: dict[str, Any] | None,
) -> None:
    """Put ``check``, and the ``copy`` step before it if any, into ``init`` at ``at``."""
    init[at:at] = [copy, check] if copy is not None else [check]
    spec["initContainers"] = init
    if copy is not None:
        _add_volume(spec)


def _add_volume(spec: dict[str, Any]) -> None:
    volumes = _list(spec, "volumes")
    if not any(_named(v, VERIFIER_VOLUME) for v in volumes):
        spec["volumes"] = [*volumes, volume()]


def _compute_capability(ctx: Context) -> list[Finding]:
    """A scheduler container that names its driver capabilities names ``compute`` among them.

    Under the legacy nvidia-container-runtime, the driver libraries mounted are those
    ``NVIDIA_DRIVER_CAPABILITIES`` names: without ``compute`` there is no ``libcuda``, and no
    CUDA (under CDI the device brings every library and the variable is not read). Unset, the
    image's value applies (CUDA images set ``compute,utility``), else the runtime's default
    (``utility,compute``); the verifier, run with the same env, proves that case on the node.
    """
    container = ctx.view.scheduler.container
    entry = next((e for e in _list(container, "env") if _named(e, CAPABILITIES)), None)
    have = entry.get("value") if entry is not None else None
    if not isinstance(have, str) or not have.strip():
        return []  # unset, empty (the runtime's default) or valueFrom: not ours to judge
    if {c.strip() for c in have.split(",")} & {"compute", "all"}:
        return []
    assert entry is not None  # for mypy: have is a str only when entry is set
    entry["value"] = f"{have},compute"
    return [
        Finding.of(
            "DGP007",
            f"{ctx.view.scheduler.container_ptr}/env",
            f"Scheduler container's {CAPABILITIES} is {have!r}, without compute: the legacy "
            "nvidia-container-runtime then mounts no libcuda and CUDA fails; add compute "
            "(CDI mounts it anyway)",
        )
    ]


def _list(mapping: Mapping[str, Any], key: str) -> list[Any]:
    value = mapping.get(key)
    return value if isinstance(value, list) else []


def _named(item: Any, *names: str) -> bool:
    return isinstance(item, Mapping) and item.get("name") in names
