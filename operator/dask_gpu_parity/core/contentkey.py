"""One key for resources that no rule can tell apart.

A fleet's DaskClusters are stamped from a few templates (a notebook's ``KubeCluster``, a chart,
a team's manifest): thousands of resources that differ only in their names. ``evaluate`` reads
no name, namespace, uid or status of a Dask resource, so resources with equal keys get equal
findings under the same policy, inventory and DeviceClasses. ``audit`` and the drift watch use it
to evaluate each distinct resource once.
"""

from __future__ import annotations

import marshal
from collections.abc import Mapping
from typing import Any

from dask_gpu_parity.core.plain import as_map

__all__ = ["IDENTITY", "spec_key"]

# Metadata that tells one object from another and that no rule reads.
IDENTITY = frozenset(
    {
        "name",
        "namespace",
        "uid",
        "resourceVersion",
        "creationTimestamp",
        "generation",
        "managedFields",
        "selfLink",
        "generateName",
    }
)


def spec_key(resource: Mapping[str, Any]) -> bytes:
    """Everything of ``resource`` a rule can read, as bytes (identity and status left out).

    Equal bytes mean equal content, types included (``marshal`` format 2, which has no
    back-references, so equal objects give equal bytes however they share their strings). Keys
    stay in the order listed (the API server writes them sorted), so equal objects written in
    another order only miss a share. A value ``marshal`` cannot hold makes a key no other
    resource has.
    """
    kept = {k: v for k, v in resource.items() if k not in ("metadata", "status")}
    meta = {k: v for k, v in as_map(resource.get("metadata")).items() if k not in IDENTITY}
    try:
        return marshal.dumps((kept, meta), 2)
    except ValueError:
        return b"unshared:%d" % id(resource)  # callers keep the resource while the key lives
