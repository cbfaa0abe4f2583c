#!/usr/bin/env bash
# The whole GPU verification in one go (benchmarks/gpu/README.md): probe timings and failures on the
# real driver, then the reproduction of docs/verification.md §2 with a real Dask scheduler. Run from the repo root:
#   OUT=/some/folder benchmarks/gpu/run.sh
# Results (JSON lines and logs) land in $OUT. Every step is bounded by a timeout.
set -u
OUT="${OUT:-/tmp/gpu-parity-out}"
HERE="benchmarks/gpu"
PY="${PYTHON:-python3}"
export PYTHONUNBUFFERED=1
export CUDA_VERSION="${CUDA_VERSION:-13.0}"  # as NVIDIA's CUDA 13 images set it
mkdir -p "$OUT"

{
  echo "== $(date -u +%FT%TZ) $(uname -r)"
  timeout 30 nvidia-smi
  timeout 30 nvidia-smi --query-gpu=name,uuid,driver_version,compute_cap,memory.total,mig.mode.current --format=csv
  "$PY" -VV
  echo "CUDA_VERSION=$CUDA_VERSION NVIDIA_VISIBLE_DEVICES=${NVIDIA_VISIBLE_DEVICES-<unset>} CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES-<unset>}"
  timeout 60 "$PY" -m pip list 2>/dev/null | grep -iE '^(cupy|cuda-|numpy|nvidia-ml|dask|distributed|rmm|ucx|tornado|msgpack|cloudpickle|psutil|toolz) ' || true
} >"$OUT/machine.txt" 2>&1
cat "$OUT/machine.txt"

echo "== probe against the real driver"
timeout 150 "$PY" "$HERE/probe_bench.py" --out "$OUT/probe.jsonl" --runs 7 >"$OUT/probe.log" 2>&1
echo "probe_bench exit $?"

echo "== the probe beside its floor (driver init + context + CuPy's call), whole processes"
BEFORE=()
if [ -n "${PROBE_BEFORE:-}" ]; then BEFORE=(--before "$PROBE_BEFORE"); fi  # an earlier probe.py
timeout 240 "$PY" "$HERE/probe_floor.py" --out "$OUT/floor.jsonl" --rounds "${FLOOR_ROUNDS:-15}" "${BEFORE[@]}" >"$OUT/floor.log" 2>&1
echo "probe_floor exit $?"

echo "== install the carried wheels"
if timeout 150 "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir "$HERE"/wheels/*.whl >"$OUT/install.log" 2>&1; then
  echo "installed into $("$PY" -c 'import sys; print(sys.prefix)')" | tee -a "$OUT/install.log"
else
  echo "install into the environment failed; using --target /tmp/site + PYTHONPATH" | tee -a "$OUT/install.log"
  timeout 150 "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target /tmp/site "$HERE"/wheels/*.whl >>"$OUT/install.log" 2>&1
  export PYTHONPATH=/tmp/site
fi
timeout 60 "$PY" -c 'import dask, distributed, distributed_ucxx, ucxx, rmm, cupy; print("imports ok", dask.__version__, distributed_ucxx.__version__, rmm.__version__, cupy.__version__)' >>"$OUT/install.log" 2>&1
tail -3 "$OUT/install.log"

# After the wheels: the scheduler's Python has RMM and CuPy, as a RAPIDS image has.
echo "== the verifier's two steps (copy, then python -I <path>) beside the inline form"
timeout 150 "$PY" "$HERE/verifier_steps.py" --python "$PY" --runs 7 --out "$OUT/verifier.jsonl" >"$OUT/verifier.log" 2>&1
echo "verifier_steps exit $?"
tail -1 "$OUT/verifier.log"

echo "== reproduce docs/verification.md section 2"
timeout 330 "$PY" "$HERE/reproduce.py" --out "$OUT/reproduce.jsonl" --logs "$OUT/logs.txt" --hang-s "${HANG_S:-30}" >"$OUT/reproduce.log" 2>&1
echo "reproduce exit $?"
cut -c1-400 "$OUT/reproduce.log" | tail -20
