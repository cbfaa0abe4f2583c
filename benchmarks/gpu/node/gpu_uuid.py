"""Print the CUDA devices this process can use, by UUID, via the driver API (ctypes only).

Runs in the scheduler container before ``dask-scheduler`` (``gpu-entrypoint``): the UUID it prints
is compared with the one the ``gpu-parity-check`` init container's probe printed.
"""

from __future__ import annotations

import ctypes
import json
import sys


def main() -> int:
    """Print one JSON line: the CUDA devices by name and UUID, or the error."""
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError as exc:
        print(json.dumps({"cuda": "no libcuda.so.1", "error": str(exc)}))
        return 0
    count = ctypes.c_int()
    code = cuda.cuInit(0) or cuda.cuDeviceGetCount(ctypes.byref(count))
    if code:
        print(json.dumps({"cuda": "error", "code": code}))
        return 0
    devices = []
    for index in range(count.value):
        dev, name, raw = ctypes.c_int(), ctypes.create_string_buffer(256), (ctypes.c_ubyte * 16)()
        cuda.cuDeviceGet(ctypes.byref(dev), index)
        cuda.cuDeviceGetName(name, 256, dev)
        cuda.cuDeviceGetUuid(raw, dev)
        h = bytes(raw).hex()
        uuid = f"GPU-{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"
        devices.append({"index": index, "name": name.value.decode(), "uuid": uuid})
    print(
        "gpu-entrypoint: cuda " + json.dumps({"cuda_device_count": count.value, "devices": devices})
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
