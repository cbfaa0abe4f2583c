"""The webhook configurations, built from one set of values.

Development and tests point ``url:`` at an operator on the host (with the proving ground's CA);
the Helm chart renders the in-cluster version (a Service reference) from the same values. Handler
ids double as URL path segments, so they are lowercase DNS-1123 labels. Beside the dask operator's
kinds, dask-gateway's ``DaskCluster`` (``gateway.dask.org/v1alpha1``) has its own pair of webhooks
(``mutate-gateway-daskcluster``, ``validate-gateway-daskcluster``): its controller builds the
scheduler Pod from the object's ``spec.config``, which mutation gives parity as ``fix`` does. The
webhooks read nothing from the API server for it, so the RBAC stays as it is.

``matchConditions`` (CEL, evaluated in the API server; GA in Kubernetes 1.30) keep every request
whose answer is known without us from reaching the operator: a Dask resource whose workers
request no GPU (never changed, never denied: ``evaluate`` leaves CPU-only clusters alone) and
one annotated ``gpuparity.dask.org/skip: "true"``. A CPU-only create then costs no webhook call.
And the validating webhook of a cluster or job is not called for an object that already has a
GPU on its scheduler and the verifier, as the mutating webhook leaves every object it admits in
``enforce`` and ``warn``: that webhook gives validation's answer itself (``decisions.mutate``),
so a GPU create costs one call. An object a later mutating webhook took the GPU or the verifier
from is validated as before. The conditions may let through more than the rules act on (a GPU
quantity of "0"), never less.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from dask_gpu_parity.core.gateway import GATEWAY_GROUP, GATEWAY_VERSION, gateway_layout
from dask_gpu_parity.core.plain import as_list, as_map, get_in
from dask_gpu_parity.core.resources import GATEWAY, view
from dask_gpu_parity.names import (
    DASK_GROUP,
    DASK_VERSION,
    DISTRIBUTION,
    PREFIX,
    SKIP_ANNOTATION,
    VERIFIER_CONTAINER,
)

__all__ = [
    "GATEWAY_RESOURCE",
    "MUTATING",
    "NAME",
    "VALIDATING",
    "WebhookValues",
    "api_of",
    "configurations",
    "match_conditions",
    "validated_by_mutation",
]

NAME = DISTRIBUTION
# dask-gateway's DaskCluster: its controller builds the scheduler Pod from spec.config.
GATEWAY_RESOURCE = f"daskclusters.{GATEWAY_GROUP}"
# (handler id, resource): the handler ids are the URL paths of the webhooks; a resource is the
# plural of a kubernetes.dask.org/v1 kind, or ``plural.group`` of another deployer's kind.
MUTATING = (
    ("mutate-daskcluster", "daskclusters"),
    ("mutate-daskjob", "daskjobs"),
    ("mutate-gateway-daskcluster", GATEWAY_RESOURCE),
)
VALIDATING = (
    ("validate-daskcluster", "daskclusters"),
    ("validate-daskjob", "daskjobs"),
    ("validate-daskworkergroup", "daskworkergroups"),
    ("validate-gateway-daskcluster", GATEWAY_RESOURCE),
)
_APIS = {GATEWAY_RESOURCE: (GATEWAY_GROUP, GATEWAY_VERSION, "daskclusters")}


def api_of(resource: str) -> tuple[str, str, str]:
    """The (group, version, plural) a webhook's ``resource`` names."""
    return _APIS.get(resource, (DASK_GROUP, DASK_VERSION, resource))


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


# Where the workers' and the scheduler's pod specs are, per resource (as in core/resources.py).
_WORKER_SPEC = {
    "daskclusters": "object.spec.worker.spec",
    "daskjobs": "object.spec.cluster.spec.worker.spec",
    "daskworkergroups": "object.spec.worker.spec",
}
_SCHEDULER_SPEC = {
    "daskclusters": "object.spec.scheduler.spec",
    "daskjobs": "object.spec.cluster.spec.scheduler.spec",
}
# Any extended resource (``<domain>/<name>``): the device plugin's nvidia.com names, and under
# DRA a DeviceClass's implicit ``deviceclass.resource.kubernetes.io/<class>`` or whatever
# ``extendedResourceName`` it gives, which CEL here cannot look up. cpu, memory,
# ephemeral-storage and hugepages-* have no "/": a CPU-only cluster still costs no call.
_GPU_KEY = "k.contains('/')"


def _has_path(expression: str) -> str:
    """``has()`` for every step of ``object.a.b.c``: a missing field is false, not an error.

    An error in a match condition fails the request under ``failurePolicy: Fail``.
    """
    parts = expression.split(".")
    return " && ".join(f"has({'.'.join(parts[: i + 1])})" for i in range(1, len(parts)))


def _requests_gpu(spec: str) -> str:
    """CEL: a container of the pod spec at ``spec`` names a GPU resource in limits or requests."""
    return (
        f"{_has_path(spec + '.containers')} && type({spec}.containers) == list && "
        f"{spec}.containers.exists(c, type(c) == map && has(c.resources) && "
        "type(c.resources) == map && ['limits', 'requests'].exists(s, s in c.resources && "
        f"type(c.resources[s]) == map && c.resources[s].exists(k, {_GPU_KEY})))"
    )


