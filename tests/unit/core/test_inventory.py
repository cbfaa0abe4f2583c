"""The inventory answers every placement question per shape as a walk over its nodes would."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dask_gpu_parity.core.engine import evaluate
from dask_gpu_parity.core.inventory import (
    Inventory,
    referenced_keys,
)
from dask_gpu_parity.core.policy import Policy
from tests.unit.gpunodes import CLASSES, node
from tests.unit.helpers import cluster, example
from tests.unit.inventorywalk import (
    UPGRADE_STATE,
    Walk,
    indexed,
    names,
    one_shape_per_node,
    same_answers,
)

# A tenth of the profile's examples (1,000 in CI, 10,000 nightly): each runs evaluate twice.
EXAMPLES = max(settings().max_examples // 10, 50)
PRODUCTS = ["NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3", "Tesla-T4"]


# -- generated inventories and pod specs ------------------------------------------------------

node_strategy = st.builds(
    node,
    st.sampled_from([f"n{i}" for i in range(12)]),
    *(st.sampled_from(x) for x in zip(*CLASSES, strict=True)),
    product=st.sampled_from(PRODUCTS),
    gpus=st.sampled_from(["1", "2", "8"]),
    legacy=st.booleans(),
    taint=st.booleans(),
    cordoned=st.booleans(),
    extra=st.dictionaries(
        st.sampled_from(["zone", "pool", UPGRADE_STATE, "cloud.google.com/gke-nodepool"]),
        st.sampled_from(["a", "upgrade-done"]),
    ),
)
label_key = st.sampled_from(
    [
        "kubernetes.io/hostname",
        "nvidia.com/gpu.product",
        "nvidia.com/cuda.driver-version.full",
        "nvidia.com/cuda.driver.major",
        "zone",
        "pool",
    ]
)
label_value = st.sampled_from(["n0", "n3", "a", "b", "580.95.05", "570", *PRODUCTS])
expression = st.fixed_dictionaries(
    {
        "key": label_key,
        "operator": st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist"]),
        "values": st.lists(label_value, min_size=1, max_size=2),
    }
)
term = st.fixed_dictionaries(
    {"matchExpressions": st.lists(expression, max_size=2)},
    optional={
        "matchFields": st.lists(
            st.fixed_dictionaries(
                {
                    "key": st.just("metadata.name"),
                    "operator": st.just("In"),
                    "values": st.lists(st.sampled_from(["n1", "n2"]), min_size=1, max_size=2),
                }
            ),
            max_size=1,
        )
    },
)
pod_spec_strategy = st.fixed_dictionaries(
    {
        "containers": st.just([{"name": "w", "resources": {"limits": {"nvidia.com/gpu": "1"}}}]),
    },
    optional={
        "nodeSelector": st.dictionaries(label_key, label_value, max_size=2),
        "affinity": st.builds(
            lambda terms: {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}
                }
            },
            st.lists(term, max_size=2),
        ),
        "tolerations": st.just([{"key": "nvidia.com/gpu", "operator": "Exists"}]),
    },
)


# A scheduler on a pool of its own (core/rules/pools.py): a product, a custom label, preferred.
scheduler_pool = st.sampled_from(
    [
        {},
        {"nodeSelector": {"nvidia.com/gpu.product": "Tesla-T4"}},
        {"nodeSelector": {"pool": "a"}},
        {
            "affinity": {
                "nodeAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [
                        {
                            "weight": 100,
                            "preference": {
                                "matchExpressions": [
                                    {"key": "zone", "operator": "In", "values": ["a"]}
                                ]
                            },
                        }
                    ]
                }
            }
        },
    ]
)
# Known minor, major-only (RAPIDS since 25.12) and none at all.
IMAGES = ["rapids:1", "rapidsai/base:25.12-cuda12-py3.13", "rapidsai/base:25.10-cuda13.0-py3.12"]


@settings(max_examples=EXAMPLES * 2)
@given(st.lists(node_strategy, min_size=1, max_size=12), pod_spec_strategy, pod_spec_strategy)
def test_inventory_answers_like_a_walk_over_its_nodes(
    manifests: list[dict[str, Any]], pod_spec: dict[str, Any], other: dict[str, Any]
) -> None:
    unique = list({m["metadata"]["name"]: m for m in manifests}.values())
    walk = Walk(unique)
    same_answers(walk, Inventory.from_nodes(unique), pod_spec, other)
    same_answers(walk, indexed(unique), pod_spec, other)  # fed one node event at a time


@settings(max_examples=EXAMPLES)
@given(
    st.lists(node_strategy, min_size=1, max_size=12),
    pod_spec_strategy,
    st.booleans(),
    scheduler_pool,
    st.integers(min_value=0, max_value=12),
    st.sampled_from(IMAGES),
)
def test_evaluate_gives_the_same_result_per_shape_and_per_node(  # noqa: PLR0917  # one argument per strategy
    manifests: list[dict[str, Any]],
    worker_extra: dict[str, Any],
    ucx: bool,
    scheduler_extra: dict[str, Any],
    replicas: int,
    image: str,
) -> None:
    unique = list({m["metadata"]["name"]: m for m in manifests}.values())
    worker_extra = {k: v for k, v in worker_extra.items() if k != "containers"}
    doc = cluster(
        worker_extra=worker_extra,
        scheduler_extra=scheduler_extra,
        worker_container={"image": image},
    )
    doc["spec"]["worker"]["replicas"] = replicas
    if ucx:
        doc["spec"]["scheduler"]["spec"]["containers"][0]["args"] += ["--protocol", "ucx"]
    plain = evaluate(doc, Policy(), one_shape_per_node(unique))
    for fast in (
        evaluate(doc, Policy(), Inventory.from_nodes(unique)),
        evaluate(doc, Policy(), indexed(unique)),
    ):
        assert fast.patched == plain.patched
        assert fast.findings == plain.findings


@pytest.mark.parametrize(
    "name", ["gpu-cluster-tcp.yaml", "gpu-cluster-ucx.yaml", "gpu-daskjob.yaml"]
)
def test_examples_evaluate_alike_on_a_large_inventory(name: str) -> None:
    manifests = [node(f"{i:04d}", *CLASSES[i % 3], product=PRODUCTS[i % 3]) for i in range(600)]
    fast = Inventory.from_nodes(manifests)
    assert fast.shapes == 3  # 600 nodes, 3 shapes: placement asks 3 questions, not 600
    assert indexed(manifests).shapes == 3
    plain = one_shape_per_node(manifests)
    doc = example(name)
    assert evaluate(doc, Policy(), fast).findings == evaluate(doc, Policy(), plain).findings


def test_a_label_holding_the_node_name_is_per_node() -> None:
    manifests = [node(f"n{i}", extra={"example.com/node-id": f"n{i}"}) for i in range(4)]
    pinned = {
        "nodeSelector": {"example.com/node-id": "n2"},
        "tolerations": [{"operator": "Exists"}],
    }
    for fast in (Inventory.from_nodes(manifests), indexed(manifests)):
        assert fast.shapes == 1
        assert names(fast.fitting(pinned)) == ["n2"]
        assert fast.label_values(fast.fitting(pinned), "example.com/node-id") == {"n2"}


@pytest.mark.parametrize(
    ("pod_spec", "keys", "fields"),
    [
        pytest.param({}, set(), False, id="nothing"),
        pytest.param({"nodeSelector": {"a": "1"}}, {"a"}, False, id="selector"),
        pytest.param(
            {
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [
                                {"matchExpressions": [{"key": "b", "operator": "Exists"}]},
                                {"matchFields": [{"key": "metadata.name", "operator": "In"}]},
                            ]
                        }
                    }
                }
            },
            {"b"},
            True,
            id="affinity",
        ),
        pytest.param({"affinity": "junk"}, set(), False, id="malformed"),
    ],
)
def test_referenced_keys(pod_spec: Any, keys: set[str], fields: bool) -> None:
    assert referenced_keys(pod_spec) == (frozenset(keys), fields)


def test_the_inventory_cannot_be_changed() -> None:
    inventory = Inventory.from_nodes([node("a0"), node("a1")])
    with pytest.raises(AttributeError, match="immutable"):
        inventory.nodes = ()  # type: ignore[misc]  # what the test checks
    with pytest.raises(AttributeError, match="immutable"):
        del inventory._shapes  # what the test checks
    assert names(inventory.nodes) == ["a0", "a1"]
