"""DeviceClasses read as NVIDIA's DRA driver ships them (tests/fixtures/dra/EXPECTED.md §1, §2)."""

from __future__ import annotations

from typing import Any

import pytest

from dask_gpu_parity.core.deviceclasses import (
    NVIDIA_CLASSES,
    DeviceClass,
    DeviceClasses,
    device_class,
    version_key,
)
from dask_gpu_parity.core.gpu import gpu_requests, is_gpu_resource
from tests.unit.core.dra import IMPLICIT, catalogue, items

# name -> (driver, device type, extendedResourceName, pins, GPU class?)
CLASSES = {
    "gpu.nvidia.com": ("gpu.nvidia.com", "gpu", "nvidia.com/gpu", {}, True),
    "mig.nvidia.com": ("gpu.nvidia.com", "mig", None, {}, True),
    "vfio.gpu.nvidia.com": ("gpu.nvidia.com", "vfio", None, {}, False),
    "mig-1g-12gb.gpu.nvidia.com": (
        "gpu.nvidia.com",
        "mig",
        "nvidia.com/mig-1g.12gb",
        {"profile": "1g.12gb"},
        True,
    ),
    "gpu-580-95-5.nvidia.com": ("gpu.nvidia.com", "gpu", None, {"driverVersion": "580.95.5"}, True),
}


def _cel_class(name: str, expression: str) -> DeviceClass:
    """A ``resource.k8s.io/v1`` DeviceClass with one CEL selector, as read."""
    obj = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": expression}}]},
    }
    found = device_class(obj)
    assert found is not None
    return found


@pytest.mark.parametrize(
    "obj",
    [*items("deviceclasses.yaml"), *items("deviceclass-pinned-580.yaml")],
    ids=lambda o: o["metadata"]["name"],
)
def test_nvidia_device_classes_are_read_from_their_cel_selectors(obj: dict[str, Any]) -> None:
    found = device_class(obj)
    assert found is not None
    driver, kind, extended, pins, gpu = CLASSES[found.name]
    assert (found.driver, found.device_type, found.extended_resource_name) == (
        driver,
        kind,
        extended,
    )
    assert dict(found.pins) == pins
    assert found.exact
    assert found.gpu is gpu


def test_v1beta1_classes_have_no_extended_resource_name_but_are_gpu_classes() -> None:
    found = [device_class(o) for o in items("deviceclasses-v1beta1.yaml")]
    assert [(c.name, c.extended_resource_name, c.gpu) for c in found if c] == [
        ("gpu.nvidia.com", None, True),
        ("mig.nvidia.com", None, True),
    ]


@pytest.mark.parametrize(
    "obj",
    [
        {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}},
        {"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass", "metadata": {}},
        {"apiVersion": "example.com/v1", "kind": "DeviceClass", "metadata": {"name": "x"}},
        "not a mapping",
    ],
    ids=["node", "no-name", "other-api", "scalar"],
)
def test_what_is_no_device_class_reads_as_none(obj: Any) -> None:
    assert device_class(obj) is None


def test_a_selector_with_a_disjunction_is_not_read_exactly_and_its_pins_do_not_filter() -> None:
    found = _cel_class(
        "either",
        "device.driver == 'gpu.nvidia.com' && "
        "(device.attributes['gpu.nvidia.com'].productName == 'A' || "
        "device.attributes['gpu.nvidia.com'].productName == 'B')",
    )
    assert not found.exact
    assert found.gpu
    assert found.matches("gpu.nvidia.com", {"type": "gpu", "productName": "B"})


def test_another_drivers_class_is_no_gpu_class() -> None:
    found = _cel_class("fpga.example.com", "device.driver == 'fpga.example.com'")
    assert not found.gpu


