"""The API server over aiohttp, for the informers: paginated LISTs and WATCH streams.

The ``kubernetes`` client blocks and needs a thread per stream; the informers (``informer.py``)
run on the operator's event loop instead, with the same credentials (``kube.configuration``).
"""

from __future__ import annotations

import json
import ssl
from collections.abc import AsyncIterator, Mapping
from typing import Any

import aiohttp
from kubernetes import client

__all__ = ["ApiServer", "ApiStatusError", "ApiUnavailableError"]

_LIST_SECONDS = 60.0  # one page; the API server answers a 500-object page in well under that


class ApiStatusError(Exception):
    """The API server answered with an error status (403, 404, 410 Gone, ...)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(f"{status} {message}")
        self.status = status


class ApiUnavailableError(Exception):
    """The API server could not be reached, or the connection broke."""


class ApiServer:
    """One aiohttp session to the API server (created on first use, on the running loop)."""

    def __init__(self, configuration: client.Configuration) -> None:
        self._configuration = configuration
        self._session: aiohttp.ClientSession | None = None

    def _ssl(self) -> ssl.SSLContext:
        cfg = self._configuration
        context = ssl.create_default_context(cafile=cfg.ssl_ca_cert or None)
        if cfg.cert_file:
            context.load_cert_chain(cfg.cert_file, cfg.key_file or None)
        if not cfg.verify_ssl:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        return context

    def _headers(self) -> dict[str, str]:
        """Authorization per request: a refreshed service-account token is picked up."""
        headers = {"Accept": "application/json"}
        settings: dict[str, Any] = dict(self._configuration.auth_settings())
        for setting in settings.values():
            if setting.get("in") == "header" and setting.get("value"):
                headers[str(setting["key"])] = str(setting["value"])
        return headers

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None or self._session.closed:
            connector = aiohttp.TCPConnector(ssl=self._ssl(), limit=16)
            self._session = aiohttp.ClientSession(
                base_url=self._configuration.host, connector=connector, trust_env=False
            )
        return self._session

    async def close(self) -> None:
        """Close the session (at shutdown)."""
        if self._session is not None:
            await self._session.close()

    async def get(self, path: str, params: Mapping[str, str]) -> dict[str, Any]:
        """GET a JSON object (one page of a LIST).

        Raises:
            ApiStatusError: the API server answered with an error status.
            ApiUnavailableError: no answer (connection refused or broken, timeout).
        """
        body = await self._send("GET", path, params=params, headers=self._headers())
        data = json.loads(body)
        if not isinstance(data, dict):
            raise ApiUnavailableError(f"GET {path} answered {type(data).__name__}, not an object")
        return data

    async def post(self, path: str, body: Mapping[str, Any]) -> None:
        """POST a JSON object (an Event).

        Raises:
            ApiStatusError: the API server answered with an error status.
            ApiUnavailableError: no answer (connection refused or broken, timeout).
        """
        headers = {**self._headers(), "Content-Type": "application/json"}
        await self._send("POST", path, data=json.dumps(body), headers=headers)

    async def _send(self, method: str, path: str, **kwargs: Any) -> bytes:
        """One request with its whole answer read (the errors as for :meth:`get`)."""
        timeout = aiohttp.ClientTimeout(total=_LIST_SECONDS)
        try:
            async with self._client().request(method, path, timeout=timeout, **kwargs) as response:
                body = await response.read()
                if response.status >= 400:
                    raise ApiStatusError(response.status, _message(body, response.reason))
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            raise ApiUnavailableError(f"{type(exc).__name__}: {exc}") from exc
        return body

    async def watch(
        self, path: str, params: Mapping[str, str], read_seconds: float
    ) -> AsyncIterator[dict[str, Any]]:
        """The events of a WATCH, one decoded line each, until the server ends the stream.

        Raises:
            ApiStatusError: the API server refused the watch (410 Gone: relist).
            ApiUnavailableError: no answer, or nothing (not even a bookmark) for
                ``read_seconds``.
        """
        timeout = aiohttp.ClientTimeout(total=None, sock_connect=10, sock_read=read_seconds)
        try:
            async with self._client().get(
                path, params=params, headers=self._headers(), timeout=timeout
            ) as response:
                if response.status >= 400:
                    body = await response.read()
                    raise ApiStatusError(response.status, _message(body, response.reason))
                buffer = b""
                async for chunk in response.content.iter_any():
                    buffer += chunk
                    *lines, buffer = buffer.split(b"\n")
                    for line in lines:
                        if line.strip():
                            yield json.loads(line)
        except (aiohttp.ClientError, OSError, TimeoutError) as exc:
            raise ApiUnavailableError(f"{type(exc).__name__}: {exc}") from exc


def _message(body: bytes, reason: str | None) -> str:
    """The ``message`` of a Kubernetes Status body, else the HTTP reason."""
    try:
        status = json.loads(body)
    except ValueError:
        return reason or ""
    if isinstance(status, dict) and isinstance(status.get("message"), str):
        return str(status["message"])
    return reason or ""
