"""The operator's one client of the API server: aiohttp, on the operator's event loop.

Reads of one object, JSON Patches, server-side applies, deletes, paginated LISTs, WATCH streams
and Events all go through
:class:`ApiClient`, with the credentials of ``kube.connection()``, and fail with one error
family: :class:`ApiError` with the HTTP status, or status 0 when there was no answer
(:class:`Unreachable`: a timeout, a refused or broken connection, no credentials).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Mapping
from typing import Any

import aiohttp

from . import listpage
from .kube import Connection

__all__ = [
    "ApiClient",
    "ApiError",
    "Conflict",
    "Forbidden",
    "Gone",
    "NotFound",
    "Unreachable",
    "error",
]

REQUEST_SECONDS = 60.0  # one request; the API server answers a 500-object page in well under that


class ApiError(Exception):
    """The API server refused (``status``, its HTTP reason and Status message), or no answer.

    ``str()`` is ``"403 <the Status message>"``, or for no answer what went wrong.
    """

    def __init__(self, status: int, reason: str, message: str = "") -> None:
        super().__init__(f"{status} {message or reason}" if status else reason)
        self.status = status
        self.reason = reason  # the HTTP reason phrase (e.g. Forbidden), or why no answer came
        self.message = message  # the Status body's message, when there is one


class NotFound(ApiError):
    """404: no such object, or no such resource (its CRD is not installed)."""


class Forbidden(ApiError):
    """403: RBAC does not allow the call."""


class Conflict(ApiError):
    """409: the object exists already, or changed since it was read."""


class Gone(ApiError):
    """410: a watch's or a continue token's resourceVersion was compacted away."""


class Unreachable(ApiError):
    """No answer (status 0): timeout, connection refused or broken, no credentials."""

    def __init__(self, reason: str) -> None:
        super().__init__(0, reason)


_BY_STATUS: dict[int, type[ApiError]] = {403: Forbidden, 404: NotFound, 409: Conflict, 410: Gone}


def error(status: int, reason: str, message: str = "") -> ApiError:
    """The :class:`ApiError` (or the subclass of its status) for an answer of the API server."""
    return _BY_STATUS.get(status, ApiError)(status, reason, message)


class ApiClient:
    """One aiohttp session to the API server (created on first use, on the running loop)."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection
        self._session: aiohttp.ClientSession | None = None

    def _headers(self, content_type: str = "") -> dict[str, str]:
        """Authorization per request: a refreshed service-account token is picked up."""
        headers = {"Accept": "application/json"}
        authorization = self.connection.authorization()
        if authorization:
            headers["Authorization"] = authorization
        if content_type:
            headers["Content-Type"] = content_type
        return headers

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(ssl=self.connection.ssl_context() or False, limit=16)
            self._session = aiohttp.ClientSession(
                base_url=self.connection.server, connector=connector, trust_env=False
            )
        return self._session

    async def close(self) -> None:
        """Close the session (at shutdown)."""
        if self._session is not None:
            await self._session.close()

    async def get(
        self,
        path: str,
        params: Mapping[str, str] | None = None,
        *,
        timeout: float = REQUEST_SECONDS,
    ) -> dict[str, Any]:
        """GET one JSON object: an object, or one page of a LIST.

        Raises:
            ApiError: an error status (:class:`NotFound` ...), or :class:`Unreachable`.
        """
        body = await self._send("GET", path, timeout, params=params or {})
        return _object("GET", path, body)

    async def list_page(
        self, path: str, params: Mapping[str, str], *, timeout: float = REQUEST_SECONDS
    ) -> listpage.Page:
        """GET one page of a LIST, decoded without ``managedFields`` (``listpage.py``).

        Raises:
            ApiError: an error status (:class:`Gone`: the continue token expired ...), or
                :class:`Unreachable` (also for an answer that is not a LIST page).
        """
        body = await self._send("GET", path, timeout, params=params)
        try:
            return listpage.decode(body)
        except ValueError as exc:
            raise Unreachable(f"GET {path} answered with no LIST page ({exc})") from exc

    async def patch(
        self, path: str, ops: list[dict[str, Any]], *, timeout: float = REQUEST_SECONDS
    ) -> dict[str, Any]:
        """Apply a JSON Patch; the object as patched.

        Raises:
            ApiError: an error status (:class:`Conflict` ...), or :class:`Unreachable`.
        """
        body = await self._send(
            "PATCH", path, timeout, data=json.dumps(ops), content_type="application/json-patch+json"
        )
        return _object("PATCH", path, body)

    async def post(
        self, path: str, obj: Mapping[str, Any], *, timeout: float = REQUEST_SECONDS
    ) -> None:
        """POST a JSON object (an Event).

        Raises:
            ApiError: an error status (:class:`Conflict`: the name is taken), or
                :class:`Unreachable`.
        """
        await self._send(
            "POST", path, timeout, data=json.dumps(obj), content_type="application/json"
        )

    async def apply(
        self,
        path: str,
        obj: Mapping[str, Any],
        *,
        field_manager: str,
        timeout: float = REQUEST_SECONDS,
    ) -> None:
        """Server-side apply ``obj`` at ``path`` (creating it if absent), forcing conflicts.

        Raises:
            ApiError: an error status (:class:`NotFound`: its API is not served), or
                :class:`Unreachable`.
        """
        params = {"fieldManager": field_manager, "force": "true"}
        await self._send(
            "PATCH",
            path,
            timeout,
            params=params,
            data=json.dumps(obj, separators=(",", ":")),
            content_type="application/apply-patch+yaml",  # JSON is YAML
        )

    async def delete(self, path: str, *, timeout: float = REQUEST_SECONDS) -> None:
        """DELETE the object at ``path``.

        Raises:
            ApiError: an error status (:class:`NotFound`: already gone), or :class:`Unreachable`.
        """
        await self._send("DELETE", path, timeout)

    async def _send(
        self, method: str, path: str, seconds: float, *, content_type: str = "", **kwargs: Any
    ) -> bytes:
        """One request with its whole answer read (the errors as for :meth:`get`)."""
        timeout = aiohttp.ClientTimeout(total=seconds)
        try:
            headers = self._headers(content_type)
            async with self._client().request(
                method, path, timeout=timeout, headers=headers, **kwargs
            ) as response:
                body = await response.read()
                if response.status >= 400:
                    raise _refused(response, body)
        except TimeoutError as exc:
            raise Unreachable(f"TimeoutError: no answer within {seconds:g} s") from exc
        except (aiohttp.ClientError, OSError) as exc:
            raise Unreachable(f"{type(exc).__name__}: {exc}") from exc
        return body

    async def watch(
        self, path: str, params: Mapping[str, str], read_seconds: float
    ) -> AsyncIterator[dict[str, Any]]:
        """The events of a WATCH, one decoded line each, until the server ends the stream.

        Raises:
            ApiError: the API server refused the watch (:class:`Gone`: relist), or
                :class:`Unreachable`: no answer, or nothing (not even a bookmark) for
                ``read_seconds``.
        """
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=10, sock_read=read_seconds)
        try:
            async with self._client().get(
                path, params=params, headers=self._headers(), timeout=timeout
            ) as response:
                if response.status >= 400:
                    raise _refused(response, await response.read())
                buffer = b""
                async for chunk in response.content.iter_any():
                    buffer += chunk
                    *lines, buffer = buffer.split(b"\n")
                    for line in lines:
                        if line.strip():
                            yield json.loads(line)
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            raise Unreachable(f"{type(exc).__name__}: {exc}") from exc


def _object(method: str, path: str, body: bytes) -> dict[str, Any]:
    try:
        data = json.loads(body)
    except ValueError as exc:
        raise Unreachable(f"{method} {path} answered with no JSON ({exc})") from exc
    if not isinstance(data, dict):
        raise Unreachable(f"{method} {path} answered {type(data).__name__}, not an object")
    return data


def _refused(response: aiohttp.ClientResponse, body: bytes) -> ApiError:
    """The error for an error status, with the ``message`` of a Kubernetes Status body."""
    reason = response.reason or ""
    try:
        status = json.loads(body)
    except ValueError:
        status = None
    message = status.get("message") if isinstance(status, dict) else None
    return error(response.status, reason, message if isinstance(message, str) else "")
