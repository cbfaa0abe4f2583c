#!/usr/bin/env bash
# The Python packages the two operators need on the GPU machine's host (benchmarks/gpu/node):
# `dask-gpu-parity run` (its `operator` extra) and the dask operator (dask-kubernetes' kopf
# controller), as one xz archive of the unpacked wheels for CPython 3.12, the machine's Python.
#   operator_site.sh DEST     (e.g. .gpunode/site; writes DEST/site.tar.xz)
# Only what that Python lacks: it already has aiohttp, prometheus-client, PyYAML, requests,
# httpx, anyio, rich, click, certifi, python-dateutil, urllib3 (device KINDS.md), and Dask comes
# from the image's wheels (.gpunode/wheels, unpacked there too). Pruned to fit the 64 MiB a
# call carries: tests, type stubs, the kubernetes client's unused asyncio copy
# (`kubernetes.aio`; the dask operator uses kubernetes_asyncio) and python-box's compiled
# modules (it falls back to the same code in pure Python).
set -euo pipefail
DEST="${1:?usage: operator_site.sh DEST}"
mkdir -p "$DEST"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
  --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
  --platform manylinux2014_x86_64 --platform manylinux_2_12_x86_64 --platform manylinux1_x86_64 \
  -d "$work/wheels" \
  kopf==1.45.2 iso8601==2.1.0 python-json-logger==4.2.0 jsonpatch==1.48 jsonpointer==3.12 \
  kubernetes==37.0.2 durationpy==0.11 oauthlib==4.0.1 requests-oauthlib==2.0.0 \
  websocket-client==1.9.2 aiohttp-retry==2.9.1 pydantic==2.14.4 pydantic-core==2.50.5 \
  annotated-types==0.8.0 typing-inspection==0.4.5 typing-extensions==4.16.0 \
  ruamel.yaml==0.19.1 yaml-rs==0.1.6 \
  dask-kubernetes==2026.3.0 kr8s==0.20.15 cachetools==8.0.2 cryptography==50.0.2 cffi==2.1.1 \
  pycparser==3.12 exceptiongroup==1.3.2 httpx-ws==0.9.0 wsproto==1.3.2 python-box==8.0.0 \
  python-jsonpath==2.2.2 kubernetes-asyncio==36.1.0 pykube-ng==23.6.0
mkdir "$work/site"
for wheel in "$work"/wheels/*.whl; do
  python3 -m zipfile -e "$wheel" "$work/site"
done
rm -rf "$work/site/kubernetes/aio"
find "$work/site" -name '*.pyi' -delete
find "$work/site" -type d \( -name tests -o -name test \) -prune -exec rm -rf {} +
find "$work/site" -name RECORD -delete
rm -f "$work"/site/box/*.c "$work"/site/box/*.so
ls "$work/wheels" >"$DEST/wheels.txt"
tar -C "$work/site" -cf - . | xz -9 -T2 >"$DEST/site.tar.xz"
ls -l "$DEST/site.tar.xz"
