"""Where the API server is and how to authenticate: the Pod's service account, else kubeconfig.

In a Pod (as the image runs) the connection is the service account's, read as client-go's
in-cluster configuration reads it: ``KUBERNETES_SERVICE_HOST`` and ``_PORT``, the token and the
CA in ``/var/run/secrets/kubernetes.io/serviceaccount``; the token is read again every minute,
so a projected token the kubelet rotates is picked up. Outside a Pod it is the kubeconfig's
current context, merged from ``$KUBECONFIG`` (else ``~/.kube/config``) as kubectl merges it:
the first file to set ``current-context`` or to name an entry wins, and a relative path is
relative to the file that holds it. Static credentials are read here (certificates and keys as
files or ``-data``, ``token``, ``tokenFile``, ``username`` and ``password``); a user with an
``exec`` or ``auth-provider`` plugin (cloud logins) is handed to the ``kubernetes`` package's
loader, which the ``operator`` extra installs and the image, in-cluster only, does without.

Every request goes through ``apiserver.py`` on the operator's event loop, and kopf logs in with
the same credentials (``handlers.py``).
"""

from __future__ import annotations

import atexit
import base64
import binascii
import functools
import os
import shutil
import ssl
import tempfile
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

__all__ = ["ConfigError", "Connection", "connection", "load"]

SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")
TOKEN_REREAD_S = 60.0  # as client-go and the kubernetes package re-read an in-cluster token
_KUBECONFIG_LIMIT = 2**24  # bytes read of one kubeconfig file


class ConfigError(Exception):
    """No usable cluster configuration; the message says what is missing, in one line."""


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


class TokenFile:
    """``Bearer <token>`` from a file, read again once it is a minute old.

    A read that fails or finds the file empty keeps the token read before (the kubelet replaces
    a projected token atomically, and an API server that refuses a stale one says so).
    """

    def __init__(self, path: Path, clock: Callable[[], float] = time.monotonic) -> None:
        self._path = path
        self._clock = clock
        self._state = (self._read() or "", clock())  # one tuple: read and swapped whole
        if not self._state[0]:
            raise ConfigError(f"the token file {path} is empty")

    def _read(self) -> str | None:
        try:
            return self._path.read_text(encoding="utf-8").strip() or None
        except (OSError, UnicodeDecodeError) as exc:
            if not hasattr(self, "_state"):
                raise ConfigError(f"cannot read the token file {self._path}: {exc}") from exc
            return None

    def __call__(self) -> str | None:
        token, read_at = self._state
        now = self._clock()
        if now - read_at >= TOKEN_REREAD_S:
            token = self._read() or token
            self._state = (token, now)
        return f"Bearer {token}"


def in_cluster(
    env: Mapping[str, str] = os.environ, folder: Path | None = None
) -> Connection | None:
    """The service account's connection in a Pod; ``None`` when not in one."""
    folder = folder or SERVICE_ACCOUNT
    host, port = env.get("KUBERNETES_SERVICE_HOST"), env.get("KUBERNETES_SERVICE_PORT")
    if not host or not port or not (folder / "token").is_file():
        return None
    ca = folder / "ca.crt"
    if not ca.is_file():
        raise ConfigError(f"in a Pod, but the service account has no CA at {ca}")
    server = f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"
    return Connection(server, ca_file=str(ca), authorization=TokenFile(folder / "token"))


def kubeconfig_paths(env: Mapping[str, str] = os.environ) -> list[Path]:
    """The kubeconfig files kubectl reads: ``$KUBECONFIG``'s list, else ``~/.kube/config``."""
    listed = [Path(p) for p in env.get("KUBECONFIG", "").split(os.pathsep) if p]
    if listed:
        return listed
    try:
        return [Path.home() / ".kube" / "config"]
    except RuntimeError as exc:  # no HOME and no passwd entry, as for a numeric user
        raise ConfigError(
            "no cluster configuration: not in a pod (no KUBERNETES_SERVICE_HOST), no KUBECONFIG "
            f"and no home directory ({exc}): set KUBECONFIG or run it in the cluster"
        ) from exc


class _Kubeconfig:
    """The files of a kubeconfig, merged by kubectl's rules (the first to set a value wins)."""

    def __init__(self, paths: list[Path]) -> None:
        self.files: list[tuple[Path, dict[str, Any]]] = []
        for path in paths:
            if not path.is_file():
                continue
            try:
                with path.open("rb") as handle:
                    data = yaml.safe_load(handle.read(_KUBECONFIG_LIMIT))
            except (OSError, yaml.YAMLError, ValueError, RecursionError) as exc:
                raise ConfigError(f"cannot read the kubeconfig {path}: {exc}") from exc
            self.files.append((path, data if isinstance(data, dict) else {}))
        if not self.files:
            raise ConfigError(
                "no cluster configuration: not in a pod (no KUBERNETES_SERVICE_HOST) and no "
                f"kubeconfig at {', '.join(map(str, paths))}: set KUBECONFIG or run it in the "
                "cluster"
            )

    def current(self) -> str:
        for _, data in self.files:
            if isinstance(data.get("current-context"), str) and data["current-context"]:
                return str(data["current-context"])
        found = ", ".join(str(path) for path, _ in self.files)
        raise ConfigError(f"the kubeconfig ({found}) sets no current-context")

    def named(self, key: str, name: str) -> tuple[Path, dict[str, Any]]:
        """The entry ``name`` of list ``key`` and the folder of the file that holds it."""
        for path, data in self.files:
            entries = data.get(key)
            for entry in entries if isinstance(entries, list) else ():
                if isinstance(entry, dict) and entry.get("name") == name:
                    value = entry.get(key.removesuffix("s"))
                    return path.parent, value if isinstance(value, dict) else {}
        raise ConfigError(f"the kubeconfig has no {key.removesuffix('s')} named {name!r}")


