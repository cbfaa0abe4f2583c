"""Objects kept as compressed JSON: the drift watch's DaskClusters and pod templates."""

from __future__ import annotations

import json
import zlib
from typing import Any

__all__ = ["Packer"]


class Packer:
    """Compact JSON, compressed against the first value packed (zlib's preset dictionary).

    A fleet's clusters are stamped from a few templates, so what one cluster's JSON repeats of
    the first one's costs a few bytes: about 35 bytes a DaskCluster and 15 a pod template,
    against 550 and 200 compressed alone. The dictionary is set once, for the life of the
    process (every blob refers to it); a value unlike the first compresses as it would alone.
    """

    _WBITS = -15  # raw deflate with a 32 KiB window: no header, no checksum (the bytes stay here)

    def __init__(self) -> None:
        self._zdict: bytes | None = None

    def pack(self, value: Any) -> bytes:
        """``value`` as compact JSON, compressed."""
        text = json.dumps(value, separators=(",", ":")).encode()
        if self._zdict is None:
            self._zdict = text[-32768:]
        packer = zlib.compressobj(1, zlib.DEFLATED, self._WBITS, zdict=self._zdict)
        return packer.compress(text) + packer.flush()

    def unpack(self, blob: bytes) -> Any:
        """The value of a blob :meth:`pack` made."""
        assert self._zdict is not None  # set by the first pack
        return json.loads(zlib.decompressobj(self._WBITS, zdict=self._zdict).decompress(blob))
