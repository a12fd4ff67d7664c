"""Healthy starts that look alarming from outside (faults autotune, tuning_loop,
benign_line): what the stand-in prints and does, and that each start still ends ready."""
import json
import os
import re
import subprocess
import sys
import time

import pytest

from .conftest import cmdline, comm, proc_stat, query_gpus, wait_until

RECORD = re.compile(
    r"^E\d{4} \d\d:\d\d:\d\d\.\d{6} (?P<pid>\d+) torch/_inductor/select_algorithm\.py:\d+\] "
    r"Runtime error during autotuning: \nTraceback \(most recent call last\):\n(?:  .*\n)+"
    r"RuntimeError: No valid triton configs\. OutOfMemoryError: out of resource: triton_mm "
    r"Required: \d+ Hardware limit:232448 .*\nIgnoring this choice\.$", re.M)
PY_SPY = os.path.join(os.path.dirname(sys.executable), "py-spy")


def compile_workers(server):
    found = {}
    for pid in server.children():
        try:
            if b"torch/_inductor/compile_worker/__main__.py" in cmdline(pid):
                found[pid] = proc_stat(pid)["cpu_ticks"]
        except (OSError, TypeError):
            continue
    return found


def test_autotune_prints_inductor_records_runs_workers_that_come_and_go_then_is_ready(launch):
    s = launch(fault={"kind": "autotune", "seconds": 3.0, "configs": 3, "workers": 2})
    s.wait_log(r"TP0\] Capture target decode CUDA graph begin")
    time.sleep(0.1)
    workers, util_gpu0 = {}, []
    while len(RECORD.findall(s.output())) < 3:
        for pid, ticks in compile_workers(s).items():
            workers[pid] = max(ticks, workers.get(pid, 0))
        util = query_gpus(s.env)[0]["util_pct"]
        if len(RECORD.findall(s.output())) < 3:
            util_gpu0.append(util)
        assert s.proc.poll() is None
    s.wait_ready(timeout=40)
    records = list(RECORD.finditer(s.output()))
    assert len(records) == 3
    assert {int(m.group("pid")) for m in records} == {s.ranks()[0]}
    assert all(not m.group(0).startswith("[") for m in records)   # torch's own logger, no SGLang prefix
    assert len(workers) >= 4                       # 2 at a time, new ones for each config
    assert sum(workers.values()) >= 5              # they burned CPU
    assert compile_workers(s) == {}
    assert max(util_gpu0) >= 2 and max(util_gpu0) <= 27


def test_autotune_workers_look_like_inductor_compile_workers(launch):
    s = launch(fault={"kind": "autotune", "seconds": 2.0, "configs": 2, "workers": 1})
    found = wait_until(lambda: compile_workers(s), timeout=20, what="a compile worker")
    pid = next(iter(found))
    wait_until(lambda: comm(pid) == "python3", timeout=5, what="the worker's comm")   # set as it starts
    assert b"--kind=fork" in cmdline(pid) and ("--parent=%d" % s.ranks()[0]).encode() in cmdline(pid)
    s.wait_ready(timeout=40)


def test_tuning_loop_bursts_the_gpu_while_every_stack_waits_in_synchronize(launch):
    s = launch(fault={"kind": "tuning_loop", "seconds": 4.0, "period_s": [0.8, 1.2], "burst_s": 0.5},
               env={"SGLANG_STANDIN_CUDA_GRAPH_BATCHES": "2"})
    s.wait_log(r"TP1\] Capture target decode CUDA graph begin")
    time.sleep(0.2)
    log0 = s.output()
    utils = []
    end = time.monotonic() + 2.5
    while time.monotonic() < end:
        utils.append(query_gpus(s.env)[0]["util_pct"])
    assert s.output() == log0                      # no line while it tunes
    assert max(utils) <= 27 and max(utils) >= 2    # bursts ...
    assert utils.count(0) > len(utils) / 2         # ... between idle samples
    if os.access(PY_SPY, os.X_OK):
        stacks = []
        for _ in range(2):
            r = subprocess.run([PY_SPY, "dump", "--pid", str(s.ranks()[0])], capture_output=True, text=True,
                               timeout=20)
            if r.returncode != 0:
                pytest.skip("py-spy cannot attach here: " + r.stderr.strip()[-200:])
            stacks.append([ln.strip() for ln in r.stdout.splitlines() if ln.strip().startswith(("synchronize",
                                                                                                  "tuning_loop"))])
            time.sleep(0.3)
        assert stacks[0] and stacks[0] == stacks[1]
        assert stacks[0][0].startswith("synchronize (sglang/standin/inductor.py:")
    s.wait_ready(timeout=40)


def test_benign_line_is_printed_on_every_start_and_the_start_goes_on(launch, base_env):
    fault = {"kind": "benign_line", "phase": "kv_cache"}
    for _ in range(2):
        s = launch(env={"SGLANG_STANDIN_FAULT": json.dumps(fault)})
        s.wait_ready(timeout=40)
        records = RECORD.findall(s.output())
        assert len(records) == 1
        s.kill()


def test_benign_line_takes_a_preset_or_text_on_the_listed_ranks(launch):
    s = launch(fault={"kind": "benign_line", "phase": "weight_load", "at": 1, "ranks": [1],
                      "line": ["watchdog", "NCCL WARN something looked wrong"]})
    s.wait_ready(timeout=40)
    out = s.output()
    assert re.search(r"TP1\] Scheduler watchdog timeout", out)
    assert re.search(r"TP1\] NCCL WARN something looked wrong", out)
    assert not re.search(r"TP0\] NCCL WARN", out)


@pytest.mark.parametrize("fault, words", [
    ({"kind": "autotune", "phase": "warmup"}, "phase must be one of"),
    ({"kind": "tuning_loop", "period_s": [5, 1]}, "period_s must be"),
    ({"kind": "benign_line", "mode": "spin"}, "unknown keys"),
])
def test_bad_benign_behaviour_is_refused_before_starting(launch, fault, words):
    s = launch(fault=fault)
    assert s.proc.wait(timeout=20) == 2
    assert words in s.output()


def test_from_start_acts_only_from_that_start_on(launch, base_env):
    with open(base_env["SGLANG_STANDIN_FAULTS_FILE"], "w") as f:
        json.dump([{"kind": "exit", "phase": "weight_load", "code": 3, "times": 1},
                   {"kind": "benign_line", "phase": "kv_cache", "from_start": 2}], f)
    first = launch()
    assert first.proc.wait(timeout=30) == 3
    assert not RECORD.search(first.output())
    second = launch()
    second.wait_ready(timeout=40)
    assert len(RECORD.findall(second.output())) == 1
