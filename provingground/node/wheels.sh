#!/usr/bin/env bash
# The Python packages of the dask image (benchmarks/gpu/node/image.py unpacks them into it), as
# CPython 3.12 manylinux wheels: the GPU machine's system Python. The versions the benchmark ran.
#   wheels.sh DEST     (e.g. .gpunode/wheels)
set -euo pipefail
DEST="${1:?usage: wheels.sh DEST}"
mkdir -p "$DEST"
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --platform manylinux_2_12_x86_64 --platform manylinux1_x86_64 \
  -d "$DEST" \
  dask==2026.7.1 distributed==2026.7.1 click==8.5.1 cloudpickle==3.1.3 fsspec==2026.9.0 \
  jinja2==3.1.6 locket==1.0.0 markupsafe==3.0.4 msgpack==1.2.4 packaging==26.4 partd==1.4.2 \
  psutil==7.2.2 pyyaml==6.0.4 sortedcontainers==2.4.0 tblib==3.2.2 toolz==1.2.0 tornado==6.6.1 \
  urllib3==2.8.0 zict==3.0.0 importlib_metadata==8.7.0 zipp==4.1.2
ls "$DEST"
