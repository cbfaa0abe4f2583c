"""Faults: the serving certificate renewed on disk while the webhooks serve.

cert-manager renews the certificate before it expires and the kubelet updates the mounted
files; the operator is not restarted. Expected outcome, while clients create GPU DaskClusters
without pause through the API server (``failurePolicy: Fail``, so a webhook that does not answer
fails the create):

- no create fails, across three renewals (key replaced first, certificate first, key first);
- after each renewal, a new TLS connection to the webhook port is served the new certificate
  (its serial), verified against the CA as the API server verifies it;
- creates go on being mutated after each renewal.
"""

from __future__ import annotations

import time

import pytest

from provingground.faults import Clients, file_serial, mutated, renew_certificate, served_serial
from provingground.parity import eventually, example

pytestmark = [pytest.mark.e2e, pytest.mark.timeout(600)]


def test_renewed_certificate_served_without_a_failed_create(parity, namespace):
    doc = example("gpu-cluster-tcp.yaml", namespace=namespace)
    assert served_serial(parity) == file_serial(parity.cert)
    switched: list[float] = []
    with Clients(parity, doc, count=4, pause=0.0, dry_run=True) as clients:
        eventually(lambda: len(clients.creates) >= 20, timeout=120)
        for key_first in (True, False, True):
            renewed = time.monotonic()
            serial = renew_certificate(parity, key_first=key_first)
            eventually(lambda serial=serial: served_serial(parity) == serial, timeout=120)
            switched.append(time.monotonic() - renewed)
            since = time.monotonic()
            eventually(lambda since=since: len(clients.answered_since(since)) >= 20, timeout=120)
    creates = clients.creates
    failed = [c for c in creates if c.error is not None]
    print(
        f"\n{len(creates)} creates (dry run, 4 clients) across 3 renewals; new certificate "
        f"served {', '.join(f'{s:.1f}' for s in switched)} s after each; {len(failed)} failed"
    )
    assert failed == []
    assert all(c.obj is not None and mutated(c.obj) for c in creates)
    parity.check_alive()
