"""Property tests over generated Dask resources (hypothesis).

The examples per property come from the hypothesis profile (``tests/unit/conftest.py``): 200 in
`make unit`, 100,000 in `make nightly`.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from hypothesis import example, given, settings
from hypothesis import strategies as st

from dask_gpu_parity.core import schema
from dask_gpu_parity.core.engine import evaluate, opted_out
from dask_gpu_parity.core.gpu import gpu_requests
from dask_gpu_parity.core.inventory import Inventory
from dask_gpu_parity.core.patch import pointer
from dask_gpu_parity.core.plain import get_in
from dask_gpu_parity.core.policy import (
    Delivery,
    Placement,
    PlacementSettings,
    Policy,
    SchedulerSettings,
    VerifierSettings,
)
from dask_gpu_parity.core.resources import view
from tests.unit.helpers import cluster, nodes

INVENTORY = Inventory.from_nodes(nodes())
POLICIES = [
    Policy(),
    Policy(
        tcp_severity=Policy().tcp_severity,
        placement=PlacementSettings(strategy=Placement.COPY_WORKERS),
        verifier=VerifierSettings(enabled=False),
    ),
    Policy(
        scheduler=SchedulerSettings(
            gpu_resource="nvidia.com/gpu",
            node_selector=(("nvidia.com/gpu.product", "Tesla-T4"),),
        ),
    ),
    Policy(
        placement=PlacementSettings(strategy=Placement.NONE),
        verifier=VerifierSettings(image="registry.example.com/probe:0.0.9"),
    ),
    Policy(verifier=VerifierSettings(delivery=Delivery.INLINE)),
]

GPU = st.sampled_from(
    ["nvidia.com/gpu", "nvidia.com/gpu.shared", "nvidia.com/mig-1g.10gb", "nvidia.com/mig-3g.40gb"]
)
NAMES = st.sampled_from(["cpu", "memory", "ephemeral-storage"])
quantity = st.one_of(
    st.sampled_from(["1", "2", "0", "500m", "1Gi", "4"]),
    st.integers(min_value=0, max_value=8),
    st.floats(min_value=0, max_value=4, allow_nan=False).map(lambda f: round(f, 2)),
)
garbage = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)
resources = st.fixed_dictionaries(
    {},
    optional={
        "limits": st.dictionaries(GPU | NAMES, quantity, max_size=3),
        "requests": st.dictionaries(GPU | NAMES, quantity, max_size=3),
    },
)
env_names = st.sampled_from(
    [
        "EXTRA_PIP_PACKAGES",
        "EXTRA_CONDA_PACKAGES",
        "UCX_TLS",
        "DASK_DISTRIBUTED_UCXX__CREATE_CUDA_CONTEXT",
        "HOME",
        "DASK_DISTRIBUTED__COMM__DEFAULT_SCHEME",
    ]
)
env = st.lists(
    st.fixed_dictionaries(
        {"name": env_names, "value": st.sampled_from(["ucx", "True", "False", "x", "xgboost"])}
    ),
    max_size=3,
    unique_by=lambda e: e["name"],
)
args = st.lists(
    st.sampled_from(
        [
            "dask",
            "scheduler",
            "worker",
            "--protocol",
            "ucx",
            "tcp",
            "ucxx://s:8786",
            "--protocol=ucx",
        ]
    ),
    max_size=4,
)
container = st.fixed_dictionaries(
    {"name": st.sampled_from(["scheduler", "worker", "main", "sidecar"])},
    optional={
        "image": st.sampled_from(["rapids:1", "rapids:2", "dask:1"]),
        "resources": resources,
        "env": env,
        "args": args,
        "imagePullPolicy": st.sampled_from(["Always", "IfNotPresent"]),
        "restartPolicy": st.just("Always"),  # pruned by the 1.21 schema
    },
)
toleration = st.sampled_from(
    [
        {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"},
        {"key": "spot", "operator": "Exists"},
        {"key": "nvidia.com/gpu", "operator": "Equal", "value": "present", "effect": "NoSchedule"},
    ]
)
expression = st.fixed_dictionaries(
    {
        "key": st.sampled_from(
            [
                "nvidia.com/gpu.product",
                "nvidia.com/cuda.driver-version.major",
                "zone",
                "nvidia.com/cuda.runtime-version.full",
            ]
        ),
        "operator": st.sampled_from(["In", "NotIn", "Exists"]),
    },
    optional={
        "values": st.lists(
            st.sampled_from(["580", "570", "NVIDIA-A100-SXM4-80GB", "Tesla-T4", "13.0", "a"]),
            min_size=1,
            max_size=2,
        )
    },
)
affinity = st.builds(
    lambda terms: {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}
        }
    },
    st.lists(
        st.fixed_dictionaries({"matchExpressions": st.lists(expression, min_size=1, max_size=3)}),
        min_size=1,
        max_size=2,
    ),
)
pod_spec = st.fixed_dictionaries(
    {"containers": st.lists(container, min_size=1, max_size=3)},
    optional={
        "nodeSelector": st.dictionaries(
            st.sampled_from(
                ["nvidia.com/gpu.product", "nvidia.com/cuda.driver-version.full", "pool"]
            ),
            st.sampled_from(["NVIDIA-A100-SXM4-80GB", "Tesla-T4", "580.95.05", "big"]),
            max_size=2,
        ),
        "tolerations": st.lists(toleration, max_size=2),
        "affinity": affinity,
        "runtimeClassName": st.sampled_from(["nvidia", "runc"]),
        "initContainers": st.lists(container, max_size=1),
        "schedulingGates": st.just([{"name": "x"}]),  # pruned by the 1.21 schema
    },
)
service = st.just(
    {"ports": [{"name": "tcp-comm", "port": 8786, "targetPort": "tcp-comm"}]}
) | st.just({"ports": [{"port": 8786, "targetPort": 8786}]})
metadata = st.fixed_dictionaries(
    {"name": st.sampled_from(["c", "gpu-cluster"])},
    optional={
        "namespace": st.just("ns"),
        "annotations": st.dictionaries(
            st.sampled_from(["gpuparity.dask.org/skip", "team"]),
            st.sampled_from(["true", "false", "x"]),
            max_size=1,
        ),
    },
)


def cluster_spec() -> st.SearchStrategy[dict[str, Any]]:
    return st.builds(
        lambda s, svc, w, n: {
            "scheduler": {"spec": s, "service": svc},
            "worker": {"replicas": n, "spec": w},
        },
        pod_spec,
        service,
        pod_spec,
        st.integers(min_value=0, max_value=4),
    )


dask_cluster = st.builds(
    lambda m, s: {
        "apiVersion": "kubernetes.dask.org/v1",
        "kind": "DaskCluster",
        "metadata": m,
        "spec": s,
    },
    metadata,
    cluster_spec(),
)
dask_job = st.builds(
    lambda m, s, j: {
        "apiVersion": "kubernetes.dask.org/v1",
        "kind": "DaskJob",
        "metadata": m,
        "spec": {"job": {"spec": j}, "cluster": {"spec": s}},
    },
    metadata,
    cluster_spec(),
    pod_spec,
)
worker_group = st.builds(
    lambda m, w: {
        "apiVersion": "kubernetes.dask.org/v1",
        "kind": "DaskWorkerGroup",
        "metadata": m,
        "spec": {"cluster": "c", "worker": {"replicas": 1, "spec": w}},
    },
    metadata,
    pod_spec,
)
well_formed = st.one_of(dask_cluster, dask_job, worker_group)


@st.composite
def malformed(draw: st.DrawFn) -> dict[str, Any]:
    """A well-formed resource with one subtree replaced by anything at all."""
    doc = copy.deepcopy(draw(well_formed))  # st.just() values are shared between draws
    paths = list(_paths(doc))
    path = draw(st.sampled_from(paths))
    value = draw(garbage)
    node: Any = doc
    for segment in path[:-1]:
        node = node[segment]
    node[path[-1]] = value
    return doc


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> Any:
    items = (
        node.items()
        if isinstance(node, dict)
        else enumerate(node)
        if isinstance(node, list)
        else ()
    )
    for key, value in items:
        yield (*prefix, key)
        yield from _paths(value, (*prefix, key))


resources_any = st.one_of(well_formed, malformed())
case = st.tuples(resources_any, st.sampled_from(range(len(POLICIES))), st.booleans())


def _leaves(node: Any, prefix: tuple[Any, ...] = ()) -> Any:
    if isinstance(node, dict) and node:
        for key, value in node.items():
            yield from _leaves(value, (*prefix, key))
    elif isinstance(node, list) and node:
        for index, value in enumerate(node):
            yield from _leaves(value, (*prefix, index))
    else:
        yield prefix, node


def _is_gpu(doc: Any) -> bool:
    dask = view(doc)
    return dask is not None and bool(gpu_requests(get_in(doc, dask.worker_path or ())))


_WORKER_AFFINITY = {
    "affinity": {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "nvidia.com/gpu.product", "operator": "In"}]}
                ]
            }
        }
    }
}


@given(case)
# Found by this property: a null scheduler affinity was changed under a deeper finding path, and
# a null node selector term made a second fix change the result again.
@example((cluster(worker_extra=_WORKER_AFFINITY, scheduler_extra={"affinity": None}), 0, False))
@example(
    (
        cluster(
            worker_extra=_WORKER_AFFINITY,
            scheduler_extra={
                "affinity": {
                    "nodeAffinity": {
                        "requiredDuringSchedulingIgnoredDuringExecution": {
                            "nodeSelectorTerms": [None]
                        }
                    }
                }
            },
        ),
        0,
        False,
    )
)
def test_evaluate_is_total_idempotent_additive_and_valid(
    item: tuple[dict[str, Any], int, bool],
) -> None:
    doc, policy_index, with_inventory = item
    policy, inventory = POLICIES[policy_index], INVENTORY if with_inventory else None
    before = copy.deepcopy(doc)
    result = evaluate(doc, policy, inventory)  # never raises
    assert doc == before, "evaluate mutated its input"

    again = evaluate(result.patched, policy, inventory)
    assert again.patched == result.patched, "not idempotent"
    assert not [f for f in again.findings if f.fixable], "a fixable finding survived the fix"

    fixed = [f.path for f in result.findings if f.fixable]
    for path, value in _leaves(doc):  # additive: every user field survives unless a rule fixed it
        got = get_in(result.patched, path)
        ptr = pointer(*path)
        if (
            got == value
            or value in ({}, [])
            or any(ptr.startswith(p + "/") or ptr == p for p in fixed)
        ):
            continue
        raise AssertionError(f"{ptr} changed by no fixable finding: {value!r} -> {got!r}")

    if not _is_gpu(doc) or view(doc) is None:
        assert result.patched == doc, "a CPU-only or non-Dask resource was changed"

    dask = view(doc)
    if (
        dask is not None
        and not opted_out(doc)
        and not any(f.code == "DGP011" for f in result.findings)
    ):
        rejected = [i for i in schema.validate(result.patched, dask.kind) if not i.pruned]
        assert not rejected, f"the fix made the resource invalid: {rejected}"


CRDS = (
    Path(__import__("dask_kubernetes").__file__).parent
    / "operator/deployment/helm/dask-kubernetes-operator/crds"
)
REAL_SCHEMAS = {
    (crd := yaml.safe_load(p.read_text()))["spec"]["names"]["kind"]: crd["spec"]["versions"][0][
        "schema"
    ]["openAPIV3Schema"]
    for p in CRDS.glob("*.yaml")
}


VALIDATORS = {kind: jsonschema.Draft7Validator(s) for kind, s in REAL_SCHEMAS.items()}


def _drop_nulls(node: Any) -> Any:
    if isinstance(node, dict):
        return {k: _drop_nulls(v) for k, v in node.items() if v is not None}
    if isinstance(node, list):
        return [_drop_nulls(v) for v in node]
    return node


# Each example validates against the full CRD schema: the profile's count, at most 1,000.
_SCHEMA_EXAMPLES = min(settings.default.max_examples, 1000)


@settings(max_examples=int(os.environ.get("DGP_JSONSCHEMA_EXAMPLES", _SCHEMA_EXAMPLES)))
@given(well_formed, st.sampled_from(range(len(POLICIES))))
def test_fixed_gpu_resources_validate_against_the_real_crd_schemas(
    doc: dict[str, Any], policy_index: int
) -> None:
    """An independent validator (jsonschema) over the dask-kubernetes package's own CRDs."""
    result = evaluate(doc, POLICIES[policy_index], INVENTORY)
    if opted_out(doc) or any(f.code == "DGP011" for f in result.findings):
        return  # invalid input, or not ours to fix
    kind = result.patched["kind"]
    body = {k: v for k, v in _drop_nulls(result.patched).items() if k != "metadata"}
    VALIDATORS[kind].validate(body)  # raises on any type or required error


def test_the_strategies_generate_gpu_and_cpu_resources() -> None:
    """Guard against a strategy that silently stopped producing GPU clusters."""
    seen = {"gpu": 0, "cpu": 0}

    @settings(max_examples=300, database=None, derandomize=True)  # no flake: a fixed sample
    @given(well_formed)
    def sample(doc: dict[str, Any]) -> None:
        seen["gpu" if _is_gpu(doc) else "cpu"] += 1

    sample()
    # A strategy that stopped producing one kind gives 0 of it; about a tenth of the sample is
    # GPU clusters, and the exact count moves with hypothesis' profile, so the floor stays low.
    assert seen["gpu"] >= 10
    assert seen["cpu"] >= 10


@pytest.mark.parametrize("kind", sorted(REAL_SCHEMAS))
def test_bundled_schemas_are_the_packages(kind: str) -> None:
    assert schema.schemas()[kind] == schema._strip(REAL_SCHEMAS[kind])
