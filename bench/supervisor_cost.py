#!/usr/bin/env python3
"""The unit supervisor's own cost (`make bench-supervisor`): CPU per poll and peak memory
while it watches the SGLang stand-in with 8 ranks, on this machine.

The supervisor runs as the unit runs it, with the standard library only (`python3 -I -S
sglang-supervisor --settings ... -- SERVER`), the stand-in (tests/standin, the test double of SGLang, with its nvidia-smi) as
its child: a start with a weight-load stall, so the detector asks for py-spy stacks of
the 8 ranks, then the stalled start's diagnostics; then a healthy start watched until
ready; then a log flood (a server printing 1 MB lines at 25 MB/s, then 100k short lines a
second, a few seconds each), which the supervisor's memory must not follow. Every poll the supervisor writes its own cost into the start's verdict.json
(`supervisor`: CPU of its process and the probe's commands since the previous poll, peak
RSS); this reads it there while the server runs.

Targets (docs/architecture.md): at most 0.5 s of CPU per poll and 60 MB RSS (the flood:
60 MB RSS; its CPU per poll is reported). The stand-in's
nvidia-smi is a Python program (a real nvidia-smi is a C binary costing a few ms), so the
figures here are an upper bound for the probe's commands.

    .venv/bin/python bench/supervisor_cost.py [--polls 30] [--poll-s 2]
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SRC = os.path.join(ROOT, "tests", "standin", "src")
SUPERVISOR = os.path.join(ROOT, "roles", "sglang_service", "files", "sglang-supervisor")
TARGET_CPU_S, TARGET_RSS_MIB = 0.5, 60.0


# A server whose output is a flood: 1 MiB lines at 25 MB/s, then 100k short lines a second.
FLOOD = """
import os, time
def paced(chunk, per_s, seconds):
    began = time.monotonic()
    sent = 0
    while time.monotonic() - began < seconds:
        os.write(1, chunk)
        sent += 1
        ahead = sent / per_s - (time.monotonic() - began)
        if ahead > 0:
            time.sleep(ahead)
