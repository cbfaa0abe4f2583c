#!/usr/bin/env bash
# The GPU node and its flow, on the GPU machine, from the repository root (README.md beside this):
#   OUT=/some/folder benchmarks/gpu/node/run.sh [node.py options]
# Needs what `make gpunode` built and prepared here: .gpunode/bundle (the binaries, xz),
# .gpunode/payload (PKI, kubeconfigs, manifests) and .gpunode/wheels (Dask).
# Writes flow.log, summary.json and logs.tar.gz to $OUT; stops everything it started.
set -u
OUT="${OUT:-/tmp/gpunode-out}"
mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
start=$(date +%s)
timeout --kill-after=10 "${NODE_TIMEOUT_S:-540}" python3 benchmarks/gpu/node/node.py run \
  --bundle .gpunode/bundle --payload .gpunode/payload --wheels .gpunode/wheels \
  --root "${GPUNODE_ROOT:-/opt/gpunode}" --out "$OUT" "$@" >"$OUT/stdout.log" 2>&1
code=$?
echo "node.py exit $code after $(($(date +%s) - start))s"
grep -vE '^      |^Importing' "$OUT/stdout.log" | cut -c1-400 | tail -150
exit $code