@pytest.mark.parametrize(
    ("name", "gpu"),
    [
        ("nvidia.com/gpu", True),
        ("nvidia.com/mig-1g.12gb", True),
        (IMPLICIT + "gpu.nvidia.com", True),
        (IMPLICIT + "mig.nvidia.com", True),
        (IMPLICIT + "vfio.gpu.nvidia.com", False),
        (IMPLICIT + "gpu-580-95-5.nvidia.com", False),  # not in the built-in catalogue
        ("example.com/fpga", False),
    ],
)
def test_the_built_in_catalogue_knows_nvidias_chart_classes(name: str, gpu: bool) -> None:
    assert is_gpu_resource(name) is gpu


def test_given_classes_extend_the_catalogue_with_their_names() -> None:
    classes = catalogue("deviceclass-pinned-580.yaml")
    assert is_gpu_resource(IMPLICIT + "gpu-580-95-5.nvidia.com", classes)
    assert is_gpu_resource(IMPLICIT + "gpu.nvidia.com", classes)  # the built-in ones stay
    assert NVIDIA_CLASSES.unknown_class(IMPLICIT + "gpu-580-95-5.nvidia.com") == (
        "gpu-580-95-5.nvidia.com"
    )
    assert classes.unknown_class(IMPLICIT + "gpu-580-95-5.nvidia.com") is None


def test_a_gpu_class_with_its_own_extended_resource_name_makes_that_name_a_gpu() -> None:
    big = DeviceClass("big-gpu", "gpu.nvidia.com", "gpu", "example.com/big-gpu")
    spec = {"containers": [{"resources": {"limits": {"example.com/big-gpu": "1"}}}]}
    assert gpu_requests(spec) == []
    assert [r.resource for r in gpu_requests(spec, NVIDIA_CLASSES.extend([big]))] == [
        "example.com/big-gpu"
    ]


def test_a_class_given_overrides_the_built_in_one_of_its_name() -> None:
    cpu = DeviceClass("gpu.nvidia.com", "example.com", None, None)
    classes = NVIDIA_CLASSES.extend([cpu])
    assert not is_gpu_resource(IMPLICIT + "gpu.nvidia.com", classes)
    assert isinstance(classes, DeviceClasses)


@pytest.mark.parametrize(
    ("a", "b"),
    [("580.95.05", "580.95.5"), ("13.0", "13.0.0"), ("570.172.08", "570.172.8")],
)
def test_gfd_and_dra_spellings_of_a_version_compare_equal(a: str, b: str) -> None:
    assert version_key(a) == version_key(b)


def test_pinned_to_finds_the_class_of_one_driver_in_either_spelling() -> None:
    classes = catalogue("deviceclass-pinned-580.yaml")
    found = classes.pinned_to("580.95.05")
    assert found is not None
    assert found.name == "gpu-580-95-5.nvidia.com"
    assert classes.pinned_to("570.172.08") is None


def test_a_class_selecting_either_of_two_types_selects_any_type() -> None:
    found = _cel_class(
        "gpu-or-mig",
        "device.driver == 'gpu.nvidia.com' && "
        "(device.attributes['gpu.nvidia.com'].type == 'gpu' || "
        "device.attributes['gpu.nvidia.com'].type == 'mig')",
    )
    assert (found.device_type, found.exact, found.gpu) == (None, False, True)
    assert found.matches("gpu.nvidia.com", {"type": "mig"})


def test_a_pin_on_another_domains_attribute_keeps_its_domain() -> None:
    found = _cel_class(
        "gpu-on-root",
        "device.driver == 'gpu.nvidia.com' && "
        "device.attributes['resource.kubernetes.io'].pcieRoot == 'pci0000:64'",
    )
    assert dict(found.pins) == {"resource.kubernetes.io/pcieRoot": "pci0000:64"}
    assert found.matches("gpu.nvidia.com", {"resource.kubernetes.io/pcieRoot": "pci0000:64"})
    assert not found.matches("gpu.nvidia.com", {"resource.kubernetes.io/pcieRoot": "pci0000:00"})
