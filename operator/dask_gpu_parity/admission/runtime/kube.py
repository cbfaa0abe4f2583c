"""Where the API server is and how to authenticate: the Pod's service account, else kubeconfig.

The ``kubernetes`` package only loads the configuration (its loaders handle the kubeconfig's
contexts, exec plugins and embedded certificates, and refresh a projected service-account
token); every request goes through ``apiserver.py`` on the operator's event loop, and kopf logs
in with the same credentials (``handlers.py``).
"""

from __future__ import annotations

import functools
import ssl
from collections.abc import Callable
from dataclasses import dataclass

from kubernetes import client, config

__all__ = ["Connection", "connection"]


def _anonymous() -> str | None:
    return None


@dataclass(frozen=True)
class Connection:
    """The API server's URL, its TLS and the credentials of every request."""

    server: str  # e.g. https://10.96.0.1:443
    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    verify: bool = True
    # The Authorization header, asked for on every request: a refreshed token is picked up.
    authorization: Callable[[], str | None] = _anonymous

    def ssl_context(self) -> ssl.SSLContext | None:
        """The client TLS context (``None`` for a plain-HTTP server, as in tests)."""
        if not self.server.startswith("https:"):
            return None
        context = ssl.create_default_context(cafile=self.ca_file or None)
        if self.cert_file:
            context.load_cert_chain(self.cert_file, self.key_file or None)
        if not self.verify:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        return context


@functools.cache
def connection() -> Connection:
    """The operator's connection, loaded once (it reads files).

    Raises:
        kubernetes.config.ConfigException: neither in a Pod nor with a usable kubeconfig
            (``dask-gpu-parity run`` checks this first and says so in one line).
    """
    loaded = client.Configuration()
    try:
        config.load_incluster_config(client_configuration=loaded)  # type: ignore[no-untyped-call]
    except config.ConfigException:
        config.load_kube_config(client_configuration=loaded)  # type: ignore[no-untyped-call]

    def authorization() -> str | None:
        # Through the loader's hook: an in-cluster token is read again before it expires.
        header = loaded.get_api_key_with_prefix("BearerToken", alias="authorization")
        return header or None

    return Connection(
        server=loaded.host,
        ca_file=loaded.ssl_ca_cert or None,
        cert_file=loaded.cert_file or None,
        key_file=loaded.key_file or None,
        verify=bool(loaded.verify_ssl),
        authorization=authorization,
    )
