"""The webhook configurations, built from one set of values.

Development and tests point ``url:`` at an operator on the host (with the proving ground's CA);
the Helm chart renders the in-cluster version (a Service reference) from the same values. Handler
ids double as URL path segments, so they are lowercase DNS-1123 labels.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

from dask_gpu_parity.names import DASK_GROUP, DASK_VERSION, DISTRIBUTION, PREFIX, SKIP_ANNOTATION

__all__ = ["MUTATING", "NAME", "VALIDATING", "WebhookValues", "configurations"]

NAME = DISTRIBUTION
# (handler id, plural): the kopf handler ids and the URL paths of the webhooks.
MUTATING = (("mutate-daskcluster", "daskclusters"), ("mutate-daskjob", "daskjobs"))
VALIDATING = (
    ("validate-daskcluster", "daskclusters"),
    ("validate-daskjob", "daskjobs"),
    ("validate-daskworkergroup", "daskworkergroups"),
)


@dataclass(frozen=True)
class WebhookValues:
    """What varies between installations."""

    ca_bundle: bytes
    url: str | None = None  # https://host:port, for an operator outside the cluster
    service_name: str | None = None
    service_namespace: str | None = None
    service_port: int = 443
    failure_policy: str = "Fail"
    timeout_seconds: int = 5
    excluded_namespaces: tuple[str, ...] = ("kube-system",)


def _client_config(values: WebhookValues, handler: str) -> dict[str, Any]:
    config: dict[str, Any] = {"caBundle": base64.b64encode(values.ca_bundle).decode()}
    if values.url:
        config["url"] = f"{values.url.rstrip('/')}/{handler}"
    else:
        config["service"] = {
            "name": values.service_name,
            "namespace": values.service_namespace,
            "path": f"/{handler}",
            "port": values.service_port,
        }
    return config


def _webhook(values: WebhookValues, handler: str, plural: str) -> dict[str, Any]:
    return {
        "name": f"{handler}.{PREFIX}",
        "admissionReviewVersions": ["v1"],
        "clientConfig": _client_config(values, handler),
        "rules": [
            {
                "apiGroups": [DASK_GROUP],
                "apiVersions": [DASK_VERSION],
                "operations": ["CREATE"],
                "resources": [plural],
                "scope": "Namespaced",
            }
        ],
        "matchPolicy": "Equivalent",
        "sideEffects": "None",
        "failurePolicy": values.failure_policy,
        "timeoutSeconds": values.timeout_seconds,
        "namespaceSelector": {
            "matchExpressions": [
                {
                    "key": "kubernetes.io/metadata.name",
                    "operator": "NotIn",
                    "values": list(values.excluded_namespaces),
                },
                {"key": SKIP_ANNOTATION, "operator": "NotIn", "values": ["true"]},
            ]
        },
    }


def configurations(values: WebhookValues) -> list[dict[str, Any]]:
    """The MutatingWebhookConfiguration and the ValidatingWebhookConfiguration."""
    mutating = [_webhook(values, h, p) for h, p in MUTATING]
    for webhook in mutating:
        webhook["reinvocationPolicy"] = "Never"
    meta = {"name": NAME, "labels": {"app.kubernetes.io/name": NAME}}
    return [
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": meta,
            "webhooks": mutating,
        },
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingWebhookConfiguration",
            "metadata": meta,
            "webhooks": [_webhook(values, h, p) for h, p in VALIDATING],
        },
    ]
