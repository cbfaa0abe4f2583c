"""Admin kubeconfig files and TLS contexts for talking to the proving ground."""

from __future__ import annotations

import base64
import ssl
import urllib.error
import urllib.request
from pathlib import Path

import yaml

__all__ = ["get", "write_kubeconfig"]

CONTEXT = "dask-gpu-parity"


def _b64(path: Path) -> str:
    return base64.b64encode(path.read_bytes()).decode()


def write_kubeconfig(path: Path, server: str, ca: Path, cert: Path, key: Path) -> Path:
    """Write a self-contained kubeconfig (certificates embedded) for one client identity."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": CONTEXT,
                "cluster": {"server": server, "certificate-authority-data": _b64(ca)},
            }
        ],
        "users": [
            {
                "name": "admin",
                "user": {
                    "client-certificate-data": _b64(cert),
                    "client-key-data": _b64(key),
                },
            }
        ],
        "contexts": [{"name": CONTEXT, "context": {"cluster": CONTEXT, "user": "admin"}}],
        "current-context": CONTEXT,
    }
    path.write_text(yaml.safe_dump(config, sort_keys=False))
    path.chmod(0o600)
    return path


def _unverified() -> ssl.SSLContext:
    # Component health ports serve self-signed certificates generated at start.
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


def get(
    url: str,
    *,
    ca: Path | None = None,
    cert: tuple[Path, Path] | None = None,
    timeout: float = 2.0,
) -> tuple[int, bytes]:
    """GET ``url``; verify against ``ca`` (or not at all for self-signed component certs)."""
    handlers: list[urllib.request.BaseHandler] = [urllib.request.ProxyHandler({})]
    if url.startswith("https"):
        ctx = ssl.create_default_context(cafile=str(ca)) if ca else _unverified()
        if cert:
            ctx.load_cert_chain(str(cert[0]), str(cert[1]))
        handlers.append(urllib.request.HTTPSHandler(context=ctx))
    opener = urllib.request.build_opener(*handlers)
    try:
        with opener.open(url, timeout=timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()
