"""Blobs: compressed against the first value packed, and read back as they were."""

from __future__ import annotations

import copy
import json
import zlib

from dask_gpu_parity.admission.runtime.blobs import Packer

FIRST = {"spec": {"worker": {"replicas": 2, "env": [{"name": "UCX_TLS", "value": "tcp"}]}}}


def test_values_come_back_as_packed_and_alike_ones_are_small() -> None:
    packer = Packer()
    alike = copy.deepcopy(FIRST)
    alike["spec"]["worker"]["replicas"] = 3
    other = {"kind": "Other", "items": list(range(50))}
    blobs = [packer.pack(value) for value in (FIRST, alike, other)]
    assert [packer.unpack(blob) for blob in blobs] == [FIRST, alike, other]
    alone = zlib.compress(json.dumps(alike, separators=(",", ":")).encode(), 1)
    assert len(blobs[1]) < len(alone) // 2  # mostly the first one's bytes, referred to
    assert packer.pack(alike) == blobs[1]  # equal values, equal blobs (records compare them)
