#!/bin/bash
# One call on the one-GPU machine (a command may run 10 minutes): the recordings of
# tests/traces/real/README.md ("Side by side on one H200") and the supervisor's live runs
# (--once, a plain process: no systemd, no $NOTIFY_SOCKET), side by side on the one GPU.
# Everything comes back under $OUT as one tarball. Durations from the environment:
#   CPU_PHASE_S FAIL_RECORD_S CAPTURE_S HANG_RECORD_S SPIN_TIMEOUT_S (see the defaults)
set -u
CPU_PHASE_S=${CPU_PHASE_S:-300} FAIL_RECORD_S=${FAIL_RECORD_S:-240} CAPTURE_S=${CAPTURE_S:-100}
HANG_RECORD_S=${HANG_RECORD_S:-365} SPIN_TIMEOUT_S=${SPIN_TIMEOUT_S:-330}
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
W=/tmp/live
rm -rf "$W"; mkdir -p "$W/out" "$W/starts"
PY=$(command -v python3)
T0=$(date +%s)
{ date -u; uname -a; nvidia-smi -q | head -40; nvidia-smi --query-gpu=name,driver_version,vbios_version,memory.total,power.limit --format=csv
  /tmp/site/bin/py-spy --version; $PY --version
  $PY -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version(), "devices", torch.cuda.device_count())'
  nproc; ps -o pid,comm -p 1; } > "$W/out/env.txt" 2>&1

rec() {   # rec NAME RECORDER-ARGS...: one recorder in the background
  local name=$1; shift
  $PY -u tests/gpu/record_real_traces.py --out "$W/out/rec-$name" --work "$W/work-$name" --pyspy-bin /tmp/site/bin \
    --poll-s 5 --stacks-every 3 --tp-size 1 "$@" > "$W/out/rec-$name.log" 2>&1
}
sup() {   # sup NAME PORT TIMEOUT_S TP_SERVER-ARGS...: the supervisor --once around tp_server.py
  local name=$1 port=$2 timeout=$3; shift 3
  cat > "$W/$name.json" <<JSON
{"unit": "tp-server-$name", "base_url": "http://127.0.0.1:$port", "model": "dummy-tp-model",
 "starts_dir": "$W/starts/$name", "poll_s": 5, "stacks": true, "venv_bin": "/tmp/site/bin",
 "start_timeout_s": $timeout, "stop_timeout_s": 10}
JSON
  echo "$name start $(( $(date +%s) - T0 ))" >> "$W/out/sup-times.txt"
  $PY -I -S roles/sglang_service/files/sglang-supervisor --settings "$W/$name.json" --once -- \
    $PY -u tests/gpu/tp_server.py --port "$port" --tp-size 1 "$@" > "$W/out/sup-$name.log" 2>&1
  echo "$name exit $? at $(( $(date +%s) - T0 ))" >> "$W/out/sup-times.txt"
}

rec soft --scenarios soft_oom --cpu-phase-s "$CPU_PHASE_S" --port 30011 --budget-s 560 \
  --tp-extra "--n-shards 4 --kv-cache-gib 4" &
rec sticky --scenarios sticky --fail-record-s "$FAIL_RECORD_S" --port 30021 --budget-s 560 \
  --tp-extra "--n-shards 2 --kv-cache-gib 2" &
rec bind --scenarios bind --fail-record-s "$FAIL_RECORD_S" --port 30031 --budget-s 560 \
  --tp-extra "--n-shards 2 --kv-cache-gib 2" &
# The GPU-bound capture alone on the GPU's compute first; then the two kernels that never end.
( sup capture 30041 300 --scenario capture --capture-s "$CAPTURE_S" --dist-port 29541 --n-shards 4 --kv-cache-gib 4
  rec spin --scenarios spin --hang-record-s "$HANG_RECORD_S" --port 30061 --budget-s $((HANG_RECORD_S + 40)) \
    --spin-name real_h200_stall_kernel_never_ends_6min --tp-extra "--n-shards 4 --kv-cache-gib 4" &
  sup spin 30051 "$SPIN_TIMEOUT_S" --scenario spin --dist-port 29551 --n-shards 2 --kv-cache-gib 1 \
    --hang-mark "$W/sup-spin.mark"
  wait ) &
wait
cp "$W"/*.json "$W/out/" 2>/dev/null
echo "all done at $(( $(date +%s) - T0 ))" >> "$W/out/sup-times.txt"
tar -czf "$OUT/live.tar.gz" -C "$W" out starts
cat "$W/out/sup-times.txt"; ls -la "$W/out"; tail -n 3 "$W"/out/*.log