def _container_requests_gpu(container: str) -> str:
    """CEL: the container (config) at ``container`` names a GPU resource in limits or requests."""
    resources = f"{container}.resources"
    return (
        f"{_has_path(resources)} && type({resources}) == map && "
        f"['limits', 'requests'].exists(s, s in {resources} && type({resources}[s]) == map && "
        f"{resources}[s].exists(k, {_GPU_KEY}))"
    )


def _gateway_requests_gpu(role: str) -> str:
    """CEL: the gateway's pod of ``role`` asks for a GPU (its main container or another).

    The controller merges ``<role>_extra_container_config`` into the main container and
    appends ``<role>_extra_pod_config.containers`` (``KubeController.make_pod``).
    """
    config = "object.spec.config"
    container = _container_requests_gpu(f"{config}.{role}_extra_container_config")
    return f"({container}) || ({_requests_gpu(f'{config}.{role}_extra_pod_config')})"


def _verified(gpu: str, spec: str) -> str:
    """CEL: ``gpu`` holds and the pod spec at ``spec`` has the verifier init container."""
    init = f"{spec}.initContainers"
    return (
        f"({gpu}) && {_has_path(init)} && type({init}) == list && {init}.exists(c, "
        f"type(c) == map && has(c.name) && c.name == '{VERIFIER_CONTAINER}')"
    )


def match_conditions(plural: str, *, validating: bool = False) -> list[dict[str, str]]:
    """The CEL conditions under which a CREATE of ``plural`` needs the operator at all.

    Any extended resource in ``limits`` or ``requests`` of any worker container: a GPU as
    ``core/gpu.py`` knows it (``nvidia.com/gpu``, ``nvidia.com/gpu.shared``, ``nvidia.com/mig-*``,
    or a name a DeviceClass serves, which only the operator can look up). A validating
    webhook of a cluster or job is also left out when the object already has what the mutating
    webhook guarantees (:func:`validated_by_mutation`): that webhook answered for it. For
    :data:`GATEWAY_RESOURCE` the pods are read where the gateway's controller builds them from:
    ``spec.config.<role>_extra_container_config`` and ``<role>_extra_pod_config``.
    """
    skip = (
        f"!(has(object.metadata.annotations) && '{SKIP_ANNOTATION}' in "
        f"object.metadata.annotations && "
        f"object.metadata.annotations['{SKIP_ANNOTATION}'].lowerAscii() == 'true')"
    )
    if plural == GATEWAY_RESOURCE:
        workers = _gateway_requests_gpu("worker")
    else:
        workers = _requests_gpu(_WORKER_SPEC[plural])
    conditions = [
        {"name": "gpu-workers", "expression": workers},
        {"name": "not-opted-out", "expression": skip},
    ]
    if validating and plural == GATEWAY_RESOURCE:
        pod = "object.spec.config.scheduler_extra_pod_config"
        verified = _verified(_gateway_requests_gpu("scheduler"), pod)
        conditions.append({"name": "not-verified", "expression": f"!({verified})"})
    elif validating and plural in _SCHEDULER_SPEC:
        spec = _SCHEDULER_SPEC[plural]
        verified = (
            f"{_requests_gpu(spec)} && has({spec}.initContainers) && "
            f"type({spec}.initContainers) == list && {spec}.initContainers.exists(c, "
            f"type(c) == map && has(c.name) && c.name == '{VERIFIER_CONTAINER}')"
        )
        conditions.append({"name": "not-verified", "expression": f"!({verified})"})
    return conditions


def validated_by_mutation(resource: Mapping[str, Any]) -> bool:
    """Whether the validating webhooks' ``not-verified`` condition is false for ``resource``.

    That is: its scheduler pod spec names a GPU resource (any container, any quantity) and has a
    ``gpu-parity-check`` init container, as every object our mutating webhook lets through in
    ``enforce`` or ``warn`` has. The API server then does not call validation, so the mutating
    webhook answers for it (denials, remaining warnings). Python's reading of the CEL above: it
    must be true wherever the CEL is.
    """
    dask = view(resource)
    spec: Mapping[str, Any]
    if dask is not None and dask.deployer == GATEWAY:
        # The pod the controller builds: the container config merged in, sidecars appended.
        spec = gateway_layout(resource).scheduler.spec
    elif dask is None or dask.scheduler_path is None:
        return False
    else:
        spec = as_map(get_in(resource, dask.scheduler_path))
    gpu = any(
        isinstance(key, str) and "/" in key
        for container in as_list(spec.get("containers"))
        for section in ("limits", "requests")
        for key in as_map(as_map(as_map(container).get("resources")).get(section))
    )
    return gpu and any(
        as_map(c).get("name") == VERIFIER_CONTAINER for c in as_list(spec.get("initContainers"))
    )


def _webhook(
    values: WebhookValues, handler: str, resource: str, *, validating: bool = False
) -> dict[str, Any]:
    group, version, plural = api_of(resource)
    webhook = {
        "name": f"{handler}.{PREFIX}",
        "admissionReviewVersions": ["v1"],
        "clientConfig": _client_config(values, handler),
        "rules": [
            {
                "apiGroups": [group],
                "apiVersions": [version],
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
        webhook["matchConditions"] = match_conditions(resource, validating=validating)
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
            "webhooks": [_webhook(values, h, p, validating=True) for h, p in VALIDATING],
        },
    ]
