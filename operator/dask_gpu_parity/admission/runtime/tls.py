"""The webhook server's TLS: renewed certificate files served without closing the port.

cert-manager renews the serving certificate before it expires and the kubelet rewrites the
mounted Secret's files; the operator is not restarted. kopf's own server reloads by closing its
listening socket and its connections and opening new ones: the API server's requests in that
gap were refused or cut off (``EOF``), and under ``failurePolicy: Fail`` every one of them
failed a create. Here the port stays open: the files are checked every few seconds, a renewed
pair is loaded into a new context, and the TLS handshakes of new connections switch to it (the
listening context's SNI callback, which OpenSSL calls on every handshake, with or without a
server name). Connections already open finish on the certificate they began with.

A certificate that does not match its key (the files are caught half-renewed) is not loaded:
the previous one is served until both files have changed.
"""

from __future__ import annotations

import asyncio
import logging
import os
import ssl

__all__ = ["RELOAD_SECONDS", "ServingTLS"]

log = logging.getLogger("dask_gpu_parity")
RELOAD_SECONDS = 5.0  # how often the certificate files are checked for a renewal

_Stamp = tuple[tuple[int, int, int, int], ...]


def _stamp(*paths: str) -> _Stamp:
    """What changes when a file is rewritten or replaced (a renamed file, a swapped symlink)."""
    stats = [os.stat(path) for path in paths]
    return tuple((s.st_dev, s.st_ino, s.st_size, s.st_mtime_ns) for s in stats)


def _context(certfile: str, keyfile: str) -> ssl.SSLContext:
    """A server context for this certificate and key (``SSLError`` when they do not match)."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(certfile, keyfile)
    return context


class ServingTLS:
    """The listening socket's TLS context, and the certificate that new handshakes get.

    ``context`` goes to the server once; ``current`` is replaced when :meth:`check` finds
    renewed files that load.
    """

    def __init__(self, certfile: str, keyfile: str) -> None:
        self.certfile, self.keyfile = certfile, keyfile
        self._stamp = _stamp(certfile, keyfile)  # before the read: a change after it is seen
        self.context = _context(certfile, keyfile)
        self.context.sni_callback = self._select
        self.current = self.context
        self.reloads = 0
        self._refused: _Stamp | None = None  # files that did not load: tried again on a change
        self._unreadable = False

    def _select(
        self, tls: ssl.SSLObject, server_name: str | None, listening: ssl.SSLContext
    ) -> None:
        """OpenSSL's servername callback: a new handshake gets the current certificate."""
        current = self.current
        if current is not listening:
            tls.context = current

    def check(self) -> bool:
        """Load the files if they changed since the last load; whether a new one is served."""
        try:
            stamp = _stamp(self.certfile, self.keyfile)
        except OSError as exc:
            if not self._unreadable:  # once, not every few seconds
                log.warning(
                    f"Checking the TLS files for a renewal failed: {exc}; still serving the "
                    "certificate loaded before"
                )
            self._unreadable = True
            return False
        self._unreadable = False
        if stamp in (self._stamp, self._refused):
            return False
        try:
            context = _context(self.certfile, self.keyfile)
        except (OSError, ssl.SSLError) as exc:
            self._refused = stamp
            log.warning(
                f"The renewed TLS files {self.certfile} and {self.keyfile} do not load ({exc}): "
                "still serving the certificate loaded before; trying again when they change"
            )
            return False
        self.current, self._stamp, self._refused = context, stamp, None
        self.reloads += 1
        log.info(
            f"Serving the renewed TLS certificate from {self.certfile} to new connections "
            "(connections already open keep theirs)"
        )
        return True

    async def watch(self, interval: float = RELOAD_SECONDS) -> None:
        """:meth:`check` every ``interval`` seconds, until cancelled."""
        while True:
            await asyncio.sleep(interval)
            self.check()
