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
from typing import TextIO

import yaml

from dask_gpu_parity.admission.decide.configurations import WebhookValues, configurations
from dask_gpu_parity.admission.runtime import kube
from dask_gpu_parity.manifests import InputError

from .args import RunArgs, WebhookConfigArgs

__all__ = ["api_server", "run", "webhook_config"]

EXIT_OK = 0
_CONNECT_TIMEOUT_S = 5.0


def api_server() -> str:
    """The API server URL the operator will use; InputError when there is none."""
    try:
        return kube.load().server
    except kube.ConfigError as exc:
        raise InputError(f"run: {exc}") from exc


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
