#!/bin/bash
# The recordings of tests/traces/real/README.md, "Recorded on one H100, 2026-12-07", as one
# timeline on the one-GPU machine (about 14 minutes): started in its own process session
# by the first call (START=1), so that it outlives that call; every call (the first and
# the ones after it) waits up to WAIT_S and packs what is there so far into
# $OUT/round5.tar.gz. Three phases, never overlapping:
#   P  alone on the GPU, one after another (power matters): power calibration, long_sync,
#      workers, the spin that never ends (a warp polling a flag);
#   Q  side by side: vanish, nodes_late, nodes_never, and the supervisor (--once) around a
#      twin of vanish and of nodes_late (its node 1 started PEER_DELAY_S late by this script);
#   R  from 140 s into Q (vanish over, the nodes' waits decided by today's watchers): shared
#      (a neighbour process on the GPU) and the supervisor around its twin.
set -u
W=/tmp/r5
if [ "${START:-0}" = 1 ] && [ "${1:-}" != timeline ]; then
  python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
  rm -rf "$W"; mkdir -p "$W/out" "$W/starts"
  START=0 setsid nohup bash tests/gpu/round5_batch.sh timeline > "$W/out/timeline.log" 2>&1 < /dev/null &
  sleep 2
fi
if [ "${1:-}" != timeline ]; then   # a call: wait, then pack what is there
  end=$(( $(date +%s) + ${WAIT_S:-540} ))
  while [ "$(date +%s)" -lt "$end" ] && [ ! -e "$W/out/all-done" ]; do sleep 5; done
  tar -czf "$OUT/round5.tar.gz" -C "$W" out starts
  cat "$W/out/times.txt" 2>/dev/null; tail -n 5 "$W/out/timeline.log"; ls -la "$W/out"
  exit 0
fi

PY=$(command -v python3)
PEER_DELAY_S=${PEER_DELAY_S:-217}
T0=$(date +%s)
mark() { echo "$1 $(( $(date +%s) - T0 ))" >> "$W/out/times.txt"; }
{ date -u; uname -a; nvidia-smi -q | head -45
  nvidia-smi --query-gpu=name,driver_version,vbios_version,memory.total,power.limit,power.default_limit,power.max_limit --format=csv
  /tmp/site/bin/py-spy --version; $PY --version
  $PY -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda, "nccl", torch.cuda.nccl.version(), "devices", torch.cuda.device_count())'
  $PY -c 'import cupy; print("cupy", cupy.__version__)'
  nproc; ps -o pid,comm -p 1; } > "$W/out/env.txt" 2>&1
CARD=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tr 'A-Z' 'a-z' | grep -o 'h[12]00' | head -1)
CARD=${CARD:-gpu}

rec() {   # rec NAME RECORDER-ARGS...
  local name=$1; shift
  mark "rec-$name start"
  $PY -u tests/gpu/record_real_traces.py --out "$W/out/rec-$name" --work "$W/work-$name" --pyspy-bin /tmp/site/bin \
    --poll-s 5 --stacks-every 3 --tp-size 1 --card "$CARD" "$@" > "$W/out/rec-$name.log" 2>&1
  mark "rec-$name end rc=$?"
}
sup() {   # sup NAME PORT TIMEOUT_S TP_SERVER-ARGS...: the supervisor --once around tp_server.py
  local name=$1 port=$2 timeout=$3; shift 3
  cat > "$W/$name.json" <<JSON
{"unit": "tp-server-$name", "base_url": "http://127.0.0.1:$port", "model": "dummy-tp-model",
 "starts_dir": "$W/starts/$name", "poll_s": 5, "stacks": true, "venv_bin": "/tmp/site/bin",
 "start_timeout_s": $timeout, "stop_timeout_s": 10}
JSON
  mark "sup-$name start"
  $PY -I -S roles/sglang_service/files/sglang-supervisor --settings "$W/$name.json" --once -- \
    $PY -u tests/gpu/tp_server.py --port "$port" --tp-size 1 "$@" > "$W/out/sup-$name.log" 2>&1
  mark "sup-$name exit $?"
}

