"""Driver-class pins: the required node affinity that keeps a pod on one driver class.

One place writes them. Admission's DGP014 (:mod:`.pinning`) pins scheduler and workers
with them, and the drift watch repins a scheduler Deployment with them (``admission/placement``),
so the two cannot disagree on what a pin to a class is, nor on which labels it reads: GFD's
``cuda.driver-version.full`` and ``cuda.runtime-version.full``, or, where some node of the class
carries only the pre-2024 labels, the ``cuda.driver.major``/``minor``/``rev`` and
``cuda.runtime.major``/``minor`` ones (GFD's two label families). Pure.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from dask_gpu_parity.core.inventory import CUDA_FULL, DRIVER_FULL, DriverClass, Inventory
from dask_gpu_parity.core.nodes import LEGACY_CUDA, LEGACY_DRIVER
from dask_gpu_parity.core.plain import as_list, as_map, copy_json
from dask_gpu_parity.core.providers import PoolClass

from .affinity import expressions, terms

__all__ = ["CLASS_KEYS", "NodeClass", "legacy_pin", "pin_expressions", "pins_driver", "repinned"]

NodeClass = DriverClass | PoolClass

# Every GFD key a driver-class pin may use (new and legacy): a repin replaces them all.
CLASS_KEYS = frozenset(
    {
        DRIVER_FULL,
        CUDA_FULL,
        "nvidia.com/cuda.driver-version.major",
        "nvidia.com/cuda.driver-version.minor",
        "nvidia.com/cuda.driver-version.revision",
        "nvidia.com/cuda.runtime-version.major",
        "nvidia.com/cuda.runtime-version.minor",
        *LEGACY_DRIVER,
        *LEGACY_CUDA,
    }
)
_REQUIRED = ("affinity", "nodeAffinity", "requiredDuringSchedulingIgnoredDuringExecution")


def pin_expressions(nc: NodeClass, legacy: bool) -> list[dict[str, Any]]:
    """The ``matchExpressions`` that keep a pod on ``nc`` (GFD's legacy keys with ``legacy``)."""
    if isinstance(nc, PoolClass):
        return [{"key": nc.label, "operator": "In", "values": [nc.pool]}]
    if not legacy:
        return [
            {"key": DRIVER_FULL, "operator": "In", "values": [nc.driver]},
            {"key": CUDA_FULL, "operator": "In", "values": [nc.cuda]},
        ]
    # The driver's parts as GFD splits them (major, minor, and rev where there is one); CUDA's
    # major and minor, a missing minor read as 0.
    driver = zip(LEGACY_DRIVER, nc.driver.split("."), strict=False)
    cuda = zip(LEGACY_CUDA, [*nc.cuda.split("."), "0"][:2], strict=True)
    return [{"key": key, "operator": "In", "values": [part]} for key, part in (*driver, *cuda)]


def legacy_pin(inventory: Inventory, dc: DriverClass) -> bool:
    """Whether a pin to ``dc`` must use the legacy keys: some node of it carries only those."""
    return inventory.legacy_labels(inventory.of_class(dc))


def pins_driver(spec: Any, dc: DriverClass) -> bool:
    """Whether the pod spec's own constraints keep it on ``dc``'s driver, on any node that joins.

    A nodeSelector on the driver label, or every required term carrying the pin's driver
    expressions (new keys or legacy ones).
    """
    if as_map(as_map(spec).get("nodeSelector")).get(DRIVER_FULL) == dc.driver:
        return True
    forms = [
        [e for e in pin_expressions(dc, legacy) if "driver" in e["key"]] for legacy in (False, True)
    ]
    found = terms(as_map(spec))
    return bool(found) and all(
        any(all(e in expressions(t) for e in form) for form in forms) for t in found or []
    )


def _legacy_form(spec: Mapping[str, Any]) -> bool:
    """Whether the spec's own pin uses only the legacy driver keys (the form admission chose)."""
    keys = {e.get("key") for t in terms(spec) or [] for e in expressions(t) if isinstance(e, dict)}
    return "nvidia.com/cuda.driver.major" in keys and DRIVER_FULL not in keys


def repinned(
    spec: Mapping[str, Any], dc: DriverClass, legacy: bool | None = None
) -> dict[str, Any]:
    """A copy of the pod spec that requires nodes of ``dc``: its other constraints kept.

    Driver and CUDA expressions (any GFD key) in the required terms are replaced by the pin's,
    every other expression kept; without required terms, one is added. ``legacy``: whether to
    pin with the legacy keys (:func:`legacy_pin`); ``None`` keeps the form of the spec's own pin.
    """
    if legacy is None:
        legacy = _legacy_form(spec)
    fixed: dict[str, Any] = copy_json(dict(spec))
    node = fixed
    for key in _REQUIRED[:-1]:
        node = node.setdefault(key, {})
    required = node.setdefault(_REQUIRED[-1], {"nodeSelectorTerms": []})
    found = [t for t in as_list(required.get("nodeSelectorTerms")) if isinstance(t, dict)] or [{}]
    pins = pin_expressions(dc, legacy)
    for term in found:
        kept = [
            e
            for e in as_list(term.get("matchExpressions"))
            if not (isinstance(e, dict) and e.get("key") in CLASS_KEYS)
        ]
        term["matchExpressions"] = kept + copy_json(pins)
    required["nodeSelectorTerms"] = found
    return fixed
