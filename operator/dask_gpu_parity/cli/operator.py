"""``run`` and ``webhook-config``: the operator, started only once it can work.

``run`` checks what the operator needs before kopf is imported: readable TLS files, a cluster
configuration (in-cluster service account, ``$KUBECONFIG`` or ``~/.kube/config``) and an API
server that accepts a TCP connection. Each missing piece is one line and exit 2, not kopf's
tracebacks.
"""

from __future__ import annotations

import os
import socket
import urllib.parse
from pathlib import Path
from typing import Any, TextIO

import yaml

from dask_gpu_parity.admission.decide.configurations import WebhookValues, configurations
from dask_gpu_parity.manifests import InputError

from .args import RunArgs, WebhookConfigArgs

__all__ = ["api_server", "run", "webhook_config"]

EXIT_OK = 0
_SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount/token")
_CONNECT_TIMEOUT_S = 5.0


def _kubeconfig_server() -> str:
    """The API server URL of the kubeconfig's current context, as kubectl would pick it."""
    env = os.environ.get("KUBECONFIG", "")
    paths = [p for p in env.split(os.pathsep) if p] or [str(Path.home() / ".kube" / "config")]
    found = [p for p in paths if os.path.isfile(p)]
    if not found:
        raise InputError(
            "run: no cluster configuration: not in a pod (no KUBERNETES_SERVICE_HOST) and no "
            f"kubeconfig at {', '.join(paths)}: set KUBECONFIG or run it in the cluster"
        )
    configs: list[dict[str, Any]] = []
    for path in found:
        try:
            with open(path, "rb") as handle:
                data = yaml.safe_load(handle.read(2**24))
        except (OSError, yaml.YAMLError, ValueError, RecursionError) as exc:
            raise InputError(f"run: cannot read the kubeconfig {path}: {exc}") from exc
        configs.append(data if isinstance(data, dict) else {})
    current = next((c["current-context"] for c in configs if c.get("current-context")), None)
    if not current:
        raise InputError(f"run: the kubeconfig ({', '.join(found)}) sets no current-context")

    def named(key: str, name: str) -> dict[str, Any]:
        for config in configs:
            for entry in config.get(key) or []:
                if isinstance(entry, dict) and entry.get("name") == name:
                    value = entry.get(key.removesuffix("s"))
                    return value if isinstance(value, dict) else {}
        raise InputError(f"run: the kubeconfig has no {key.removesuffix('s')} named {name!r}")

    cluster = named("clusters", str(named("contexts", current).get("cluster", "")))
    server = cluster.get("server")
    if not isinstance(server, str) or not server:
        raise InputError(f"run: the kubeconfig's cluster for context {current!r} has no server")
    return server


def api_server() -> str:
    """The API server URL the operator will use; InputError when there is none."""
    host, port = (
        os.environ.get("KUBERNETES_SERVICE_HOST"),
        os.environ.get("KUBERNETES_SERVICE_PORT", "443"),
    )
    if host and _SERVICE_ACCOUNT.is_file():
        return f"https://{host}:{port}" if ":" not in host else f"https://[{host}]:{port}"
    return _kubeconfig_server()


def _reachable(server: str) -> None:
    url = urllib.parse.urlsplit(server)
    try:
        port = url.port or (443 if url.scheme == "https" else 80)
    except ValueError as exc:
        raise InputError(f"run: the API server URL {server} is invalid: {exc}") from exc
    if not url.hostname:
        raise InputError(f"run: the API server URL {server!r} names no host")
    try:
        with socket.create_connection((url.hostname, port), timeout=_CONNECT_TIMEOUT_S):
            pass
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise InputError(
            f"run: cannot reach the API server at {server} ({reason}): check the kubeconfig's "
            "server, the network, or that the cluster is up"
        ) from exc


def run(args: RunArgs) -> int:
    """Start the operator once its certificate, configuration and API server are there."""
    for path in (args.tls_cert, args.tls_key):
        if not os.access(path, os.R_OK):
            raise InputError(f"run: cannot read {path}: mount the webhook certificate there")
    _reachable(api_server())
    try:
        from dask_gpu_parity.admission.runtime import handlers  # noqa: PLC0415  # kopf only here
    except ImportError as exc:
        raise InputError(
            f"run: the operator needs the 'operator' extra ({exc.name} is missing): "
            "pip install 'dask-gpu-parity[operator]'"
        ) from exc
    handlers.run(
        handlers.Options(
            certfile=args.tls_cert,
            keyfile=args.tls_key,
            port=args.port,
            addr=args.address,
            metrics_port=args.metrics_port,
            health_port=args.health_port,
            drift=args.drift,
            policy_reports=args.policy_reports,
        ),
        json_logs=args.log_json,
        verbose=args.verbose,
    )
    return EXIT_OK


def webhook_config(args: WebhookConfigArgs, out: TextIO) -> int:
    """Print the webhook configurations for an operator outside the cluster."""
    if not args.url.startswith("https://"):
        raise InputError(
            "webhook-config: --url must start with https:// (the API server needs TLS)"
        )
    if not 1 <= args.timeout <= 30:
        raise InputError("webhook-config: --timeout must be between 1 and 30 seconds")
    try:
        with open(args.ca_file, "rb") as handle:
            ca = handle.read(2**20)
    except OSError as exc:
        raise InputError(f"webhook-config: cannot read {args.ca_file}: {exc.strerror}") from exc
    values = WebhookValues(
        ca_bundle=ca,
        url=args.url,
        failure_policy=args.failure_policy,
        timeout_seconds=args.timeout,
    )
    out.write(yaml.safe_dump_all(configurations(values), sort_keys=False))
    return EXIT_OK
