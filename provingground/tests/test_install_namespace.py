"""The install's namespaces on the proving ground: created once, labelled, created again never."""

from __future__ import annotations

import json
import uuid

from provingground.install import RESTRICTED, ensure_namespace
from provingground.pytest_plugin import E2ECluster


def test_a_namespace_is_created_once_and_its_labels_overwritten(cluster: E2ECluster) -> None:
    name = f"install-ns-{uuid.uuid4().hex[:6]}"
    try:
        ensure_namespace(cluster.kubectl, name)
        # The Pod Security Standards labels, as kubernetes.io/docs/concepts/security/
        # pod-security-admission/ names them.
        ensure_namespace(cluster.kubectl, name, {**RESTRICTED, "team": "a"})
        ensure_namespace(cluster.kubectl, name, {"team": "b"})
        got = json.loads(cluster.kubectl("get", "namespace", name, "-o", "json").stdout)
        labels = got["metadata"]["labels"]
        assert {k: labels.get(k) for k in (*RESTRICTED, "team")} == {**RESTRICTED, "team": "b"}
    finally:
        cluster.release_namespace(name)
