"""What audit computes once for many resources: findings per identical spec, policy per namespace.

Resources equal in everything a rule reads (``core.contentkey.spec_key``) share one evaluation;
a worker group's findings name its cluster, which is in the key.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from dask_gpu_parity.core.contentkey import spec_key
from dask_gpu_parity.core.findings import Finding
from dask_gpu_parity.core.plain import as_map
from dask_gpu_parity.core.policy import Policy, select
from dask_gpu_parity.names import SKIP_ANNOTATION

__all__ = ["Evaluations", "NamespacePolicies"]


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
