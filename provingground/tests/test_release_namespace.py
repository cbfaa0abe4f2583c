"""A test's namespace is released Dask resources first, so the dask operator never writes into a
terminating namespace (whose 403s make kr8s rebuild the client other clusters share)."""

from __future__ import annotations

import json
import uuid

import pytest
from kubernetes import client

from provingground.dask_operator import DaskOperator
from provingground.parity import eventually, example
from provingground.pytest_plugin import E2ECluster, _items


@pytest.mark.e2e
@pytest.mark.timeout(240)
def test_a_released_namespace_has_no_dask_resources_left_when_it_terminates(
    cluster: E2ECluster, dask_operator: DaskOperator
) -> None:
    name = f"release-{uuid.uuid4().hex[:6]}"
    cluster.kubectl("create", "namespace", name)
    custom = client.CustomObjectsApi(cluster.api)
    apps = client.AppsV1Api(cluster.api)
    try:
        doc = example("cpu-cluster.yaml", namespace=name)
        cluster.kubectl("apply", "-f", "-", input=json.dumps(doc))
        # The dask operator has made its components: there is something in flight to release.
        eventually(
            lambda: apps.list_namespaced_deployment(name).items,
            timeout=180,  # one kopf retry (60 s) of the dask operator's components handler
            what=f"the dask operator's scheduler Deployment in {name}",
        )
        cluster.release_namespace(name)
        left = {
            plural: _items(
                custom.list_namespaced_custom_object("kubernetes.dask.org", "v1", name, plural)
            )
            for plural in ("daskclusters", "daskworkergroups")
        }
        assert left == {"daskclusters": [], "daskworkergroups": []}
        found = client.CoreV1Api(cluster.api).list_namespace(field_selector=f"metadata.name={name}")
        # Terminating, or already gone: released either way.
        assert all(ns.metadata and ns.metadata.deletion_timestamp for ns in found.items)
    finally:
        cluster.release_namespace(name)