paced(b"x" * (1 << 20) + b"\\n", 25, %(seconds)s)
paced(b"".join(b"flood line %%06d\\n" %% i for i in range(1000)), 100, %(seconds)s)
time.sleep(3600)
"""


def run_case(tmp, name, fault, polls, poll_s, port, server=None):
    folder = os.path.join(tmp, name)
    os.makedirs(folder)
    sys.path.insert(0, SRC)
    from sglang.standin.make_model import make_model
    model = os.path.join(tmp, "model")
    if not os.path.isdir(model):
        make_model(model, shards=16, shard_mib=4)
    nvsmi = os.path.join(tmp, "nvidia-smi")
    with open(nvsmi, "w") as fh:
        fh.write("#!/bin/sh\nexec %s -m sglang.standin.nvidia_smi \"$@\"\n" % sys.executable)
    os.chmod(nvsmi, 0o755)
    starts = os.path.join(folder, "starts")
    settings = {"unit": "bench", "base_url": "http://127.0.0.1:%d" % port, "model": "m", "starts_dir": starts,
                "poll_s": poll_s, "nvidia_smi": nvsmi, "stacks": True, "venv_bin": os.path.dirname(sys.executable),
                "liveness_interval_s": poll_s, "liveness_timeout_s": 5,
                "detector": {"stall_idle_window_s": 600, "suspect_after_s": 4, "stacks_after_quiet_s": 4,
                             "stacks_interval_s": poll_s, "stacks_min_gap_s": 1}}
    with open(os.path.join(folder, "settings.json"), "w") as fh:
        json.dump(settings, fh)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SGLANG_", "PYTHON", "NOTIFY_SOCKET"))}
    env.update({"PYTHONPATH": SRC, "PYTHONUNBUFFERED": "1", "SGLANG_STANDIN_GPUS": "8",
                "SGLANG_STANDIN_CONFIG": os.path.join(folder, "standin.json"),
                "SGLANG_STANDIN_STATE_DIR": os.path.join(folder, "state"),
                "SGLANG_STANDIN_FAULTS_FILE": os.path.join(folder, "faults.json"),
                "SGLANG_STANDIN_TIME_SCALE": "0.3", "SGLANG_STANDIN_SPIN_DUTY": "0.2"})
    if fault:
        env["SGLANG_STANDIN_FAULT"] = json.dumps(fault)
    if server is None:
        server = [sys.executable, "-m", "sglang.launch_server", "--model-path", model, "--port", str(port),
                  "--tp-size", "8", "--served-model-name", "m", "--enable-metrics"]
    with open(os.path.join(folder, "out.txt"), "wb") as out:
        proc = subprocess.Popen([sys.executable, "-I", "-S", SUPERVISOR, "--settings", os.path.join(folder, "settings.json"),
                                 "--", *server], env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    samples = []
    try:
        deadline = time.monotonic() + polls * poll_s * 3 + 120
        while time.monotonic() < deadline and proc.poll() is None:
            time.sleep(poll_s / 2)
            try:
                with open(os.path.join(starts, "current", "verdict.json")) as fh:
                    record = json.load(fh)
            except (OSError, ValueError):
                continue
            cost = record.get("supervisor")
            if cost and (not samples or cost["cpu_s"] != samples[-1]["cpu_s"]):
                samples.append(dict(cost, polls=record["polls"], verdict=record["verdict"]))
            if record["polls"] >= polls:
                break
    finally:
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGTERM)   # the supervisor stops its server
        proc.wait(60)
    return samples


def summary(name, samples, cpu_target=True):
    """One row; cpu_target False: the CPU per poll is reported, not judged (a flood's
    CPU is the cost of passing its lines to the journal, which no target bounds)."""
    if len(samples) < 3:
        return {"case": name, "error": "fewer than 3 polls recorded"}
    per_poll = [s["cpu_s_last_poll"] for s in samples[1:]]
    return {"case": name, "polls": samples[-1]["polls"],
            "cpu_s_per_poll_mean": round(sum(per_poll) / len(per_poll), 3),
            "cpu_s_per_poll_max": round(max(per_poll), 3),
            "max_rss_mib": samples[-1]["max_rss_mib"], "cpu_target": cpu_target}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--polls", type=int, default=30)
    ap.add_argument("--poll-s", type=float, default=2.0)
    args = ap.parse_args()
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-supervisor-") as tmp:
        stall = {"kind": "stall", "phase": "weight_load", "mode": "idle", "at": 4}
        rows.append(summary("start stalled in weight_load (py-spy stacks of the 8 ranks)",
                            run_case(tmp, "stalled", stall, args.polls, args.poll_s, 31391)))
        rows.append(summary("healthy start, then serving",
                            run_case(tmp, "healthy", None, args.polls, args.poll_s, 31392)))
        flood_s = 4
        flood_polls = int(2 * flood_s / args.poll_s) + 2
        rows.append(summary("log flood: 1 MB lines at 25 MB/s, then 100k lines/s (%d s each)" % flood_s,
                            run_case(tmp, "flood", None, flood_polls, args.poll_s, 31393,
                                     server=[sys.executable, "-c", FLOOD % {"seconds": flood_s}]), cpu_target=False))
    ok = True
    print("%-60s %6s %10s %10s %8s" % ("case", "polls", "CPU/poll", "CPU max", "RSS MiB"))
    for row in rows:
        if "error" in row:
            print("%-60s %s" % (row["case"], row["error"]))
            ok = False
            continue
        print("%-60s %6d %9.3fs %9.3fs %8.1f" % (row["case"], row["polls"], row["cpu_s_per_poll_mean"],
                                                  row["cpu_s_per_poll_max"], row["max_rss_mib"]))
        ok = ok and (row["cpu_s_per_poll_max"] <= TARGET_CPU_S or not row["cpu_target"]) \
            and row["max_rss_mib"] <= TARGET_RSS_MIB
    print("targets: at most %.1f s CPU per poll and %.0f MiB RSS: %s" % (TARGET_CPU_S, TARGET_RSS_MIB,
                                                                        "met" if ok else "NOT met"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
