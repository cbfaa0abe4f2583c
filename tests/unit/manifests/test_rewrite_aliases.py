"""``fix`` through YAML anchors and aliases: an edit lands only where the patch points.

A manifest written by ``yaml.safe_dump`` from Python objects shares every object used twice as
an anchor (``&id001``) and aliases (``*id001``); a hand-written one may share a block through
a merge key (``<<: *base``, YAML 1.1 merge, https://yaml.org/type/merge.html). The engine's
JSON Patch is computed on the plain data, where the two places are two values: the rewrite must
change one place and leave the anchor, and every other user of it, as they were.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from dask_gpu_parity.core.engine import evaluate
from dask_gpu_parity.core.patch import apply_in_place
from dask_gpu_parity.manifests import Source, render_fixed
from tests.unit.helpers import EXAMPLES


def _tcp() -> dict[str, Any]:
    data: dict[str, Any] = yaml.safe_load((EXAMPLES / "gpu-cluster-tcp.yaml").read_text())
    return data


def _fixed(text: str) -> tuple[Any, Any]:
    """(what fix wrote, re-read; the plain data with the engine's JSON Patch applied)."""
    plain = yaml.safe_load(text)
    patch = evaluate(plain, None, None).patch
    assert patch, "the input needs a fix"
    expected = json.loads(json.dumps(plain))  # no shared objects
    apply_in_place(expected, patch)
    written = render_fixed(Source("c.yaml", text), {0: [("", patch)]})
    return yaml.safe_load(written), expected


def test_a_volume_list_shared_by_safe_dump_gets_the_probe_volume_only_on_the_scheduler() -> None:
    cluster = _tcp()
    volumes = [{"name": "scratch", "emptyDir": {}}]  # one list object, written twice
    cluster["spec"]["scheduler"]["spec"]["volumes"] = volumes
    cluster["spec"]["worker"]["spec"]["volumes"] = volumes
    text = yaml.safe_dump(cluster, sort_keys=False)
    assert "&id001" in text
    assert "*id001" in text
    got, expected = _fixed(text)
    assert got == expected
    assert got["spec"]["worker"]["spec"]["volumes"] == [{"name": "scratch", "emptyDir": {}}]
    names = [v["name"] for v in got["spec"]["scheduler"]["spec"]["volumes"]]
    assert names == ["scratch", "gpu-parity-probe"]


def test_resources_shared_with_a_sidecar_give_only_the_scheduler_a_gpu() -> None:
    cluster = _tcp()
    scheduler = cluster["spec"]["scheduler"]["spec"]["containers"][0]
    sidecar = {"name": "log-shipper", "image": "fluent/fluent-bit:3.2", "resources": None}
    sidecar["resources"] = scheduler["resources"]  # the same mapping
    cluster["spec"]["scheduler"]["spec"]["containers"].append(sidecar)
    text = yaml.safe_dump(cluster, sort_keys=False)
    assert "*id001" in text
    got, expected = _fixed(text)
    assert got == expected
    containers = got["spec"]["scheduler"]["spec"]["containers"]
    assert containers[0]["resources"]["limits"] == {"nvidia.com/gpu": "1"}
    assert containers[1]["resources"] == {"requests": {"cpu": "1", "memory": "4Gi"}}


def test_the_anchor_stays_for_its_other_users() -> None:
    cluster = _tcp()
    env = [{"name": "TZ", "value": "UTC"}]
    cluster["spec"]["scheduler"]["spec"]["containers"][0]["env"] = env
    cluster["spec"]["worker"]["spec"]["containers"][0]["env"].extend(copy.deepcopy(env))
    for name in ("log-shipper", "metrics"):  # two more users of the scheduler's env
        sidecar = {"name": name, "image": "fluent/fluent-bit:3.2", "env": env}
        cluster["spec"]["scheduler"]["spec"]["containers"].append(sidecar)
    text = yaml.safe_dump(cluster, sort_keys=False)
    assert (text.count("&id001"), text.count("*id001")) == (1, 2)
    got, expected = _fixed(text)
    assert got == expected
    written = render_fixed(
        Source("c.yaml", text), {0: [("", evaluate(yaml.safe_load(text), None, None).patch)]}
    )
    # The scheduler has its own list now; the sidecars still share theirs.
    assert (written.count("&id001"), written.count("*id001")) == (1, 1)
    sidecars = got["spec"]["scheduler"]["spec"]["containers"][1:]
    assert [c["env"] for c in sidecars] == [env, env]


MERGED = """\
# A base container shared through a YAML merge key (https://yaml.org/type/merge.html)
apiVersion: kubernetes.dask.org/v1
kind: DaskCluster
metadata:
  name: merged
x-base: &base
  image: nvcr.io/nvidia/rapidsai/base:25.12-cuda13.0-py3.12
  resources:
    requests:
      cpu: "1"
spec:
  scheduler:
    spec:
      containers:
        - <<: *base
          name: scheduler
          args: [dask-scheduler]
  worker:
    replicas: 1
    spec:
      containers:
        - <<: *base
          name: worker
          args: [dask-cuda-worker]
          resources:
            limits:
              nvidia.com/gpu: "1"
"""


def test_a_merge_key_base_is_left_as_it_was() -> None:
    got, expected = _fixed(MERGED)
    assert got == expected
    assert got["x-base"]["resources"] == {"requests": {"cpu": "1"}}
    assert got["spec"]["scheduler"]["spec"]["containers"][0]["resources"]["limits"] == {
        "nvidia.com/gpu": "1"
    }


# Places of a DaskCluster a user may share between scheduler, workers and a sidecar.
_SLOTS = {
    "resources": [
        ("scheduler", "containers", 0, "resources"),
        ("scheduler", "containers", 1, "resources"),
        ("worker", "containers", 0, "resources"),
    ],
    "env": [
        ("scheduler", "containers", 0, "env"),
        ("scheduler", "containers", 1, "env"),
        ("worker", "containers", 0, "env"),
    ],
    "volumes": [("scheduler", "volumes"), ("worker", "volumes")],
    "tolerations": [("scheduler", "tolerations"), ("worker", "tolerations")],
    "args": [("scheduler", "containers", 1, "args"), ("worker", "containers", 0, "args")],
}
_VALUES: dict[str, list[Any]] = {
    "resources": [
        {"requests": {"cpu": "1"}},
        {"limits": {"nvidia.com/gpu": "1"}},
        {"limits": {"memory": "1Gi"}, "requests": {"cpu": "500m"}},
    ],
    "env": [
        [{"name": "TZ", "value": "UTC"}],
        [{"name": "EXTRA_PIP_PACKAGES", "value": "xgboost==3.1.0"}],
        [],
    ],
    "volumes": [[{"name": "scratch", "emptyDir": {}}], []],
    "tolerations": [
        [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        [{"key": "pool", "operator": "Equal", "value": "gpu", "effect": "NoSchedule"}],
    ],
    "args": [["dask-cuda-worker"], ["--name", "$(DASK_WORKER_NAME)"]],
}


@st.composite
def _anchored(draw: st.DrawFn) -> dict[str, Any]:
    """A DaskCluster whose chosen places share one Python object each (anchors on dump)."""
    cluster = _tcp()
    cluster["spec"]["scheduler"]["spec"]["containers"].append(
        {"name": "sidecar", "image": "fluent/fluent-bit:3.2"}
    )
    for kind, places in _SLOTS.items():
        pool = [copy.deepcopy(v) for v in _VALUES[kind]]
        for place in places:
            choice = draw(st.none() | st.integers(0, len(pool) - 1))
            if choice is None:
                continue
            where, *rest = place
            node = cluster["spec"][where]["spec"]
            for key in rest[:-1]:
                node = node[key]
            node[rest[-1]] = pool[choice]  # the same object where the same choice is drawn
    if draw(st.booleans()):  # the whole worker pod spec, a second time as a worker group
        cluster["spec"]["scheduler"]["spec"]["securityContext"] = cluster["spec"]["worker"][
            "spec"
        ].setdefault("securityContext", {"runAsUser": 1000})
    return cluster


# Each example dumps, fixes and re-reads a file: a quarter of the profile's, from 20 up to 300.
@settings(max_examples=max(20, min(settings().max_examples // 4, 300)))
@given(_anchored())
def test_fix_through_anchors_changes_only_the_patched_paths(cluster: dict[str, Any]) -> None:
    text = yaml.safe_dump(cluster, sort_keys=False)
    plain = yaml.safe_load(text)
    patch = evaluate(plain, None, None).patch
    expected = json.loads(json.dumps(plain))
    apply_in_place(expected, patch)
    written = render_fixed(Source("c.yaml", text), {0: [("", patch)]})
    assert yaml.safe_load(written) == expected