class _Materialised:
    """``-data`` fields written to files of a private folder (ssl loads keys from files)."""

    def __init__(self) -> None:
        self._folder: Path | None = None

    def file(self, field: str, entry: dict[str, Any], base: Path) -> str | None:
        """``field``'s path (relative to ``base``), or ``field-data`` written to a file."""
        data = entry.get(f"{field}-data")
        if data:
            try:
                raw = base64.b64decode(str(data), validate=True)
            except (binascii.Error, ValueError) as exc:
                raise ConfigError(f"the kubeconfig's {field}-data is not base64: {exc}") from exc
            if self._folder is None:
                self._folder = Path(tempfile.mkdtemp(prefix="dask-gpu-parity-"))  # mode 0700
                atexit.register(shutil.rmtree, self._folder, True)
            path = self._folder / field
            path.write_bytes(raw)
            return str(path)
        named = entry.get(field)
        return str(base / os.path.expanduser(str(named))) if named else None


_PLUGINS = ("exec", "auth-provider")
_UNSUPPORTED = {
    "cluster": ("proxy-url", "tls-server-name"),
    "user": ("as", "as-groups", "as-uid", "as-user-extra"),
}


def from_kubeconfig(paths: list[Path]) -> Connection:
    """The current context's connection, for static credentials; plugins go to ``kubernetes``."""
    config = _Kubeconfig(paths)
    current = config.current()
    _, context = config.named("contexts", current)
    cluster_base, cluster = config.named("clusters", str(context.get("cluster", "")))
    user_base, user = (
        config.named("users", str(context["user"])) if context.get("user") else (Path("."), {})
    )
    server = cluster.get("server")
    if not isinstance(server, str) or not server:
        raise ConfigError(f"the kubeconfig's cluster for context {current!r} has no server")
    for kind, entry in (("cluster", cluster), ("user", user)):
        for key in _UNSUPPORTED[kind]:
            if entry.get(key):
                raise ConfigError(
                    f"the kubeconfig's {kind} for context {current!r} sets {key}, which the "
                    "operator does not support: use a context without it"
                )
    if any(user.get(plugin) for plugin in _PLUGINS):
        return _plugin_connection(current, paths)
    files = _Materialised()
    return Connection(
        server=server,
        ca_file=files.file("certificate-authority", cluster, cluster_base),
        cert_file=files.file("client-certificate", user, user_base),
        key_file=files.file("client-key", user, user_base),
        verify=not cluster.get("insecure-skip-tls-verify"),
        authorization=_user_authorization(user, user_base),
    )


def _user_authorization(user: dict[str, Any], base: Path) -> Callable[[], str | None]:
    if user.get("token"):
        header = f"Bearer {user['token']}"
        return lambda: header
    if user.get("tokenFile"):
        return TokenFile(base / os.path.expanduser(str(user["tokenFile"])))
    if user.get("username") and user.get("password"):
        pair = f"{user['username']}:{user['password']}".encode()
        basic = f"Basic {base64.b64encode(pair).decode()}"
        return lambda: basic
    return _anonymous


def _plugin_connection(current: str, paths: list[Path]) -> Connection:
    """The kubernetes package's loader, for a user whose credentials a plugin makes."""
    try:
        from kubernetes import client, config  # noqa: PLC0415  # the 'operator' extra only
    except ImportError as exc:
        raise ConfigError(
            f"the kubeconfig's user for context {current!r} logs in through an exec or "
            "auth-provider plugin, which needs the Kubernetes client: "
            "pip install 'dask-gpu-parity[operator]'"
        ) from exc
    loaded = client.Configuration()
    try:
        config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=os.pathsep.join(map(str, paths)), client_configuration=loaded
        )
    except (config.ConfigException, OSError, TypeError, ValueError) as exc:
        raise ConfigError(f"cannot load the kubeconfig's context {current!r}: {exc}") from exc

    def authorization() -> str | None:
        # Through the loader's hook: a plugin's token is asked for again before it expires.
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


def load(env: Mapping[str, str] = os.environ) -> Connection:
    """The Pod's service account, else the kubeconfig's current context (read now).

    Raises:
        ConfigError: neither in a Pod nor with a usable kubeconfig, in one line.
    """
    return in_cluster(env) or from_kubeconfig(kubeconfig_paths(env))


@functools.cache
def connection() -> Connection:
    """The operator's connection, loaded once (it reads files)."""
    return load()
