"""The proving ground's wait for a DaskCluster's Pods gives the dask operator back a cluster whose
default worker group it lost (a dask-kubernetes fault under load, not the code under test).

Expected, written before the code: with the worker group gone and the cluster's phase past
``Created`` (what the dask operator leaves when its components handler fails on the worker group
and the Service's status handler moves the phase on), ``wait_for_placements`` sets the phase back,
the dask operator makes the worker group again, and its workers run.
"""

from __future__ import annotations

import time

import pytest
import yaml
from kubernetes import client

from provingground import wait_for_placements
from provingground.manifests import gpu_dask_cluster


@pytest.mark.e2e
@pytest.mark.timeout(420)  # the dask operator paces its work on a busy machine
def test_a_worker_group_the_dask_operator_lost_is_made_again(
    cluster, node_pools, dask_operator, namespace
):
    doc = gpu_dask_cluster("lost", workers=1, pool="a100")
    doc["metadata"]["namespace"] = namespace
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump(doc))
    wait_for_placements(cluster.api, namespace, "lost", 1, timeout=240)

    custom = client.CustomObjectsApi(cluster.api)
    group = ("kubernetes.dask.org", "v1", namespace, "daskworkergroups", "lost-default")
    custom.delete_namespaced_custom_object(*group)
    core = client.CoreV1Api(cluster.api)
    deadline = time.monotonic() + 120
    while core.list_namespaced_pod(namespace, label_selector="dask.org/component=worker").items:
        assert time.monotonic() < deadline, "the lost group's workers were not removed"
        time.sleep(1)
    found = custom.get_namespaced_custom_object(
        "kubernetes.dask.org", "v1", namespace, "daskclusters", "lost"
    )
    assert found["status"]["phase"] != "Created"  # the state the dask operator leaves behind

    rows = wait_for_placements(cluster.api, namespace, "lost", 1, timeout=240)
    assert sum(r.component == "worker" and r.phase == "Running" for r in rows) == 1
    assert custom.get_namespaced_custom_object(*group)["metadata"]["name"] == "lost-default"
