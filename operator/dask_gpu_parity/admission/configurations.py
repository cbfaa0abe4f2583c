"""The webhook configurations, built from one set of values.

Development and tests point ``url:`` at an operator on the host (with the proving ground's CA);
the Helm chart renders the in-cluster version (a Service reference) from the same values. Handler
ids double as URL path segments, so they are lowercase DNS-1123 labels.

``matchConditions`` (CEL, evaluated in the API server; GA in Kubernetes 1.30) keep every request
whose answer is known without us from reaching the operator: a Dask resource whose workers
request no GPU (never changed, never denied: ``evaluate`` leaves CPU-only clusters alone) and
one annotated ``gpuparity.dask.org/skip: "true"``. A CPU-only create then costs no webhook call.
The conditions may let through more than the rules act on (a GPU quantity of "0"), never less.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from typing import Any

from dask_gpu_parity.names import DASK_GROUP, DASK_VERSION, DISTRIBUTION, PREFIX, SKIP_ANNOTATION

__all__ = [
    "MUTATING",
    "NAME",
    "VALIDATING",
    "WebhookValues",
    "configurations",
    "match_conditions",
]

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
    match_conditions: bool = True  # False: every CREATE reaches the operator (release 0.1.0)


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


# Where the workers' pod spec is, per resource (core/resources.py has the same paths).
_WORKER_SPEC = {
    "daskclusters": "object.spec.worker.spec",
    "daskjobs": "object.spec.cluster.spec.worker.spec",
    "daskworkergroups": "object.spec.worker.spec",
}


def _has_path(expression: str) -> str:
    """``has()`` for every step of ``object.a.b.c``: a missing field is false, not an error.

    An error in a match condition fails the request under ``failurePolicy: Fail``.
    """
    parts = expression.split(".")
    return " && ".join(f"has({'.'.join(parts[: i + 1])})" for i in range(1, len(parts)))


def match_conditions(plural: str) -> list[dict[str, str]]:
    """The CEL conditions under which a CREATE of ``plural`` needs the operator at all.

    GPU resources as ``core/gpu.py`` knows them: ``nvidia.com/gpu``, ``nvidia.com/gpu.shared``
    and ``nvidia.com/mig-*``, in ``limits`` or ``requests`` of any worker container.
    """
    spec = _WORKER_SPEC[plural]
    gpu = "k == 'nvidia.com/gpu' || k == 'nvidia.com/gpu.shared' || k.startsWith('nvidia.com/mig-')"
    workers = (
        f"{_has_path(spec + '.containers')} && type({spec}.containers) == list && "
        f"{spec}.containers.exists(c, type(c) == map && has(c.resources) && "
        "type(c.resources) == map && ['limits', 'requests'].exists(s, s in c.resources && "
        f"type(c.resources[s]) == map && c.resources[s].exists(k, {gpu})))"
    )
    skip = (
        f"!(has(object.metadata.annotations) && '{SKIP_ANNOTATION}' in "
        f"object.metadata.annotations && "
        f"object.metadata.annotations['{SKIP_ANNOTATION}'].lowerAscii() == 'true')"
    )
    return [
        {"name": "gpu-workers", "expression": workers},
        {"name": "not-opted-out", "expression": skip},
    ]


def _webhook(values: WebhookValues, handler: str, plural: str) -> dict[str, Any]:
    webhook = {
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
    if values.match_conditions:
        webhook["matchConditions"] = match_conditions(plural)
    return webhook


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
