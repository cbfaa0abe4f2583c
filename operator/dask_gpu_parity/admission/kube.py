"""The API calls kopf does not make for us: read one DaskCluster, patch one Deployment.

kopf watches, keeps the indices and posts Events with its own credentials, but gives handlers
no client. These two calls use the ``kubernetes`` package, configured once (the Pod's service
account token, else the kubeconfig). They block: the operator runs them in a thread.
"""

from __future__ import annotations

import functools
from typing import Any

import urllib3
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from dask_gpu_parity.names import DASK_GROUP, DASK_VERSION

__all__ = ["ApiError", "configuration", "patch_deployment", "read_dask_cluster"]


class ApiError(Exception):
    """The API server could not be asked, or refused: the message says which and why."""


@functools.cache
def configuration() -> client.Configuration:
    """Where the API server is and how to authenticate (service account, else kubeconfig).

    Loaded once (it reads files); the watch streams use it too (``apiserver.py``).
    """
    loaded = client.Configuration()
    try:
        config.load_incluster_config(client_configuration=loaded)  # type: ignore[no-untyped-call]
    except config.ConfigException:
        config.load_kube_config(client_configuration=loaded)  # type: ignore[no-untyped-call]
    # One retry (a pooled connection the server closed); callers bound the time themselves.
    loaded.retries = 1
    return loaded


@functools.cache
def _api() -> client.ApiClient:
    """One client for the process: it builds TLS contexts and pools connections."""
    return client.ApiClient(configuration())


def read_dask_cluster(namespace: str, name: str, *, timeout: float) -> dict[str, Any] | None:
    """The DaskCluster as stored now, or ``None`` when there is none of that name.

    Raises:
        ApiError: no answer within ``timeout`` seconds, no credentials, or a refusal (e.g. 403).
    """
    try:
        found = client.CustomObjectsApi(_api()).get_namespaced_custom_object(
            DASK_GROUP, DASK_VERSION, namespace, "daskclusters", name, _request_timeout=timeout
        )
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise ApiError(f"the API server answered {exc.status} {exc.reason}") from exc
    except (urllib3.exceptions.HTTPError, OSError, config.ConfigException) as exc:
        raise ApiError(f"the API server did not answer ({type(exc).__name__}: {exc})") from exc
    return found if isinstance(found, dict) else None


def patch_deployment(namespace: str, name: str, patch: list[dict[str, Any]]) -> None:
    """Apply a JSON Patch to a Deployment (a scheduler Deployment: this restarts it)."""
    client.AppsV1Api(_api()).patch_namespaced_deployment(
        name, namespace, patch, _content_type="application/json-patch+json"
    )
