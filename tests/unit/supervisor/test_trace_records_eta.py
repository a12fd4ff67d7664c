"""The supervisor's trace records what its ETA estimated from (header `load_conditions`:
page-cache residency, weight cache, restart kind, compile caches) and what it showed (each
line's `eta`), so `replay --eta` over a supervised start gives the estimate it gave."""
import json
import os
import shutil
import signal
import subprocess
import sys

from ansible_collections.sglang_ops.serving.plugins.module_utils.records.trace_format import read_trace

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
BIN = os.path.join(ROOT, "bin", "sglang-ops")
PYTHON = shutil.which("python3") or sys.executable
# The stand-in compiles DeepGEMM kernels when its cache is empty (a short JIT at the tests' time scale)
JIT = {"SGLANG_STANDIN_JIT_S": "5"}


def _start_to_ready(supervise):
    run = supervise(standin=JIT)
    run.wait_for(lambda: run.notify.values("READY"), what="READY=1")
    # the start record keeps the last estimate, its range fields with it
    assert set(run.record()["eta"]) >= {"remaining_s", "remaining_low_s", "remaining_high_s", "range_reason"}
    os.kill(run.proc.pid, signal.SIGTERM)
    assert run.wait(30) == 0
    run.notify.close()
    os.unlink(run.notify.path)      # the next start's systemd side binds the same path
    return os.path.join(run.current_dir(), "trace.jsonl"), run.starts


def test_two_supervised_starts_record_their_conditions_and_replay_gives_the_second_one_eta(supervise):
    first, dummy_starts = _start_to_ready(supervise)
    header, observations = read_trace(first)
    assert header["load_conditions"]["compile_caches"] == "cold"          # the first start compiles
    # the residency of the model, read once SGLang names it: in the header when it named it by the
    # first poll, else on the line where it was read
    recorded = [header["load_conditions"]] + [o["load_conditions"] for o in observations if "load_conditions" in o]
    assert recorded[-1]["model_bytes"] > 0 and recorded[-1]["resident_bytes"] is not None, recorded
    assert all("eta" in o for o in observations)
    second, starts = _start_to_ready(supervise)
    header, observations = read_trace(second)
    assert header["load_conditions"]["compile_caches"] == "warm"          # the kernels it left are kept
    assert any(o["eta"]["history_starts"] == 1 for o in observations)
    p = subprocess.run([PYTHON, BIN, "replay", second, "--eta", "--history", starts], capture_output=True,
                       text=True, cwd=ROOT, timeout=120)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.strip().splitlines()
    assert lines[0].startswith("load conditions (trace header): ") and "compile caches warm" in lines[0]
    assert lines[-2] == "ETA as the live start estimated it at %d of %d polls" % (
        len(observations), len(observations)), lines[-6:]
    assert json.loads(lines[-1])["verdict"] == "ready"
