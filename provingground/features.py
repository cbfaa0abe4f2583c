"""Which feature gates a running component has on, read from its ``/metrics``.

Every v1.36 component exports ``kubernetes_feature_enabled{name="...",stage="..."} 0|1``; the
stage is ``ALPHA``, ``BETA``, ``DEPRECATED`` or empty for GA.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from .cluster import ControlPlane
from .kubeconfig import get

__all__ = ["Feature", "features"]

_LINE = re.compile(r'^kubernetes_feature_enabled\{name="([^"]+)",stage="([^"]*)"\} ([01])$')


@dataclass(frozen=True)
class Feature:
    """One feature gate as a component reports it."""

    name: str
    stage: str  # "ALPHA", "BETA", "DEPRECATED", or "GA" (reported as empty)
    enabled: bool


def features(cp: ControlPlane, component: str = "kube-apiserver") -> dict[str, Feature]:
    """The feature gates a component reports, by name; read as the admin.

    ``component`` is kube-apiserver, kube-scheduler or kube-controller-manager.
    """
    port = {
        "kube-apiserver": cp.ports.apiserver,
        "kube-scheduler": cp.ports.scheduler,
        "kube-controller-manager": cp.ports.controller_manager,
    }[component]
    status, body = get(
        f"https://127.0.0.1:{port}/metrics",
        ca=cp.ca_cert_path if component == "kube-apiserver" else None,
        cert=(cp.pki / "admin.crt", cp.pki / "admin.key"),
        timeout=10,
    )
    if status != 200:
        raise RuntimeError(f"{component} /metrics answered {status}: {body[:200]!r}")
    found = {}
    for line in body.decode().splitlines():
        if match := _LINE.match(line):
            name, stage, value = match.groups()
            found[name] = Feature(name, stage or "GA", value == "1")
    return found
