"""Replay verdicts on the traces recorded on a real H200 (tests/traces/real/README.md):
the scoring rules of ../shared/tools/score.py, applied through bin/sglang-ops replay."""
import glob
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
TRACES = sorted(glob.glob(os.path.join(ROOT, "tests", "traces", "real", "*.jsonl")))
DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")


def load(path):
    with open(path) as f:
        lines = [json.loads(line) for line in f if line.strip()]
    return lines[0], lines[1:]


def replay(path):
    p = subprocess.run([sys.executable, os.path.join(ROOT, "bin", "sglang-ops"), "replay", path],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    lines = [line for line in p.stdout.splitlines() if line.strip()]
    assert lines, p.stderr
    return json.loads(lines[-1])


def test_the_three_real_outcomes_are_recorded():
    assert sorted(load(p)[0]["expect"]["outcome"] for p in TRACES) == ["failed", "ready", "stalled"]


@pytest.mark.parametrize("path", TRACES, ids=[os.path.basename(p) for p in TRACES])
def test_replay_verdict_matches_the_label(path):
    header, obs = load(path)
    exp, poll = header["expect"], header["poll_s"]
    res = replay(path)
    if exp["outcome"] == "ready":
        assert res["verdict"] == "ready"
        return
    assert res["verdict"] in ("stalled", "failed"), res
    assert res["t"] >= exp["onset_t"], "acted before the fault: %s" % res
    latency = res["t"] - exp["onset_t"]
    if exp["outcome"] == "failed":
        assert res["verdict"] == "failed" and latency <= 2 * poll + 1, res
    else:
        budget = 600 if any("stacks" in o for o in obs) else 1800 + 2 * poll
        assert res["verdict"] == "stalled" and latency <= budget, res


def test_real_hang_without_usable_stacks_is_still_called_idle_stall():
    # Recorded before py-spy could read stopped processes: no stacks after the SIGSTOP,
    # so only the everything-flat window can decide.
    path = os.path.join(DATA, "real_h200_hang_before_pyspy_fix.jsonl")
    header, _ = load(path)
    res = replay(path)
    assert res["verdict"] == "stalled" and res["reason_code"] == "stall_idle"
    assert res["t"] >= header["expect"]["onset_t"]


def test_real_traces_hold_what_the_real_driver_showed():
    healthy = load(os.path.join(ROOT, "tests", "traces", "real", "real_h200_healthy_load.jsonl"))[1]
    mem = [o["gpus"][0]["mem_used_mib"] for o in healthy]
    assert mem[0] == 0 and mem == sorted(mem)  # idle GPU reads 0 MiB; loading only adds
    assert any(o["gpu_procs"] for o in healthy) and not healthy[0]["gpu_procs"]
    assert any(isinstance(o["gpus"][0].get("power_w"), float) for o in healthy)
    bar = [r["msg"] for o in healthy for r in o.get("log", []) if "Loading safetensors" in r["msg"]]
    assert len(bar) == 1 and bar[0].count("\r") >= 16
