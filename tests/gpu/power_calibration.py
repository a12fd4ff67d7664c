#!/usr/bin/env python3
"""What one GPU draws doing nothing, spinning and computing, against its power limit.

Each phase runs one worker process (or none) and samples nvidia-smi every second
(power.draw, power.limit, utilization.gpu, memory.used, clocks.sm, temperature.gpu):

  idle        no process on the GPU
  held        a process holding 8 GiB, no kernel running
  spin_flag   one warp of a kernel polling a flag in GPU memory that nobody sets (a
              collective's wait for a peer that never comes), the host waiting for it
              in torch.cuda.synchronize()
  spin_sleep  torch.cuda._sleep (a kernel spinning on the clock), the host in
              torch.cuda.synchronize()
  gemm        bf16 8192x8192 matmuls back to back, a synchronize every 50

Writes the samples and each phase's summary (W and % of power.limit) as JSON.
Usage: python3 tests/gpu/power_calibration.py --out FILE [--seconds 30]
"""
import argparse
import json
import statistics
import subprocess
import sys
import time

FIELDS = ["power.draw", "power.limit", "utilization.gpu", "memory.used", "clocks.sm", "temperature.gpu"]
PHASES = ("idle", "held", "spin_flag", "spin_sleep", "gemm")


def worker(kind):
    import torch
    held = torch.empty(8 * 2**30, dtype=torch.uint8, device="cuda")
    held.fill_(1)
    if kind == "spin_flag":
        import cupy
        kernel = cupy.RawKernel(r'''extern "C" __global__ void wait_flag(volatile int *flag) { while (*flag == 0) { } }''',
                                "wait_flag")
        flag = cupy.zeros(1, dtype=cupy.int32)
        kernel((1,), (32,), (flag,))
    elif kind == "spin_sleep":
        torch.cuda._sleep(int(4e12))
    print("running", flush=True)
    if kind in ("spin_flag", "spin_sleep"):
        torch.cuda.synchronize()
    elif kind == "gemm":
        x = torch.randn(8192, 8192, dtype=torch.bfloat16, device="cuda")
        while True:
            for _ in range(50):
                torch.matmul(x, x)
            torch.cuda.synchronize()
    time.sleep(3600)


def sample():
    out = subprocess.run(["nvidia-smi", "--query-gpu=" + ",".join(FIELDS), "--format=csv,noheader,nounits"],
                         capture_output=True, text=True, timeout=10).stdout.splitlines()[0]
    vals = []
    for v in out.split(","):
        try:
            vals.append(float(v))
        except ValueError:
            vals.append(None)
    return dict(zip(FIELDS, vals))


def summary(rows):
    def stats(key):
        vals = [r[key] for r in rows if r.get(key) is not None]
        return {"min": min(vals), "median": statistics.median(vals), "max": max(vals)} if vals else None
    limit = statistics.median([r["power.limit"] for r in rows if r.get("power.limit")] or [0]) or None
    power = stats("power.draw")
    pct = {k: round(100.0 * v / limit, 1) for k, v in power.items()} if power and limit else None
    return {"power_w": power, "power_limit_w": limit, "power_pct_of_limit": pct, "util_pct": stats("utilization.gpu"),
            "mem_used_mib": stats("memory.used"), "clocks_sm_mhz": stats("clocks.sm"),
            "temperature_c": stats("temperature.gpu"), "samples": len(rows)}


def run_phase(kind, seconds):
    proc = None
    if kind != "idle":
        proc = subprocess.Popen([sys.executable, __file__, "--worker", kind], stdout=subprocess.PIPE, text=True)
        line = proc.stdout.readline().strip()
        if line != "running":
            proc.wait()
            return {"error": "worker did not start: %r (exit %s)" % (line, proc.poll())}, []
        time.sleep(3)   # the clocks and the counters settle
    rows = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        t0 = time.monotonic()
        rows.append(dict(sample(), t=round(time.time(), 2)))
        time.sleep(max(0.0, 1.0 - (time.monotonic() - t0)))
    if proc is not None:
        proc.kill()
        proc.wait()
        time.sleep(3)   # the context gone before the next phase
    return summary(rows), rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out")
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--phases", default=",".join(PHASES))
    ap.add_argument("--worker", choices=PHASES[1:], help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.worker:
        worker(a.worker)
        return
    board = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,vbios_version,memory.total,power.limit,"
                            "power.default_limit,power.max_limit", "--format=csv,noheader"],
                           capture_output=True, text=True, timeout=10).stdout.strip()
    result = {"board": board, "seconds_per_phase": a.seconds, "sample_every_s": 1.0, "phases": {}, "samples": {}}
    for kind in a.phases.split(","):
        seconds = a.seconds if kind not in ("held", "spin_sleep") else min(a.seconds, 10.0)
        result["phases"][kind], result["samples"][kind] = run_phase(kind, seconds)
        print(kind, json.dumps(result["phases"][kind]), flush=True)
    with open(a.out, "w") as f:
        json.dump(result, f, indent=1)


if __name__ == "__main__":
    main()
