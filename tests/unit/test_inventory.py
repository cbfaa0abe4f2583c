"""The inventory answers every placement question per shape as a walk over its nodes would."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from decimal import Decimal
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dask_gpu_parity.admission.decide.nodeindex import NodeIndex
from dask_gpu_parity.core.engine import evaluate
from dask_gpu_parity.core.inventory import (
    PER_NODE_LABELS,
    DriverClass,
    GpuNode,
    Inventory,
    Overlap,
    PodFilter,
    Shape,
    referenced_keys,
)
from dask_gpu_parity.core.policy import Policy
from dask_gpu_parity.core.providers import PROVIDERS, PoolClass
from tests.unit.helpers import cluster, example

# A tenth of the profile's examples (1,000 in CI, 10,000 nightly): each runs evaluate twice.
EXAMPLES = max(settings().max_examples // 10, 50)
CLASSES = [("580.95.05", "13.0"), ("570.172.08", "12.8"), ("550.163.01", "12.4")]
PRODUCTS = ["NVIDIA-A100-SXM4-80GB", "NVIDIA-H100-80GB-HBM3", "Tesla-T4"]


def node(
    name: str,
    driver: str = "580.95.05",
    cuda: str = "13.0",
    *,
    product: str = "NVIDIA-A100-SXM4-80GB",
    gpus: str = "8",
    legacy: bool = False,
    taint: bool = True,
    cordoned: bool = False,
    extra: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    labels = {
        "kubernetes.io/hostname": name,
        "nvidia.com/gfd.timestamp": str(hash(name) % 10_000),
        "nvidia.com/gpu.product": product,
        **(extra or {}),
    }
    if legacy:
        major, minor, rev = [*driver.split("."), ""][:3]
        cmajor, cminor = cuda.split(".")
        labels |= {
            "nvidia.com/cuda.driver.major": major,
            "nvidia.com/cuda.driver.minor": minor,
            "nvidia.com/cuda.driver.rev": rev,
            "nvidia.com/cuda.runtime.major": cmajor,
            "nvidia.com/cuda.runtime.minor": cminor,
        }
    else:
        labels |= {
            "nvidia.com/cuda.driver-version.full": driver,
            "nvidia.com/cuda.runtime-version.full": cuda,
            "nvidia.com/cuda.driver-version.major": driver.split(".", maxsplit=1)[0],
        }
    spec: dict[str, Any] = {}
    if taint:
        spec["taints"] = [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]
    if cordoned:
        spec["unschedulable"] = True
    return {
        "metadata": {"name": name, "labels": labels},
        "spec": spec,
        "status": {"allocatable": {"nvidia.com/gpu": gpus, "cpu": "8"}},
    }


UPGRADE_STATE = "nvidia.com/gpu-driver-upgrade-state"  # the GPU Operator's, during upgrades


def indexed(manifests: list[dict[str, Any]]) -> Inventory:
    index = NodeIndex()
    for manifest in manifests:
        index.upsert(GpuNode.from_node(manifest), manifest["metadata"]["name"])
    snapshot = index.snapshot()
    assert snapshot is not None
    return snapshot


class Walk:
    """The reference: every question answered by walking the nodes, one by one."""

    def __init__(self, manifests: Iterable[Mapping[str, Any]]) -> None:
        found = (GpuNode.from_node(m) for m in manifests)
        self.nodes = tuple(sorted((n for n in found if n), key=lambda n: n.name))

    @property
    def size(self) -> int:
        return len(self.nodes)

    def fits_any(self, pod_spec: Any) -> bool:
        return any(PodFilter.of(pod_spec).fits(n) for n in self.nodes)

    def fitting(self, pod_spec: Any) -> list[GpuNode]:
        return [n for n in self.nodes if PodFilter.of(pod_spec).fits(n)]

    def classes(self, nodes: Sequence[GpuNode] | None = None) -> dict[DriverClass, list[GpuNode]]:
        grouped: dict[DriverClass, list[GpuNode]] = {}
        for node in self.nodes if nodes is None else nodes:
            if node.driver_class is not None:
                grouped.setdefault(node.driver_class, []).append(node)
        return grouped

    def of_class(self, dc: DriverClass) -> list[GpuNode]:
        return [n for n in self.nodes if n.driver_class == dc]

    def unlabelled(self, nodes: Sequence[GpuNode] | None = None) -> list[GpuNode]:
        return [n for n in (self.nodes if nodes is None else nodes) if n.driver_class is None]

    @property
    def labelled(self) -> bool:
        return any(n.driver_class is not None for n in self.nodes)

    @property
    def provider(self) -> object:
        for provider in PROVIDERS:
            if any(label in n.labels for n in self.nodes for label in provider.labels):
                return provider
        return None

    def pools(self, nodes: Sequence[GpuNode]) -> dict[PoolClass, list[GpuNode]]:
        grouped: dict[PoolClass, list[GpuNode]] = {}
        for node in nodes:
            for provider in PROVIDERS:
                if pool := node.labels.get(provider.pool_label):
                    grouped.setdefault(PoolClass(provider.pool_label, pool), []).append(node)
                    break
        return grouped

    def allocatable(self, nodes: Sequence[GpuNode], resource: str) -> Decimal:
        return sum((n.allocatable.get(resource, Decimal(0)) for n in nodes), Decimal(0))

    def overlap(
        self, workers: Sequence[GpuNode], scheduler: Sequence[GpuNode], resource: str
    ) -> Overlap:
        mine = {n.name for n in scheduler}
        theirs = {n.name for n in workers}
        groups = Counter((n.allocatable.get(resource, Decimal(0)), n.name in mine) for n in workers)
        return Overlap(groups, bool(mine - theirs))

    def legacy_labels(self, nodes: Sequence[GpuNode]) -> bool:
        return any(n.uses_legacy_labels for n in nodes)

    def label_values(self, nodes: Sequence[GpuNode], key: str) -> frozenset[str]:
        return frozenset(n.labels.get(key, "") for n in nodes)

    def taints(self) -> frozenset[tuple[str, str, str]]:
        return frozenset(t for n in self.nodes for t in n.taints)


def one_shape_per_node(manifests: Iterable[Mapping[str, Any]]) -> Inventory:
    """An inventory whose every shape is one node: its answers are a walk over the nodes."""
    nodes = Walk(manifests).nodes
    return Inventory([Shape(n, (n,), n.driver_class) for n in nodes], PER_NODE_LABELS)


def names(nodes: Any) -> list[str]:
    return sorted(n.name for n in nodes)


def same_answers(plain: Walk, fast: Inventory, pod_spec: Any, other: Any = None) -> None:
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
    assert fast.labelled == plain.labelled
    assert fast.provider == plain.provider
    assert names(fast.unlabelled()) == names(plain.unlabelled())
    fitting = fast.fitting(pod_spec)
    assert names(fast.unlabelled(fitting)) == names(plain.unlabelled(plain.fitting(pod_spec)))
    assert {p: names(ns) for p, ns in fast.pools(fitting).items()} == {
        p: names(ns) for p, ns in plain.pools(plain.fitting(pod_spec)).items()
    }


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
