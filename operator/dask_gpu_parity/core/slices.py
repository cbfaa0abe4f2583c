"""ResourceSlices: the devices DRA drivers publish per node, as placement reads them.

A slice belongs to a node by ``spec.nodeName``, or by ``spec.pool.name`` when it names none
(NVIDIA's driver names each node's pool after the node). Only the newest ``pool.generation`` of
a pool counts: older slices linger until the driver deletes them. Slices for all nodes or a node
selector (network-attached devices) belong to no node and are left out, with a note.

Attribute values are typed (``{string|version|int|bool: …}``, keys bare in the driver's domain or
qualified); they are kept as plain strings. ``resource.k8s.io/v1beta1`` wraps a device's
attributes in ``basic``; that form is read too. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .plain import as_list, as_map

__all__ = ["SLICE_APIS", "Device", "SliceHome", "node_devices", "slice_devices", "slice_home"]

SLICE_APIS = frozenset({"resource.k8s.io/v1", "resource.k8s.io/v1beta1", "resource.k8s.io/v1beta2"})
_TYPES = ("string", "version", "int", "bool")


@dataclass(frozen=True)
class Device:
    """One published device: its driver, name, attributes (plain strings) and memory."""

    driver: str
    name: str
    attributes: Mapping[str, str]
    memory: str | None = None


def _map(value: Any) -> Mapping[str, Any]:
    """``as_map`` with a fast path for the dicts YAML and JSON give (40,000 devices a fleet)."""
    return value if type(value) is dict else as_map(value)


def _attributes(driver: str, raw: Any) -> dict[str, str]:
    found: dict[str, str] = {}
    prefix = driver + "/"
    for key, typed in _map(raw).items():
        if type(typed) is not dict and not isinstance(typed, Mapping):  # dict: the fast path
            continue
        for kind in _TYPES:
            if (value := typed.get(kind)) is not None:
                text = str(value).lower() if value is True or value is False else str(value)
                found[str(key).removeprefix(prefix)] = text
                break
    return found


def _device(driver: str, raw: Any) -> Device | None:
    device = _map(raw)
    body = _map(device.get("basic")) or device  # v1beta1 wraps them in "basic"
    name = device.get("name")
    if not isinstance(name, str):
        return None
    memory = _map(_map(body.get("capacity")).get("memory")).get("value")
    return Device(
        driver, name, _attributes(driver, body.get("attributes")), str(memory) if memory else None
    )


def _generation(spec: Mapping[str, Any]) -> int:
    value = as_map(spec.get("pool")).get("generation")
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


@dataclass(frozen=True, slots=True)
class SliceHome:
    """Whose devices a ResourceSlice lists: the node, its pool and the pool's generation."""

    node: str
    pool: tuple[str, str]  # (driver, pool name)
    generation: int


def slice_home(spec: Mapping[str, Any]) -> SliceHome | None:
    """The node a slice's ``spec`` belongs to; ``None`` for no single node (or no driver)."""
    driver = spec.get("driver")
    pool = as_map(spec.get("pool")).get("name")
    node = spec.get("nodeName") or (
        pool if not (spec.get("allNodes") or spec.get("nodeSelector")) else None
    )
    if not isinstance(driver, str) or not isinstance(node, str) or not node:
        return None
    return SliceHome(node, (driver, str(pool or node)), _generation(spec))


def slice_devices(spec: Mapping[str, Any]) -> list[Device]:
    """The devices a slice's ``spec`` lists (malformed entries left out)."""
    driver = str(spec.get("driver"))
    return [d for raw in as_list(spec.get("devices")) if (d := _device(driver, raw)) is not None]


def node_devices(
    slices: Iterable[Mapping[str, Any]],
) -> tuple[dict[str, tuple[Device, ...]], list[str]]:
    """The devices of each node, and notes on slices that belong to no node.

    Args:
        slices: ResourceSlice objects (other documents are ignored).

    Returns:
        The devices by node name (newest pool generation only), and one note per slice left out.
    """
    notes: list[str] = []
    newest: dict[tuple[str, str], tuple[int, list[tuple[str, Mapping[str, Any]]]]] = {}
    for item in slices:
        if item.get("kind") != "ResourceSlice" or item.get("apiVersion") not in SLICE_APIS:
            continue
        spec = as_map(item.get("spec"))
        home = slice_home(spec)
        if home is None:
            name = as_map(item.get("metadata")).get("name", "?")
            notes.append(
                f"ResourceSlice {name} belongs to no single node: its devices are left out"
            )
            continue
        held = newest.get(home.pool)
        if held is None or home.generation > held[0]:
            newest[home.pool] = (home.generation, [(home.node, spec)])
        elif home.generation == held[0]:
            held[1].append((home.node, spec))
    devices: dict[str, list[Device]] = {}
    for _, specs in newest.values():
        for node, spec in specs:
            devices.setdefault(node, []).extend(slice_devices(spec))
    return {node: tuple(found) for node, found in devices.items() if found}, notes
