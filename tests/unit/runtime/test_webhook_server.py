"""The webhook server as kopf runs it: closed until ready, then one port for the process's life.

It is driven as kopf drives it (the async generator's first client configuration, then
cancelled at shutdown), on loopback with a certificate of a test CA; a client posts
AdmissionReviews as the API server does, over a keep-alive connection.
"""

from __future__ import annotations

import asyncio
import json
import os
import ssl
from pathlib import Path

import pytest
from cryptography import x509

from dask_gpu_parity.admission.runtime.apiserver import ApiClient
from dask_gpu_parity.admission.runtime.kube import Connection
from dask_gpu_parity.admission.runtime.server import WebhookServer
from dask_gpu_parity.admission.runtime.state import OperatorState, Options
from provingground.cluster import free_port
from provingground.pki import CertificateAuthority

BODY = json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"})


@pytest.fixture
def pki(tmp_path) -> tuple[CertificateAuthority, Path, Path]:
    ca = CertificateAuthority.create(tmp_path)
    cert, key = ca.issue("webhook", common_name="127.0.0.1", hostnames=["127.0.0.1"])
    return ca, cert, key


def _serial(pem: bytes) -> int:
    return int(x509.load_pem_x509_certificate(pem).serial_number)


async def _served_serial(port: int, client: ssl.SSLContext) -> int:
    _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client)
    serial = int(writer.get_extra_info("peercert")["serialNumber"], 16)
    writer.close()
    await writer.wait_closed()
    return serial


async def _post(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> dict:
    """POST an AdmissionReview on an open keep-alive connection; the answer's JSON."""
    writer.write(
        b"POST /mutate-daskcluster HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        b"Content-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
        % (len(BODY), BODY.encode())
    )
    await writer.drain()
    head = await reader.readuntil(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200 "), head
    length = next(
        int(line.split(b":")[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    return json.loads(await reader.readexactly(length))


def test_closed_until_ready_then_serves_renewed_certificate_on_the_same_port(pki):
    ca, cert, key = pki
    port = free_port()
    client = ssl.create_default_context(cafile=str(ca.cert_path))

    async def main() -> None:
        state = OperatorState(Options(certfile=str(cert), keyfile=str(key)))
        server = WebhookServer(
            state,
            ApiClient(Connection(f"http://127.0.0.1:{free_port()}")),  # never asked here
            addr="127.0.0.1",
            port=port,
            certfile=str(cert),
            keyfile=str(key),
            reload_seconds=0.05,
        )
        configs = server(None)  # type: ignore[arg-type]  # kopf's function is never called
        first = asyncio.ensure_future(anext(configs))
        await asyncio.sleep(0.2)
        assert not first.done()  # not listening before the inventory is complete
        with pytest.raises(OSError, match="Connect call failed"):
            await asyncio.open_connection("127.0.0.1", port)
        state.ready.set()
        config = await asyncio.wait_for(first, 10)
        assert config["url"] == f"https://127.0.0.1:{port}"
        before = _serial(cert.read_bytes())
        assert await _served_serial(port, client) == before
        reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client)
        assert (await _post(reader, writer))["response"]["allowed"] is False
        new_cert, new_key = ca.issue("renewed", common_name="127.0.0.1", hostnames=["127.0.0.1"])
        renewed = _serial(new_cert.read_bytes())
        os.replace(new_key, key)
        os.replace(new_cert, cert)
        async with asyncio.timeout(10):
            while await _served_serial(port, client) != renewed:
                await asyncio.sleep(0.05)
        assert server.tls is not None
        assert server.tls.reloads == 1
        # The keep-alive connection opened before the renewal still answers, on its certificate.
        assert (await _post(reader, writer))["response"]["allowed"] is False
        assert int(writer.get_extra_info("peercert")["serialNumber"], 16) == before
        writer.close()
        await writer.wait_closed()
        await configs.aclose()  # kopf's shutdown: the port closes
        with pytest.raises(OSError, match="Connect call failed"):
            await asyncio.open_connection("127.0.0.1", port)

    asyncio.run(main())
