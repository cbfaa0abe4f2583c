"""What audit computes once for many resources: findings per identical spec, policy per namespace.

A fleet's DaskClusters are stamped from a few templates (a notebook's ``KubeCluster``, a chart,
a team's manifest): thousands of resources that differ only in their names. ``evaluate`` reads
no name, namespace, uid or status of a Dask resource (a worker group's findings name its
cluster, which is in the key), so resources equal in everything else share one evaluation.
"""

from __future__ import annotations

import marshal
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from dask_gpu_parity.core.findings import Finding
from dask_gpu_parity.core.plain import as_map
from dask_gpu_parity.core.policy import Policy, select
from dask_gpu_parity.names import SKIP_ANNOTATION

__all__ = ["Evaluations", "NamespacePolicies", "spec_key"]

# Metadata that tells one object from another and that no rule reads.
_IDENTITY = frozenset(
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
    meta = {k: v for k, v in as_map(resource.get("metadata")).items() if k not in _IDENTITY}
    try:
        return marshal.dumps((kept, meta), 2)
    except ValueError:
        return b"unshared:%d" % id(resource)  # resources outlive the audit's Evaluations


class Evaluations:
    """Findings by spec: ``judge`` runs once per distinct (spec, policy, parent cluster)."""

    def __init__(self, judge: Callable[..., Sequence[Finding]]) -> None:
        self._judge = judge
        self._seen: dict[tuple[bytes, int, bytes], tuple[Finding, ...]] = {}
        self.evaluated = 0  # distinct evaluations, for the benchmark's report

    def findings(
        self,
        resource: Mapping[str, Any],
        policy: Policy,
        cluster: Mapping[str, Any] | None = None,
        cluster_name: str = "",
    ) -> tuple[Finding, ...]:
        """``judge(resource, policy, cluster)``'s findings, shared with identical resources.

        ``cluster_name`` and ``cluster``: a DaskWorkerGroup's DaskCluster (its findings name it).
        """
        parent = cluster_name.encode() + (b"\0" + spec_key(cluster) if cluster is not None else b"")
        key = (spec_key(resource), id(policy), parent)  # policies live as long as the audit
        found = self._seen.get(key)
        if found is None:
            found = self._seen[key] = tuple(self._judge(resource, policy, cluster))
            self.evaluated += 1
        return found


class NamespacePolicies:
    """Per namespace, once: the policy in force and whether the namespace opts out."""

    def __init__(self, policies: Sequence[Policy], namespaces: Mapping[str, Any]) -> None:
        self._policies = policies
        self._namespaces = namespaces
        self._seen: dict[str, tuple[Policy, bool]] = {}
        self._distinct: list[Policy] = []  # equal policies as one object: one key in Evaluations

    def of(self, namespace: str) -> tuple[Policy, bool]:
        """The namespace's policy, and ``True`` when it opts out (annotation or label)."""
        found = self._seen.get(namespace)
        if found is None:
            meta = as_map(as_map(self._namespaces.get(namespace)).get("metadata"))
            labels = as_map(meta.get("labels"))
            flag = as_map(meta.get("annotations")).get(SKIP_ANNOTATION, labels.get(SKIP_ANNOTATION))
            policy = select(self._policies, dict(labels))
            same = next((p for p in self._distinct if p == policy), None)
            if same is None:
                self._distinct.append(policy)
            policy = same or policy
            found = (policy, str(flag).lower() == "true")
            self._seen[namespace] = found
        return found
