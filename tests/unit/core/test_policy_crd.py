"""The policy reader's table of known keys agrees with the DaskGPUPolicy CRD's schema.

The CRD (``crds/gpuparity.dask.org_daskgpupolicies.yaml`` and the chart's copy) is what the API
server validates and defaults with; ``core/policy_keys.KEYS`` is what the CLI and the operator
read. A key added to one and not the other, or an enum value, minimum or default that differs,
fails here.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from dask_gpu_parity.core.policy import Policy, PolicyError
from dask_gpu_parity.core.policy_keys import KEYS, Key, setting_of
from dask_gpu_parity.core.policy_manifest import load
from dask_gpu_parity.core.policy_values import SELECTOR_KEYS, SELECTOR_OPERATORS
from tests.unit.helpers import ROOT

CRD_NAME = "gpuparity.dask.org_daskgpupolicies.yaml"
CRD_FILES = [ROOT / "crds" / CRD_NAME, ROOT / "charts" / "dask-gpu-parity" / "crds" / CRD_NAME]
BY_PATH = {key.path: key for key in KEYS}


def _spec_schema(path: Path) -> dict[str, Any]:
    crd = yaml.safe_load(path.read_text())
    [version] = crd["spec"]["versions"]
    spec: dict[str, Any] = version["schema"]["openAPIV3Schema"]["properties"]["spec"]
    return spec


def _leaves(schema: dict[str, Any], path: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """Each leaf under ``path``: a property with no properties of its own, or a table key."""
    if "properties" in schema and path not in BY_PATH:
        for name, child in schema["properties"].items():
            yield from _leaves(child, f"{path}.{name}")
    else:
        yield path, schema


@pytest.fixture(params=CRD_FILES, ids=["crds", "chart-crds"], scope="module")
def crd_leaves(request: pytest.FixtureRequest) -> dict[str, dict[str, Any]]:
    return dict(_leaves(_spec_schema(request.param), "spec"))


def _manifest(spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "gpuparity.dask.org/v1alpha1",
        "kind": "DaskGPUPolicy",
        "metadata": {"name": "p"},
        "spec": spec,
    }


def _nested(path: str, value: Any, spec: dict[str, Any] | None = None) -> dict[str, Any]:
    """``{"scheduler": {"gpuCount": 2}}`` for ``spec.scheduler.gpuCount`` (added to ``spec``)."""
    spec = {} if spec is None else spec
    at = spec
    *parents, leaf = path.split(".")[1:]
    for name in parents:
        at = at.setdefault(name, {})
    at[leaf] = value
    return spec


def test_the_chart_ships_the_same_crd() -> None:
    first, chart = (yaml.safe_load(p.read_text()) for p in CRD_FILES)
    assert first == chart


def test_every_crd_key_is_known_to_the_reader_and_every_known_key_is_in_the_crd(
    crd_leaves: dict[str, dict[str, Any]],
) -> None:
    assert sorted(crd_leaves) == sorted(BY_PATH)


@pytest.mark.parametrize("key", KEYS, ids=[k.path for k in KEYS])
def test_type_enum_minimum_and_default_agree_with_the_crd(
    key: Key, crd_leaves: dict[str, dict[str, Any]]
) -> None:
    schema = crd_leaves[key.path]
    assert key.type == schema["type"]
    assert key.enum == tuple(schema.get("enum", ()))
    assert key.minimum == schema.get("minimum")
    assert key.default == schema.get("default")


def test_namespace_selector_fields_and_operators_agree_with_the_crd(
    crd_leaves: dict[str, dict[str, Any]],
) -> None:
    selector = crd_leaves["spec.namespaceSelector"]
    assert tuple(selector["properties"]) == SELECTOR_KEYS
    expression = selector["properties"]["matchExpressions"]["items"]
    assert tuple(expression["properties"]["operator"]["enum"]) == SELECTOR_OPERATORS


def test_the_crd_defaults_written_out_read_as_the_built_in_defaults(
    crd_leaves: dict[str, dict[str, Any]],
) -> None:
    """What the API server fills in changes nothing the reader would have assumed."""
    spec: dict[str, Any] = {}
    for path, schema in crd_leaves.items():
        if "default" in schema:
            _nested(path, schema["default"], spec)
    assert spec["verifier"]["resources"] == {"cpu": "100m", "memory": "256Mi"}
    assert load(_manifest(spec)) == load(_manifest({})) == Policy(name="p")


@pytest.mark.parametrize(
    ("path", "value"),
    [(k.path, v) for k in KEYS for v in k.enum],
    ids=[f"{k.path}={v}" for k in KEYS for v in k.enum],
)
def test_every_crd_enum_value_reads_as_itself(path: str, value: str) -> None:
    policy = load(_manifest(_nested(path, value)))
    assert str(setting_of(policy, BY_PATH[path].setting)) == value


# Values around each CRD pattern: what the reader accepts the API server must accept too.
PATTERN_CASES = [
    ("spec.scheduler.gpuResource", "nvidia.com/gpu"),
    ("spec.scheduler.gpuResource", "nvidia.com/gpu.shared"),
    ("spec.scheduler.gpuResource", "nvidia.com/mig-1g.10gb"),
    ("spec.scheduler.gpuResource", "nvidia.com/mig-3g.40gb"),
    ("spec.scheduler.gpuResource", "amd.com/gpu"),
    ("spec.scheduler.gpuResource", "nvidia.com/gpus"),
    ("spec.scheduler.gpuResource", "deviceclass.resource.kubernetes.io/gpu-580-95-5.nvidia.com"),
    ("spec.scheduler.gpuResource", "deviceclass.resource.kubernetes.io/"),
    ("spec.scheduler.gpuResource", "gpu"),
    ("spec.scheduler.gpuResource", "nvidia.com/"),
    ("spec.scheduler.gpuResource", "Nvidia.com/gpu"),
    ("spec.scheduler.gpuResource", "nvidia.com/gpu-580"),
    ("spec.scheduler.gpuResource", "example.com/gpu"),
    ("spec.verifier.image", "registry.example.com/dask-gpu-parity-probe:0.2.0"),
    ("spec.verifier.image", "registry.example.com:5000/probe@sha256:" + "a" * 64),
    ("spec.verifier.image", "registry.example.com/probe"),
    ("spec.verifier.image", "registry.example.com/probe:"),
    ("spec.verifier.minComputeCapability", "8.0"),
    ("spec.verifier.minComputeCapability", "10.3"),
    ("spec.verifier.minComputeCapability", "8"),
    ("spec.verifier.minComputeCapability", "v8.0"),
]


@pytest.mark.parametrize(("path", "value"), PATTERN_CASES, ids=[v for _, v in PATTERN_CASES])
def test_what_the_reader_accepts_matches_the_crd_pattern(
    path: str, value: str, crd_leaves: dict[str, dict[str, Any]]
) -> None:
    matches = re.search(crd_leaves[path]["pattern"], value) is not None
    if matches:
        load(_manifest(_nested(path, value)))
    else:
        with pytest.raises(PolicyError) as raised:
            load(_manifest(_nested(path, value)))
        assert raised.value.field == path


def test_image_and_registry_exclude_each_other_in_both() -> None:
    [version] = yaml.safe_load(CRD_FILES[0].read_text())["spec"]["versions"]
    verifier = version["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]["verifier"]
    rules = [v["rule"] for v in verifier["x-kubernetes-validations"]]
    assert rules == ["!(has(self.image) && has(self.registry))"]
    spec = {"verifier": {"image": "r.example/p:1", "registry": "r.example"}}
    with pytest.raises(PolicyError) as raised:
        load(_manifest(spec))
    assert raised.value.field == "spec.verifier.registry"


@pytest.mark.parametrize(
    ("spec", "field", "message"),
    [
        ({"mode": "sometimes"}, "spec.mode", "expected one of enforce, warn, audit, off"),
        ({"priority": "high"}, "spec.priority", "expected an integer, found 'high'"),
        ({"tcpSeverity": "Error"}, "spec.tcpSeverity", "expected one of error, warning"),
        ({"scheduler": {"gpuCount": 0}}, "spec.scheduler.gpuCount", "must be at least 1"),
        ({"scheduler": {"nodeSelector": {"a": 1}}}, "spec.scheduler.nodeSelector.a", "expected a"),
        ({"scheduler": "t4"}, "spec.scheduler", "expected an object, found str"),
        ({"verifier": {"resources": {"cpu": 1}}}, "spec.verifier.resources.cpu", "quantity"),
        ({"verifier": {"resources": {"gpu": "1"}}}, "spec.verifier.resources.gpu", "unknown"),
        ({"drift": {"repair": "yes"}}, "spec.drift.repair", "expected true or false"),
        ({"colour": "blue"}, "spec.colour", "unknown field (known: drift, mode, namespaceSelector"),
        (
            {"namespaceSelector": {"matchLabels": {"a": 1}}},
            "spec.namespaceSelector.matchLabels.a",
            "expected a string",
        ),
    ],
    ids=lambda v: v if isinstance(v, str) and v.startswith("spec") else None,
)
def test_each_invalid_value_names_its_key_as_data(
    spec: dict[str, Any], field: str, message: str
) -> None:
    with pytest.raises(PolicyError) as raised:
        load(_manifest(spec))
    assert raised.value.field == field
    assert message in raised.value.message
    assert str(raised.value) == f"{field}: {raised.value.message}"
