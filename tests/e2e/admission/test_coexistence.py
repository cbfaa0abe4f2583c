"""The dask operator (kopf, all defaults) keeps working with our operator (kopf) beside it."""

from __future__ import annotations

import json

import pytest

from provingground import wait_for_placements
from provingground.parity import EXAMPLES, cluster_objects, dask_object, eventually

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]
DASK_FINALIZER = "kopf.zalando.org/KopfFinalizerMarker"
DIFF_BASE = "kopf.zalando.org/last-handled-configuration"
OURS = "gpuparity.dask.org"
NAME = "rapids-tcp"


def _dask_metadata_intact(doc: dict, replicas: int) -> bool:
    meta = doc["metadata"]
    assert meta.get("finalizers") == [DASK_FINALIZER], meta.get("finalizers")
    annotations = meta.get("annotations", {})
    assert DIFF_BASE in annotations, annotations
    # The dask operator's diff-base is its own: it saw the latest replicas (not stolen by us).
    assert json.loads(annotations[DIFF_BASE])["spec"]["worker"]["replicas"] == replicas
    written = [*annotations, *meta.get("labels", {}), *meta.get("finalizers", [])]
    assert not [k for k in written if k.startswith(OURS)], written
    # Its state machine moved on from Created (Running needs a real scheduler to answer).
    assert doc.get("status", {}).get("phase") in ("Pending", "Running"), doc.get("status")
    return True


def test_dask_operator_keeps_working(parity, cluster, kubectl, namespace):
    result = kubectl("apply", "-n", namespace, "-f", str(EXAMPLES / "gpu-cluster-tcp.yaml"))
    assert result.rc == 0, result.stderr
    wait_for_placements(cluster.api, namespace, NAME, 2, timeout=240)
    eventually(
        lambda: _dask_metadata_intact(
            dask_object(cluster.api, namespace, "daskclusters", NAME), replicas=2
        ),
        timeout=120,
    )

    # Scaling: an UPDATE our webhooks do not intercept; the dask operator acts on it.
    patch = json.dumps({"spec": {"worker": {"replicas": 3}}})
    scaled = kubectl("patch", "daskcluster", NAME, "-n", namespace, "--type=merge", "-p", patch)
    assert scaled.rc == 0, scaled.stderr
    assert not scaled.warnings, scaled.warnings
    rows = wait_for_placements(cluster.api, namespace, NAME, 3, timeout=240)
    assert sum(r.component == "worker" and r.phase == "Running" for r in rows) == 3
    eventually(
        lambda: len(cluster_objects(cluster.api, namespace, NAME)["deployments"]) == 1 + 3,
        what="3 worker Deployments and the scheduler's",
    )
    eventually(
        lambda: _dask_metadata_intact(
            dask_object(cluster.api, namespace, "daskclusters", NAME), replicas=3
        ),
        timeout=120,
    )

    # Deleting: the dask operator's finalizer runs and the components go.
    deleted = kubectl("delete", "daskcluster", NAME, "-n", namespace, "--timeout=180s")
    assert deleted.rc == 0, deleted.stderr
    eventually(
        lambda: cluster_objects(cluster.api, namespace, NAME) == {"deployments": [], "pods": []},
        timeout=180,
        what="the cluster's Deployments and Pods are gone",
    )
    parity.check_alive()
