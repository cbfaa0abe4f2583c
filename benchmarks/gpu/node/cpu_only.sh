#!/usr/bin/env bash
# The CPU-only rule's payload for the GPU node (README.md beside this, `node.py --cpu-only`):
#   benchmarks/gpu/node/cpu_only.sh DEST PYTHON      (make gpunode: DEST=.gpunode)
# - DEST/bin/nvidia-container-runtime: NVIDIA's container runtime from its Go module, the version
#   of nvidia-ctk (provingground/node/versions.env), cgo with lazy binding as NVIDIA's Makefiles;
#   only its CDI mode is used, which needs no libnvidia-container;
# - DEST/bundle/nvidia-runtime.tar.xz: that binary, what travels beside the node's bundle;
# - DEST/cpu-only/: `dask-gpu-parity fix` of cpu_only/daskjob.yaml and the three Pods
#   (cpu_only_prep.py).
# Kept apart from provingground/node/build.sh, whose inputs key the node's cache.
set -euo pipefail
DEST="${1:?DEST}"
PYTHON="${2:?PYTHON}"
here="$(cd "$(dirname "$0")" && pwd)"
# shellcheck source=/dev/null
source "$here/../../../provingground/node/versions.env"
TK=github.com/NVIDIA/nvidia-container-toolkit
mkdir -p "$DEST/bin" "$DEST/bundle"
bin="$(cd "$DEST/bin" && pwd)"
if [[ ! -x "$bin/nvidia-container-runtime" ]]; then
  echo "cpu-only: nvidia-container-runtime $TK $NVIDIA_CTK_VERSION"
  GOBIN="$bin" CGO_ENABLED=1 GOFLAGS=-trimpath go install \
    -ldflags "-s -w -extldflags=-Wl,-z,lazy -X $TK/internal/info.version=${NVIDIA_CTK_VERSION#v}" \
    "$TK/cmd/nvidia-container-runtime@$NVIDIA_CTK_VERSION"
fi
out="$DEST/bundle/nvidia-runtime.tar.xz"
if [[ ! -s "$out" || "$bin/nvidia-container-runtime" -nt "$out" ]]; then
  tar -C "$bin" -cf - nvidia-container-runtime | xz -T1 -6 >"$out.partial"
  mv "$out.partial" "$out"
fi
PATH="$(dirname "$PYTHON"):$PATH" "$PYTHON" "$here/cpu_only_prep.py" --out "$DEST/cpu-only"
printf '%10d  %s\n' "$(stat -c %s "$out")" "$out"
