"""Faults for the e2e tests: clients creating clusters, a killed operator, renewed TLS files.

Plain Python, no pytest, beside ``parity.py``: :class:`Clients` creates GPU DaskClusters
through the API server from threads and records every answer; :func:`kill` SIGKILLs the
operator with its webhooks left in place; :func:`frozen` stops it for a while, as if cut off
from the API server; :func:`renew_certificate` replaces its serving certificate and key on disk
as cert-manager and the kubelet would.
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import signal
import socket
import ssl
import threading
import time
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cryptography import x509
from kubernetes.client.exceptions import ApiException

from .parity import ParityOperator

__all__ = [
    "Clients",
    "Create",
    "file_serial",
    "frozen",
    "kill",
    "mutated",
    "renew_certificate",
    "served_serial",
]


@dataclass(frozen=True)
class Create:
    """One create as the client saw it: the stored object, or the API server's message."""

    name: str
    sent: float  # time.monotonic()
    answered: float
    obj: dict[str, Any] | None
    error: str | None


def mutated(obj: Mapping[str, Any]) -> bool:
    """Whether a DaskCluster's scheduler has a GPU and the ``gpu-parity-check`` init container."""
    spec = obj["spec"]["scheduler"]["spec"]
    limits = spec["containers"][0].get("resources", {}).get("limits", {})
    init = [c["name"] for c in spec.get("initContainers", [])]
    return "nvidia.com/gpu" in limits and "gpu-parity-check" in init


def _message(exc: Exception) -> str:
    if isinstance(exc, ApiException):
        try:
            return str(json.loads(exc.body or "")["message"])  # no body: the fallback below
        except (TypeError, ValueError, KeyError):
            return f"{exc.status} {exc.reason}: {exc.body}"
    return f"{type(exc).__name__}: {exc}"


class Clients:
    """``count`` threads creating copies of ``doc`` (unique names) until :meth:`stop`.

    Each thread waits ``pause`` seconds between its creates. Every answer is kept, in the
    order it came, in ``creates``.
    """

    def __init__(
        self,
        parity: ParityOperator,
        doc: Mapping[str, Any],
        *,
        count: int = 10,
        pause: float = 0.2,
        dry_run: bool = False,
        prefix: str = "c",
    ) -> None:
        self.parity = parity
        self.doc = copy.deepcopy(dict(doc))
        self.pause = pause
        self.dry_run = dry_run
        self.creates: list[Create] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._loop, args=(f"{prefix}{i}",), name=f"client {i}")
            for i in range(count)
        ]

    def _loop(self, stem: str) -> None:
        i = 0
        while not self._stop.is_set():
            i += 1
            doc = copy.deepcopy(self.doc)
            doc["metadata"]["name"] = f"{stem}-{i}"
            sent = time.monotonic()
            obj: dict[str, Any] | None = None
            error: str | None = None
            try:
                obj, _ = self.parity.create(doc, dry_run=self.dry_run)
            except Exception as exc:  # every answer is data here, the test judges it
                error = _message(exc)
            with self._lock:
                self.creates.append(Create(f"{stem}-{i}", sent, time.monotonic(), obj, error))
            self._stop.wait(self.pause)

    def start(self) -> Clients:
        """Start the threads."""
        for thread in self._threads:
            thread.start()
        return self

    def stop(self) -> list[Create]:
        """Stop the threads (each finishes its create in flight); return every answer."""
        self._stop.set()
        for thread in self._threads:
            thread.join()
        return list(self.creates)

    def answered_since(self, moment: float) -> list[Create]:
        """Creates sent at or after ``moment`` (``time.monotonic()``) and answered already."""
        with self._lock:
            return [c for c in self.creates if c.sent >= moment]

    def __enter__(self) -> Clients:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def kill(parity: ParityOperator) -> None:
    """SIGKILL the operator, as a crash or an OOM kill would; its webhooks stay configured."""
    if parity.process is None:
        raise RuntimeError("dask-gpu-parity is not running")
    parity.process.kill()
    parity.process = None


@contextlib.contextmanager
def frozen(parity: ParityOperator) -> Iterator[None]:
    """The operator stopped (SIGSTOP) inside the block, continued (SIGCONT) after it.

    As a partition from the API server looks to it: what changes meanwhile reaches it only
    through its watches resuming, or listing again, when it runs again.
    """
    if parity.process is None:
        raise RuntimeError("dask-gpu-parity is not running")
    group = parity.process.pid
    os.killpg(group, signal.SIGSTOP)
    try:
        yield
    finally:
        os.killpg(group, signal.SIGCONT)


def file_serial(path: Path) -> int:
    """The serial number of the PEM certificate at ``path``."""
    return int(x509.load_pem_x509_certificate(path.read_bytes()).serial_number)


def served_serial(parity: ParityOperator) -> int:
    """The serial number of the certificate the webhook server presents to a new connection.

    The connection verifies it as the API server does: signed by the CA of the webhooks'
    ``caBundle``, for ``127.0.0.1``.
    """
    with (
        socket.create_connection(("127.0.0.1", parity.port), timeout=10) as sock,
        parity.ssl_context().wrap_socket(sock, server_hostname="127.0.0.1") as tls,
    ):
        cert = tls.getpeercert()
    if not cert:
        raise ssl.SSLError("The webhook server presented no certificate")
    return int(str(cert["serialNumber"]), 16)


def renew_certificate(parity: ParityOperator, *, key_first: bool = True) -> int:
    """Issue a new serving certificate and key and move them over the operator's files.

    Each file is replaced atomically (a rename in the same folder), one after the other, as a
    tool that renews files in place does; for a moment the files hold a new key and the old
    certificate (``key_first``) or the other way round. Returns the new certificate's serial.
    """
    cert, key = parity.control_plane.issue_serving_cert(
        ["127.0.0.1", "localhost"], name=f"{parity.cert.stem}-renewed"
    )
    moves = [(key, parity.key), (cert, parity.cert)]
    serial = file_serial(cert)
    for source, target in moves if key_first else reversed(moves):
        os.replace(source, target)
    return serial
