"""Renewed TLS files: new handshakes get the new certificate, the port and open connections stay.

A loopback TLS server in this process serves with ``ServingTLS.context``, as the webhook server
does; a client connects as the API server does (CA-verified, to ``127.0.0.1``, no SNI).
"""

from __future__ import annotations

import asyncio
import logging
import os
import ssl
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from cryptography import x509

from dask_gpu_parity.admission.runtime.tls import ServingTLS
from provingground.pki import CertificateAuthority


@pytest.fixture(scope="module")
def ca(tmp_path_factory) -> CertificateAuthority:
    return CertificateAuthority.create(tmp_path_factory.mktemp("pki"))


@pytest.fixture
def issue(ca, tmp_path) -> Callable[[str], tuple[Path, Path, int]]:
    """Issue a loopback serving certificate; return its files and serial."""

    def issue(name: str) -> tuple[Path, Path, int]:
        cert, key = ca.issue(name, common_name="127.0.0.1", hostnames=["127.0.0.1"])
        serial = x509.load_pem_x509_certificate(cert.read_bytes()).serial_number
        return cert, key, serial

    return issue


@pytest.fixture
def served(ca, tmp_path, issue) -> tuple[Path, Path, int]:
    """The operator's files (first certificate), in a folder of their own."""
    cert, key, serial = issue("first")
    folder = tmp_path / "mounted"
    folder.mkdir()
    os.replace(cert, folder / "tls.crt")
    os.replace(key, folder / "tls.key")
    return folder / "tls.crt", folder / "tls.key", serial


@asynccontextmanager
async def _server(tls: ServingTLS) -> AsyncIterator[int]:
    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while line := await reader.readline():
            writer.write(line)
            await writer.drain()
        writer.close()

    server = await asyncio.start_server(echo, "127.0.0.1", 0, ssl=tls.context)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()


async def _connect(ca: CertificateAuthority, port: int):
    client = ssl.create_default_context(cafile=str(ca.cert_path))
    reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client)
    serial = int(writer.get_extra_info("peercert")["serialNumber"], 16)
    return reader, writer, serial


async def _serial(ca: CertificateAuthority, port: int) -> int:
    """The serial a new connection is served; the connection closed again."""
    _, writer, serial = await _connect(ca, port)
    writer.close()
    await writer.wait_closed()
    return serial


async def _echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bytes:
    writer.write(b"ping\n")
    await writer.drain()
    return await reader.readline()


def test_renewal_served_to_new_connections_and_open_ones_keep_going(ca, served, issue):
    cert, key, first = served

    async def main() -> None:
        tls = ServingTLS(str(cert), str(key))
        assert not tls.check()  # nothing changed
        async with _server(tls) as port:
            reader, writer, serial = await _connect(ca, port)
            assert serial == first
            new_cert, new_key, second = issue("second")
            os.replace(new_key, key)
            os.replace(new_cert, cert)
            assert tls.check()
            assert not tls.check()  # loaded once
            assert await _serial(ca, port) == second
            assert await _echo(reader, writer) == b"ping\n"  # opened before, still served
            writer.close()
            await writer.wait_closed()
        assert tls.reloads == 1

    asyncio.run(main())


@pytest.mark.parametrize("first_file", ["key", "cert"], ids=["key-first", "cert-first"])
def test_half_renewed_files_keep_the_previous_certificate(ca, served, issue, caplog, first_file):
    cert, key, first = served
    new_cert, new_key, second = issue("second")
    moves = {"key": (new_key, key), "cert": (new_cert, cert)}
    later = moves.pop(first_file)
    ((source, target),) = moves.values()

    async def main() -> None:
        tls = ServingTLS(str(cert), str(key))
        async with _server(tls) as port:
            os.replace(*later)  # only one of the pair: they do not match
            with caplog.at_level(logging.WARNING, logger="dask_gpu_parity"):
                assert not tls.check()
                assert not tls.check()  # the same files are not tried (nor logged) again
            assert await _serial(ca, port) == first
            os.replace(source, target)
            assert tls.check()
            assert await _serial(ca, port) == second

    asyncio.run(main())
    (record,) = caplog.records
    assert "do not load" in record.getMessage()
    assert "still serving the certificate loaded before" in record.getMessage()


def test_missing_files_keep_the_previous_certificate(ca, served, caplog):
    cert, key, first = served

    async def main() -> None:
        tls = ServingTLS(str(cert), str(key))
        saved = cert.read_bytes()
        cert.unlink()
        with caplog.at_level(logging.WARNING, logger="dask_gpu_parity"):
            assert not tls.check()
            assert not tls.check()
        async with _server(tls) as port:
            assert await _serial(ca, port) == first
        cert.write_bytes(saved)  # the same certificate back: a new file, loaded again
        assert tls.check()

    asyncio.run(main())
    assert len(caplog.records) == 1  # logged once, not every few seconds
    assert "Checking the TLS files for a renewal failed" in caplog.records[0].getMessage()


def test_watch_picks_up_a_renewal(ca, served, issue):
    cert, key, _ = served

    async def main() -> None:
        tls = ServingTLS(str(cert), str(key))
        watch = asyncio.create_task(tls.watch(0.01))
        new_cert, new_key, second = issue("second")
        os.replace(new_key, key)
        os.replace(new_cert, cert)
        async with asyncio.timeout(10):
            while not tls.reloads:
                await asyncio.sleep(0.01)
        watch.cancel()
        async with _server(tls) as port:
            assert await _serial(ca, port) == second

    asyncio.run(main())
