"""Read a live cluster for audit: the kubeconfig's cluster, list and get only, paginated.

The ``kubernetes`` package loads the kubeconfig (contexts, exec plugins, embedded certificates)
and its urllib3 pool makes the requests; answers are read as plain JSON, not as its models.
Every failure is an :class:`AuditError` with one line that says what to do.
"""

from __future__ import annotations

import contextlib
import json
import threading
from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from dask_gpu_parity.names import (
    CLUSTER_NAME_LABEL,
    DASK_API_VERSION,
    POLICY_API_VERSION,
    POLICY_PLURAL,
)

from .observe import ClusterState

__all__ = ["PAGE", "AuditError", "Lister", "read_state"]

PAGE = 500  # objects per LIST request (limit/continue), as kubectl's --chunk-size
DRA = "resource.k8s.io/v1"


class AuditError(Exception):
    """The cluster cannot be read: one line for the user (exit code 2)."""


@dataclass(frozen=True)
class Kind:
    """A resource audit lists: its API path and how RBAC names it."""

    api: str  # "v1" or "group/version"
    plural: str
    namespaced: bool
    optional: bool = False  # not served (404): read as none

    @property
    def rbac(self) -> str:
        """``plural.group`` as an RBAC error and `kubectl auth can-i` name it."""
        group = self.api.rpartition("/")[0]
        return f"{self.plural}.{group}" if group else self.plural

    def path(self, namespace: str | None) -> str:
        """The collection's path, in ``namespace`` or across all."""
        root = "/api/v1" if self.api == "v1" else f"/apis/{self.api}"
        if self.namespaced and namespace:
            return f"{root}/namespaces/{namespace}/{self.plural}"
        return f"{root}/{self.plural}"


DASK_KINDS = (
    Kind(DASK_API_VERSION, "daskclusters", namespaced=True),
    Kind(DASK_API_VERSION, "daskjobs", namespaced=True, optional=True),
    Kind(DASK_API_VERSION, "daskworkergroups", namespaced=True, optional=True),
)
NODES = Kind("v1", "nodes", namespaced=False)
NAMESPACES = Kind("v1", "namespaces", namespaced=False)
PODS = Kind("v1", "pods", namespaced=True)
SLICES = Kind(DRA, "resourceslices", namespaced=False, optional=True)
CLASSES = Kind(DRA, "deviceclasses", namespaced=False, optional=True)
POLICIES = Kind(POLICY_API_VERSION, POLICY_PLURAL, namespaced=False, optional=True)


class Lister:
    """GET requests to the kubeconfig's API server (imports the client only when built)."""

    def __init__(self, kubeconfig: str | None, context: str | None, timeout: float = 30) -> None:
        try:
            from kubernetes import client, config  # noqa: PLC0415  # the 'operator' extra
        except ImportError as exc:
            raise AuditError(
                "audit needs the Kubernetes client: pip install 'dask-gpu-parity[operator]'"
            ) from exc
        loaded = client.Configuration()
        try:
            config.load_kube_config(  # type: ignore[no-untyped-call]
                config_file=kubeconfig, context=context, client_configuration=loaded
            )
        except (config.ConfigException, OSError, TypeError, ValueError) as exc:
            where = kubeconfig or "$KUBECONFIG or ~/.kube/config"
            raise AuditError(f"no usable kubeconfig ({where}): {_line(exc)}") from exc
        self.namespace = _context_namespace(config, kubeconfig, context)
        loaded.retries = False  # an unreachable server is one line now, not three retries later
        self.server = str(loaded.host)
        self._api = client.ApiClient(loaded)
        self._timeout = timeout
        self._config = loaded
        self._token_lock = threading.Lock()  # lists run in threads; an exec plugin runs once

    def close(self) -> None:
        """Close the connection pool."""
        self._api.close()

    def get(self, path: str, query: Mapping[str, str] | None = None) -> dict[str, Any] | None:
        """The JSON object at ``path``; ``None`` for 404 (a resource type not served)."""
        import urllib3  # noqa: PLC0415  # installed with the client

        headers = {"Accept": "application/json"}
        # A token (an exec plugin's is refreshed here); a client certificate is in the pool.
        with self._token_lock:
            token = self._config.get_api_key_with_prefix("BearerToken", alias="authorization")
        if token:
            headers["authorization"] = str(token)
        try:
            answer = self._api.rest_client.pool_manager.request(
                "GET",
                self.server + path,
                fields=dict(query or {}),
                headers=headers,
                timeout=self._timeout,
                retries=False,
            )
        except urllib3.exceptions.HTTPError as exc:
            raise AuditError(f"cannot reach the API server at {self.server}: {_line(exc)}") from exc
        if answer.status == 404:
            return None
        if answer.status >= 300:
            raise _refused(answer.status, str(answer.reason or ""), answer.data, path)
        try:
            found = json.loads(answer.data)
        except ValueError as exc:
            raise AuditError(f"{self.server}{path}: the answer is not JSON") from exc
        return found if isinstance(found, dict) else None

    def items(self, kind: Kind, namespace: str | None = None, **query: str) -> Iterator[Any]:
        """Every object of ``kind``, a page of :data:`PAGE` at a time; none if not served."""
        token = ""
        while True:
            page = {"limit": str(PAGE), **query, **({"continue": token} if token else {})}
            try:
                answer = self.get(kind.path(namespace), page)
            except _Forbidden as exc:
                scope = (
                    f"in namespace {namespace}" if kind.namespaced and namespace else "cluster-wide"
                )
                raise AuditError(
                    f"Forbidden: cannot list {kind.rbac} {scope} ({exc}); grant the audit "
                    "ClusterRole of docs/operator.md#audit"
                ) from exc
            if answer is None:
                if kind.optional:
                    return
                raise AuditError(
                    f"the API server at {self.server} serves no {kind.rbac}: install its CRD "
                    "(the dask operator's for Dask resources)"
                )
            yield from answer.get("items") or []
            token = str((answer.get("metadata") or {}).get("continue") or "")
            if not token:
                return


