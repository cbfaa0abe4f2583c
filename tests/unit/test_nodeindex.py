"""The shape-grouped node index answers every placement question as the plain inventory does."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dask_gpu_parity.admission.nodeindex import IndexedInventory, NodeIndex, referenced_keys
from dask_gpu_parity.core.engine import evaluate
from dask_gpu_parity.core.inventory import DriverClass, GpuNode, Inventory
from dask_gpu_parity.core.policy import Policy
from tests.unit.gpunodes import CLASSES, node
from tests.unit.helpers import cluster, example

# A tenth of the profile's examples, at least 50 (10,000 nightly): each runs evaluate twice.
EXAMPLES = max(settings().max_examples // 10, 50)
PRODUCTS = ["NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3", "Tesla-T4"]


UPGRADE_STATE = "nvidia.com/gpu-driver-upgrade-state"  # the GPU Operator's, during upgrades


def indexed(manifests: list[dict[str, Any]]) -> IndexedInventory:
    index = NodeIndex()
    for manifest in manifests:
        index.upsert(GpuNode.from_node(manifest), manifest["metadata"]["name"])
    snapshot = index.snapshot()
    assert snapshot is not None
    return snapshot


def names(nodes: Any) -> list[str]:
    return sorted(n.name for n in nodes)


def same_answers(plain: Inventory, fast: Inventory, pod_spec: Any, other: Any = None) -> None:
    assert fast.size == plain.size
    # Capacity: how the nodes of one pod (workers) and another (the scheduler) overlap.
    other = {} if other is None else other
    for resource in ("nvidia.com/gpu", "nvidia.com/mig-1g.10gb"):
        assert fast.overlap(fast.fitting(pod_spec), fast.fitting(other), resource) == plain.overlap(
            plain.fitting(pod_spec), plain.fitting(other), resource
        )
    assert fast.fits_any(pod_spec) == plain.fits_any(pod_spec)
    assert names(fast.fitting(pod_spec)) == names(plain.fitting(pod_spec))
    fast_classes = fast.classes(fast.fitting(pod_spec))
    plain_classes = plain.classes(plain.fitting(pod_spec))
    assert {dc: names(ns) for dc, ns in fast_classes.items()} == {
        dc: names(ns) for dc, ns in plain_classes.items()
    }
    assert {dc: names(ns) for dc, ns in fast.classes().items()} == {
        dc: names(ns) for dc, ns in plain.classes().items()
    }
    for dc, members in plain_classes.items():
        for resource in ("nvidia.com/gpu", "nvidia.com/mig-1g.10gb"):
            assert fast.allocatable(fast_classes[dc], resource) == plain.allocatable(
                members, resource
            )
        assert fast.legacy_labels(fast_classes[dc]) == plain.legacy_labels(members)
        for key in (UPGRADE_STATE, "kubernetes.io/hostname", "zone"):
            assert fast.label_values(fast_classes[dc], key) == plain.label_values(members, key)
    for dc in plain.classes():
        assert names(fast.of_class(dc)) == names(plain.of_class(dc))
        assert fast.legacy_labels(fast.of_class(dc)) == plain.legacy_labels(plain.of_class(dc))
        assert fast.allocatable(fast.of_class(dc), "nvidia.com/gpu") == plain.allocatable(
            plain.of_class(dc), "nvidia.com/gpu"
        )
    assert names(fast.nodes) == names(plain.nodes)
    assert fast.taints() == plain.taints()


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
        st.sampled_from(["zone", "pool", UPGRADE_STATE]), st.sampled_from(["a", "upgrade-done"])
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
def test_indexed_inventory_answers_like_the_plain_one(
    manifests: list[dict[str, Any]], pod_spec: dict[str, Any], other: dict[str, Any]
) -> None:
    unique = list({m["metadata"]["name"]: m for m in manifests}.values())
    same_answers(Inventory.from_nodes(unique), indexed(unique), pod_spec, other)


@settings(max_examples=EXAMPLES)
@given(
    st.lists(node_strategy, min_size=1, max_size=12),
    pod_spec_strategy,
    st.booleans(),
    scheduler_pool,
    st.integers(min_value=0, max_value=12),
    st.sampled_from(IMAGES),
)
def test_evaluate_gives_the_same_result_on_either(  # noqa: PLR0917  # one argument per strategy
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
    plain = evaluate(doc, Policy(), Inventory.from_nodes(unique))
    fast = evaluate(doc, Policy(), indexed(unique))
    assert fast.patched == plain.patched
    assert fast.findings == plain.findings


@pytest.mark.parametrize(
    "name", ["gpu-cluster-tcp.yaml", "gpu-cluster-ucx.yaml", "gpu-daskjob.yaml"]
)
def test_examples_evaluate_alike_on_a_large_inventory(name: str) -> None:
    manifests = [node(f"{i:04d}", *CLASSES[i % 3], product=PRODUCTS[i % 3]) for i in range(600)]
    fast = indexed(manifests)
    assert fast.shapes == 3  # 600 nodes, 3 shapes: placement asks 3 questions, not 600
    plain = Inventory.from_nodes(manifests)
    doc = example(name)
    assert evaluate(doc, Policy(), fast).findings == evaluate(doc, Policy(), plain).findings


# -- incremental changes -----------------------------------------------------------------------


def test_changes_one_node_at_a_time() -> None:
    index = NodeIndex()
    a0, a1 = node("a0"), node("a1")
    first = index.upsert(GpuNode.from_node(a0), "a0")
    assert (first.before, first.after, first.changed, first.shapes_changed) == (
        None,
        DriverClass("580.95.05", "13.0"),
        True,
        True,
    )
    second = index.upsert(GpuNode.from_node(a1), "a1")
    assert second.changed
    assert not second.shapes_changed
    snapshot = index.snapshot()
    assert snapshot is index.snapshot()  # the same object until a change
    heartbeat = index.upsert(GpuNode.from_node(node("a1")), "a1")
    assert not heartbeat.changed
    assert index.snapshot() is snapshot

    upgraded = index.upsert(GpuNode.from_node(node("a1", "570.172.08", "12.8")), "a1")
    assert upgraded.before == DriverClass("580.95.05", "13.0")
    assert upgraded.after == DriverClass("570.172.08", "12.8")
    assert upgraded.shapes_changed
    assert index.driver_class("a1") == DriverClass("570.172.08", "12.8")
    assert index.class_counts() == {
        DriverClass("580.95.05", "13.0"): 1,
        DriverClass("570.172.08", "12.8"): 1,
    }
    assert index.snapshot() is not snapshot

    gone = index.upsert(None, "a0")  # no longer a GPU node
    assert (gone.before, gone.after, gone.shapes_changed) == (
        DriverClass("580.95.05", "13.0"),
        None,
        True,
    )
    assert index.driver_class("a0") is None
    assert len(index) == 1
    index.delete("a1")
    assert index.snapshot() is None
    assert index.class_counts() == {}


def test_incremental_index_equals_a_rebuild() -> None:
    index = NodeIndex()
    current: dict[str, dict[str, Any]] = {}
    for step in range(300):
        name = f"n{step * 7 % 40}"
        if step % 5 == 4:
            index.delete(name)
            current.pop(name, None)
            continue
        manifest = node(name, *CLASSES[step % 3], cordoned=step % 11 == 0, gpus=str(step % 3 + 1))
        index.upsert(GpuNode.from_node(manifest), name)
        current[name] = manifest
    snapshot = index.snapshot()
    assert snapshot is not None
    pod = {"containers": [{"name": "w", "resources": {"limits": {"nvidia.com/gpu": "2"}}}]}
    same_answers(Inventory.from_nodes(current.values()), snapshot, pod)


def test_a_label_holding_the_node_name_is_per_node() -> None:
    manifests = [node(f"n{i}", extra={"example.com/node-id": f"n{i}"}) for i in range(4)]
    fast = indexed(manifests)
    assert fast.shapes == 1
    pinned = {
        "nodeSelector": {"example.com/node-id": "n2"},
        "tolerations": [{"operator": "Exists"}],
    }
    assert names(fast.fitting(pinned)) == ["n2"]


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
