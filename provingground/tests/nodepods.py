"""Pods on the real node for its tests: build one, apply it, wait for a promise, read its log.

Shared by ``test_real_node.py`` and ``test_real_node_dra.py``. Pods run
``localhost/node/busybox:test`` on the node selected by ``REAL_NODE_SELECTOR``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any, TypeVar

import pytest

from provingground.node.join import REAL_NODE_SELECTOR
from provingground.node.testimage import IMAGE
from provingground.pytest_plugin import E2ECluster

__all__ = ["apply", "eventually", "finished_log", "pod"]

T = TypeVar("T")


def eventually(
    what: str,
    probe: Callable[[], T | None],
    deadline: float = 240,
    explain: Callable[[], str] = lambda: "",
) -> T:
    """``probe()``'s first truthy answer; fail saying ``what`` never happened, and ``explain()``."""
    end = time.monotonic() + deadline
    while True:
        answer = probe()
        if answer:
            return answer
        if time.monotonic() > end:
            pytest.fail(f"{what}: not within {deadline:.0f}s. {explain()}", pytrace=False)
        time.sleep(0.5)


def pod(name: str, command: str, **spec: Any) -> dict[str, Any]:
    """A busybox pod on the real node running ``sh -c command``."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {
            "nodeSelector": REAL_NODE_SELECTOR,
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {
                    "name": "main",
                    "image": IMAGE,
                    "imagePullPolicy": "Never",
                    "command": ["sh", "-c", command],
                }
            ],
            **spec,
        },
    }


def apply(cluster: E2ECluster, namespace: str, *docs: dict[str, Any]) -> None:
    """Create ``docs`` in ``namespace``."""
    body = json.dumps({"apiVersion": "v1", "kind": "List", "items": list(docs)})
    cluster.kubectl("apply", "-n", namespace, "-f", "-", input=body)


def finished_log(cluster: E2ECluster, namespace: str, name: str) -> str:
    """The pod's log once it has succeeded (fail with its status if it failed)."""

    def phase() -> str | None:
        out = cluster.kubectl("get", "pod", "-n", namespace, name, "-o", "json").stdout
        status = json.loads(out)["status"]
        if status.get("phase") == "Failed":
            log = cluster.kubectl("logs", "-n", namespace, name, check=False).stdout
            pytest.fail(f"Pod {name} failed: {log[-800:]} {status}", pytrace=False)
        return "done" if status.get("phase") == "Succeeded" else None

    def explain() -> str:
        pods = cluster.kubectl("get", "pod", "-n", namespace, "-o", "wide", check=False).stdout
        log = cluster.kubectl("logs", "-n", namespace, name, check=False).stdout
        return f"Pods now:\n{pods}\n{name}'s log (last 800 characters):\n{log[-800:]}"

    eventually(f"Pod {name} Succeeded", phase, explain=explain)
    return cluster.kubectl("logs", "-n", namespace, name).stdout