def _context_namespace(config: Any, kubeconfig: str | None, context: str | None) -> str:
    """The context's namespace, as kubectl takes it when no -n is given (else ``default``)."""
    try:
        contexts, active = config.list_kube_config_contexts(config_file=kubeconfig)
    except (config.ConfigException, OSError, TypeError, ValueError):
        return "default"
    chosen = next((c for c in contexts or [] if c.get("name") == context), active) or {}
    return str((chosen.get("context") or {}).get("namespace") or "default")


class _Forbidden(AuditError):
    """403: the caller lacks a verb."""


def _line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text[:300] or type(exc).__name__


def _refused(status: int, reason: str, body: Any, path: str) -> AuditError:
    message = ""
    with contextlib.suppress(TypeError, ValueError, AttributeError):
        message = str(json.loads(body).get("message", ""))
    message = _line(ValueError(message or reason or "refused"))
    if status == 403:
        return _Forbidden(message)
    if status == 401:
        return AuditError(
            f"Unauthorized: the API server refused the kubeconfig's credentials ({message})"
        )
    return AuditError(f"GET {path}: {status} {message}")


def _stamped(kind: str, api: str, items: Iterator[Any]) -> list[Mapping[str, Any]]:
    """Objects of a list, with the kind and apiVersion a list leaves out of its items."""
    return [{"apiVersion": api, "kind": kind, **o} for o in items if isinstance(o, dict)]


# What audit lists: the kind its items get, the collection, and whether -n narrows it.
_LISTS = (
    ("DaskCluster", DASK_KINDS[0], True),
    ("DaskJob", DASK_KINDS[1], True),
    ("DaskWorkerGroup", DASK_KINDS[2], True),
    ("Node", NODES, False),
    ("ResourceSlice", SLICES, False),
    ("DeviceClass", CLASSES, False),
    ("DaskGPUPolicy", POLICIES, False),
    ("Pod", PODS, True),
)


def read_state(lister: Lister, namespace: str | None) -> ClusterState:
    """Everything audit needs from the cluster (``namespace`` ``None``: all of them).

    The collections are listed at the same time, one thread each (a collection's pages one
    after the other, as continue tokens require); of several errors, the first in
    :data:`_LISTS` order is raised.
    """

    def listed(kind: str, of: Kind, narrowed: bool) -> list[Mapping[str, Any]]:
        query = {"labelSelector": CLUSTER_NAME_LABEL} if of is PODS else {}
        return _stamped(kind, of.api, lister.items(of, namespace if narrowed else None, **query))

    with ThreadPoolExecutor(max_workers=len(_LISTS) + 1, thread_name_prefix="audit") as pool:
        namespaces = pool.submit(_namespaces, lister, namespace)
        futures = {kind: pool.submit(listed, kind, of, narrowed) for kind, of, narrowed in _LISTS}
        done = {kind: future.result() for kind, future in futures.items()}
        by_name = namespaces.result()
    return ClusterState(
        resources=[*done["DaskCluster"], *done["DaskJob"], *done["DaskWorkerGroup"]],
        nodes=done["Node"],
        slices=done["ResourceSlice"],
        device_classes=done["DeviceClass"],
        policies=done["DaskGPUPolicy"],
        namespaces=by_name,
        pods=done["Pod"],
    )


def _namespaces(lister: Lister, namespace: str | None) -> dict[str, Mapping[str, Any]]:
    """Namespace name -> Namespace: the one audited (``get``), or all of them."""
    if not namespace:
        return {str((o.get("metadata") or {}).get("name")): o for o in lister.items(NAMESPACES)}
    try:
        found = lister.get(NAMESPACES.path(None) + f"/{namespace}")
    except _Forbidden as exc:
        raise AuditError(
            f"Forbidden: cannot get namespaces {namespace} ({exc}); grant the audit "
            "ClusterRole of docs/operator.md#audit"
        ) from exc
    return {namespace: found} if found else {}
