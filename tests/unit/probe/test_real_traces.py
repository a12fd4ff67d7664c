"""Replay verdicts on the traces recorded on real H200s and an H100 (tests/traces/real/README.md),
judged by the bench's rules (bench/scoring: ../shared/tools/score.py's budgets and the
labels' patience), through bin/sglang-ops replay."""
import glob
import json
import os
import subprocess
import sys

import pytest

from bench.scoring.judge import judge
from bench.scoring.label import Label

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
REAL = os.path.join(ROOT, "tests", "traces", "real")
TRACES = sorted(glob.glob(os.path.join(REAL, "*.jsonl")))
DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
# Recordings whose label the detector does not meet yet (tests/traces/real/README.md says
# what it decides): strict, so each one leaves this list as soon as the detector meets it.
PENDING = {}


def _labelled(paths):
    return [pytest.param(p, marks=pytest.mark.xfail(strict=True, reason=PENDING[os.path.basename(p)]))
            if os.path.basename(p) in PENDING else p for p in paths]




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
    assert {load(p)[0]["expect"]["outcome"] for p in TRACES} == {"failed", "ready", "stalled"}


@pytest.mark.parametrize("path", _labelled(TRACES), ids=os.path.basename)
def test_replay_verdict_matches_the_label(path):
    header, obs = load(path)
    res = replay(path)
    verdict = judge(Label.of(header, obs), res, end_t=obs[-1]["t"])
    assert verdict.ok, "%s: %s" % (verdict.why, res)


def test_a_node_whose_peer_has_not_come_says_so_to_the_end_of_the_recording():
    path = os.path.join(REAL, "real_h100_stall_peer_node_never_comes.jsonl")
    res = replay(path)
    assert res["verdict"] == "undecided" and res["reason_code"] == "waiting_peer", res
    assert "waiting for node 1 at 127.0.0.1:29613" in res["reason"] and "of the rendezvous's 10m00s" in res["reason"]


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


def _window(obs, first_line, last_line=None):
    """Observations after the poll that brought `first_line`, before the one with `last_line`."""
    start = next(o["t"] for o in obs if any(first_line in r["msg"] for r in o.get("log", [])))
    end = next((o["t"] for o in obs if last_line and any(last_line in r["msg"] for r in o.get("log", []))), float("inf"))
    return [o for o in obs if start < o["t"] < end]


def _cpu_pct(window):
    return [(b["procs"]["cpu_s"] - a["procs"]["cpu_s"]) / (b["t"] - a["t"]) * 100 for a, b in zip(window, window[1:])]


def test_hung_allreduce_on_real_gpus_spins_one_gpu_at_idle_power_and_nvidia_smi_answers():
    header, obs = load(os.path.join(REAL, "real_h200x2_hung_allreduce.jsonl"))
    hung = [o for o in obs if o["t"] > header["expect"]["onset_t"]]
    assert len(hung) >= 60
    # NCCL's wait kernel keeps the utilisation counter at 100 % on the waiting rank's
    # GPU while drawing about idle power; the straggler's GPU reads 0 %.
    assert all(o["gpus"][0]["util_pct"] == 100 and o["gpus"][0]["power_w"] < 150 for o in hung)
    assert all(o["gpus"][1]["util_pct"] == 0 for o in hung)
    assert len({(o["gpus"][0]["mem_used_mib"], o["gpus"][1]["mem_used_mib"]) for o in hung}) == 1
    assert all(95 <= c <= 105 for c in _cpu_pct(hung))  # rank 0's synchronize spins one core
    stacks = {(s["rank"], tuple(s["frames"])) for o in hung for s in o.get("stacks", [])}
    assert {r for r, _ in stacks} == {"TP0", "TP1"} and len(stacks) == 2
    # nvidia-smi kept answering: never missing, every call well inside the probe's limit.
    assert not any("gpus" in o.get("missing", {}) for o in obs)
    rec = header["recorded"]
    assert rec["nvidia_smi_s"]["max"] < 1.0
    assert all(not row[form]["timed_out"] for row in rec["nvidia_smi_while_hung"] for form in ("table", "q") if form in row)
    assert rec["read_gpus_checks"]["probe_limit_5s"]["missing"] == {}
    assert "timed out" in rec["read_gpus_checks"]["forced_limit_1ms"]["missing"]["gpus"]


def test_healthy_gpu_bound_autotune_on_real_gpus_shows_a_wait_stack_busy_gpus_and_full_power():
    header, obs = load(os.path.join(REAL, "real_h200x2_healthy_autotune_constant_stacks.jsonl"))
    tuning = _window(obs, "Autotuning GEMM", "Autotuning done")
    assert len(tuning) >= 40 and header["expect"]["outcome"] == "ready"
    assert len({o["gpus"][0]["mem_used_mib"] for o in tuning}) == 1
    samples = [s["frames"][0] for o in tuning for s in o.get("stacks", [])]
    assert samples.count("synchronize") >= 0.9 * len(samples)
    # What tells it from the hung all-reduce on the same GPUs: every GPU busy, at full power.
    assert all(min(g["power_w"] for g in o["gpus"]) > 500 for o in tuning)
    assert all(195 <= c <= 205 for c in _cpu_pct(tuning))  # two ranks, each spinning in synchronize


def _without_gpu_telemetry(obs):
    return [{k: v for k, v in o.items() if k not in ("gpus", "gpu_procs")} for o in obs]


@pytest.mark.parametrize("path", [p for p in TRACES if "hang" in os.path.basename(p) or "hung" in os.path.basename(p)],
                         ids=os.path.basename)
def test_a_real_hang_is_decided_without_gpu_telemetry_and_names_its_rule(path, tmp_path):
    header, obs = load(path)
    blind = tmp_path / os.path.basename(path)
    blind.write_text("\n".join(json.dumps(o) for o in [header] + _without_gpu_telemetry(obs)) + "\n")
    res = replay(str(blind))
    assert res["verdict"] in ("stalled", "failed"), res
    assert res["t"] >= header["expect"]["onset_t"], res
    assert res["evidence"]["rule"].startswith(("rule 1", "rule 3", "rule 5", "dead process")), res