if [ "${LITE:-0}" = 1 ]; then   # the short set (about 6 minutes): calibration (CALIBRATE=0: none), workers, then vanish, never, shared
  if [ "${CALIBRATE:-1}" = 1 ]; then
    mark "calibration start"
    $PY -u tests/gpu/power_calibration.py --out "$W/out/power_calibration_$CARD.json" --seconds 15 --phases idle,spin_flag,gemm \
      > "$W/out/calibration.log" 2>&1
    mark "calibration end rc=$?"
  fi
  rec workers --scenarios workers --gemm-s "${GEMM_S:-90}" --port 30102 --budget-s 200
  [ "${MICRO:-0}" = 1 ] && { mark "all done"; touch "$W/out/all-done"; exit 0; }   # calibration and workers only
  rec vanish --scenarios vanish --after-s 100 --port 30111 --budget-s 170 --dist-port-base 29611 &
  rec nodes_never --scenarios nodes_never --after-s 150 --port 30113 --budget-s 170 --dist-port-base 29613 &
  rec shared --scenarios shared --after-s 100 --port 30132 --budget-s 170 --dist-port-base 29632 &
  $PY tests/gpu/fault_at_mark.py --mark "$W/sup-vanish.mark" --delay 5 --do kill --done "$W/out/sup-vanish.done" --give-up-s 150 &
  sup vanish 30121 140 --scenario vanish --dist-port 29621 --hang-mark "$W/sup-vanish.mark" --n-shards 4 --kv-cache-gib 4 \
    --launcher-waits --capture-s 120 &
  sup nodes_never 30122 160 --scenario nodes --tp-size 2 --backend gloo --capture-iters 20 --nnodes 2 \
    --dist-init-addr 127.0.0.1:29622 --n-shards 2 --kv-cache-gib 2 --node-rank 0 --hang-mark "$W/sup-nodes.mark" &
  wait
  cp "$W"/*.json "$W/out/" 2>/dev/null
  mark "all done"
  touch "$W/out/all-done"
  exit 0
fi

# P: alone on the GPU
mark "calibration start"
$PY -u tests/gpu/power_calibration.py --out "$W/out/power_calibration_$CARD.json" --seconds 15 --phases idle,spin_flag,gemm > "$W/out/calibration.log" 2>&1
mark "calibration end rc=$?"
rec long_sync --scenarios long_sync --sync-s 110 --port 30101 --budget-s 210
rec workers --scenarios workers --gemm-s 90 --port 30102 --budget-s 210
rec spin --scenarios spin --hang-record-s 150 --port 30103 --budget-s 200 \
  --spin-name "real_${CARD}_stall_spin_wait_never_ends" --tp-extra "--n-shards 4 --kv-cache-gib 4 --spin-kind flag"

# Q: side by side, little GPU work
rec vanish --scenarios vanish --after-s 120 --port 30111 --budget-s 200 --dist-port-base 29611 &
rec nodes_late --scenarios nodes_late --peer-delay-s "$PEER_DELAY_S" --port 30112 --budget-s 275 --dist-port-base 29612 &
rec nodes_never --scenarios nodes_never --after-s 180 --port 30113 --budget-s 250 --dist-port-base 29613 &
$PY tests/gpu/fault_at_mark.py --mark "$W/sup-vanish.mark" --delay 5 --do kill --done "$W/out/sup-vanish.done" --give-up-s 300 &
sup vanish 30121 150 --scenario vanish --dist-port 29621 --hang-mark "$W/sup-vanish.mark" --n-shards 4 --kv-cache-gib 4 \
  --launcher-waits --capture-s 120 &
NODE_ARGS="--scenario nodes --tp-size 2 --backend gloo --capture-iters 20 --nnodes 2 --dist-init-addr 127.0.0.1:29622 --n-shards 2 --kv-cache-gib 2"
sup nodes_late 30122 265 $NODE_ARGS --node-rank 0 --hang-mark "$W/sup-nodes.mark" &
( sleep "$PEER_DELAY_S"; mark "sup-nodes_late node1 start"
  setsid $PY -u tests/gpu/tp_server.py --port 30122 $NODE_ARGS --node-rank 1 --hang-mark "$W/sup-node1.mark" \
    > "$W/out/sup-nodes_late-node1.log" 2>&1 < /dev/null & echo $! > "$W/node1.pid" ) &
# R: a neighbour on the GPU, once vanish is over
( sleep 140; mark "R start"
  $PY tests/gpu/fault_at_mark.py --mark "$W/sup-frozen.mark" --delay 1 --do stop --done "$W/out/sup-frozen.done" --give-up-s 130 &
  ( sleep 20; sup frozen 30131 115 --scenario frozen --dist-port 29631 --hang-mark "$W/sup-frozen.mark" --n-shards 4 \
      --kv-cache-gib 4 --capture-s 60 ) &
  rec shared --scenarios shared --after-s 100 --port 30132 --budget-s 180 --dist-port-base 29632 &
  wait ) &
wait
[ -s "$W/node1.pid" ] && kill -9 -- -"$(cat "$W/node1.pid")" 2>/dev/null
mark "Q end"

wait
cp "$W"/*.json "$W/out/" 2>/dev/null
mark "all done"
touch "$W/out/all-done"
