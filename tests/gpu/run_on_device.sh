#!/bin/bash
# Part 1 of a recording on a GPU machine whose commands may run 10 minutes at most
# (files written to $OUT come back): install the carried py-spy wheel, note the machine,
# start the recorder (options in $RECORD_ARGS) in its own process session (setsid, so it
# outlives this command) and copy what it has written so far to $OUT. Part 2
# (collect.sh) waits for it to finish.
set -u
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 1
{ date -u; uname -a; nvidia-smi --version; nvidia-smi -q | head -60; /tmp/site/bin/py-spy --version
  python3 -c 'import torch, safetensors; print("torch", torch.__version__, "safetensors", safetensors.__version__)'
  python3 -c 'import tqdm; print("tqdm", tqdm.__version__)'
  python3 -c 'import torch; print("cuda devices", torch.cuda.device_count(), "nccl", torch.cuda.nccl.version())'
  nvidia-smi topo -m; env | grep -E '^(NCCL|TORCH|NVSHMEM)_' | sort
  df -h /tmp; cat /proc/self/cgroup; ls /sys/fs/cgroup | head -20; ps -o pid,comm -p 1; } > "$OUT/env.txt" 2>&1
mkdir -p /tmp/rec
setsid nohup python3 -u tests/gpu/record_real_traces.py --out /tmp/rec/out --pyspy-bin /tmp/site/bin \
  --budget-s "${BUDGET_S:-1000}" ${RECORD_ARGS:-} > /tmp/rec/run.log 2>&1 < /dev/null &
echo $! > /tmp/rec/pid
sleep "${WAIT_S:-560}"
cp /tmp/rec/run.log "$OUT/"; cp /tmp/rec/out/*.jsonl "$OUT/" 2>/dev/null
tail -40 /tmp/rec/run.log
