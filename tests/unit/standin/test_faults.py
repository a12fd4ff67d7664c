"""Every injected fault of the SGLang stand-in, checked from outside: log, processes,
nvidia-smi answers and HTTP."""
import json
import os
import re
import signal
import socket
import time

from .conftest import alive, cmdline, comm, proc_stat, query_apps, query_gpus, read_bytes, wait_until


def cpu_ticks(pids):
    total = 0
    for p in pids:
        st = proc_stat(p)
        if st:
            total += st["cpu_ticks"]
    return total


def quiet_window(s, seconds=1.0):
    """Sample everything a watcher reads, twice, `seconds` apart."""
    def sample():
        pids = s.group_pids()
        return {"log": s.output(), "cpu": cpu_ticks(pids), "read": sum(read_bytes(p) for p in pids),
                "gpus": query_gpus(s.env)}
    a = sample()
    time.sleep(seconds)
    return a, sample()


def test_idle_stall_in_weight_load_stops_everything(launch):
    s = launch(fault={"kind": "stall", "phase": "weight_load", "mode": "idle", "at": 2})
    s.wait_log(r"\| 2/4 \[")
    time.sleep(0.3)
    a, b = quiet_window(s)
    assert a["log"] == b["log"]
    assert "Load weight end" not in b["log"]
    assert b["cpu"] - a["cpu"] <= 3          # clock ticks: nothing runs
    assert b["read"] == a["read"]
    assert [g["mem_used_mib"] for g in a["gpus"]] == [g["mem_used_mib"] for g in b["gpus"]]
    assert all(g["util_pct"] <= 1 for g in b["gpus"])
    assert 4 < b["gpus"][0]["mem_used_mib"] < 0.7 * b["gpus"][0]["mem_total_mib"]
    assert s.http("/health")[0] is None
    assert s.proc.poll() is None


def test_spin_stall_in_distributed_init_burns_cpu_and_shows_full_gpu_util(launch):
    s = launch(fault={"kind": "stall", "phase": "distributed_init", "mode": "spin"})
    s.wait_log(r"TP1\] Init parallel begin")
    time.sleep(0.3)
    a, b = quiet_window(s)
    assert "Init parallel ends" not in b["log"] and a["log"] == b["log"]
    assert b["cpu"] - a["cpu"] >= 10          # two ranks busy-looping at 30 % duty
    assert [g["util_pct"] >= 97 for g in b["gpus"]] == [True, True, False, False]
    assert [g["mem_used_mib"] for g in a["gpus"]] == [g["mem_used_mib"] for g in b["gpus"]]
    assert b["gpus"][0]["mem_used_mib"] < 1024
    assert s.http("/health")[0] is None


def test_stall_after_the_bar_leaves_the_finished_bar_then_silence(launch):
    s = launch(fault={"kind": "stall", "phase": "post_load"}, env={"SGLANG_STANDIN_LOG_FAMILY": "0.5.16"})
    s.wait_log(r"\rLoading safetensors checkpoint shards: 100% Completed \| 4/4 [^\n]*\n")
    time.sleep(0.3)
    a, b = quiet_window(s, 0.8)
    assert a["log"] == b["log"] and "Load weight end" not in b["log"]
    assert b["gpus"][0]["mem_used_mib"] > 0.7 * b["gpus"][0]["mem_total_mib"]


def test_fatal_packing_line_on_some_ranks_then_hang(launch):
    s = launch(tp=3, fault={"kind": "fatal", "phase": "post_load", "line": "packing", "ranks": [1, 2]})
    s.wait_log(r"TP2\] Unexpected error during packing")
    s.wait_log(r"TP1\] Unexpected error during packing")
    time.sleep(0.5)
    out = s.output()
    assert "TP0] Unexpected error during packing" not in out
    assert "Load weight end" not in out
    assert s.proc.poll() is None and len(s.ranks()) == 3
    assert all(alive(p) for p in s.ranks().values())


def test_fatal_oom_then_exit_releases_everything(launch):
    s = launch(fault={"kind": "fatal", "phase": "cuda_graph", "at": 1, "line": "oom", "ranks": [1],
                      "then": "exit", "code": 1})
    assert s.proc.wait(timeout=30) == 1
    out = s.output()
    assert re.search(r"TP1\] Scheduler hit an exception: Traceback", out)
    assert "torch.OutOfMemoryError: CUDA out of memory." in out
    assert "TP1] Capture cuda graph failed" in out
    assert "Uvicorn running" not in out
    wait_until(lambda: not s.group_pids(), timeout=10, what="process group gone")
    assert query_apps(s.env) == []
    assert all(g["mem_used_mib"] < 10 for g in query_gpus(s.env))


def test_fatal_custom_text_and_unbalanced_preset(launch):
    s = launch(fault=[{"kind": "fatal", "phase": "kv_cache", "line": ["unbalanced", "my own words"]}])
    s.wait_log(r"my own words")
    out = s.output()
    assert re.search(r"TP0\] Scheduler hit an exception", out)
    assert "The memory capacity is unbalanced. Some GPUs may be occupied by other processes." in out
    assert "KV Cache is allocated" not in out
    assert s.proc.poll() is None


def test_exit_zero_in_a_phase_is_a_clean_looking_death(launch):
    s = launch(fault={"kind": "exit", "phase": "kv_cache", "code": 0})
    assert s.proc.wait(timeout=30) == 0
    assert "KV Cache is allocated" not in s.output()
    wait_until(lambda: not s.group_pids(), timeout=10, what="process group gone")
    assert query_apps(s.env) == []


def test_exit_during_warmup_after_http_came_up(launch):
    s = launch(fault={"kind": "exit", "phase": "warmup", "code": 3, "line": "warmup"})
    assert s.proc.wait(timeout=30) == 3
    out = s.output()
    assert out.index("Uvicorn running") < out.index("Initialization failed. warmup error:")
    assert "ready to roll" not in out


def _assert_bind_failure(s):
    assert s.proc.wait(timeout=30) == 1
    out = s.output()
    err = re.search(r"\] ERROR:    \[Errno 98\] error while attempting to bind on address "
                    rf"\('127\.0\.0\.1', {s.port}\): address already in use", out)
    assert err
    # the whole load happened first
    assert out.index("max_total_num_tokens=") < err.start()
    assert out.index("Started server process") < err.start()
    assert "Uvicorn running" not in out
    wait_until(lambda: not s.group_pids(), timeout=10, what="process group gone")


def test_port_already_in_use_fails_after_the_whole_load(launch):
    from .conftest import free_port
    port = free_port()
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", port))
        holder.listen()
        s = launch(port=port)
        _assert_bind_failure(s)


def test_port_in_use_fault_fails_the_same_way(launch):
    s = launch(fault={"kind": "port_in_use"})
    _assert_bind_failure(s)


def test_slow_disk_reads_slowly_but_never_stops(launch, model_dir):
    s = launch(fault={"kind": "slow_disk", "read_mib_s": 1.0})
    s.wait_log(r"Multi-thread loading shards:   0%")
    ranks = list(s.ranks().values())
    samples = []
    for _ in range(3):
        time.sleep(0.8)
        samples.append(sum(read_bytes(p) for p in ranks))
    assert "Load weight end" not in s.output()
    assert 0 < samples[0] < samples[1] < samples[2] < 4 * 1024 * 1024


def test_long_silent_jit_runs_compiler_children_writing_the_cache(launch, tmp_path):
    s = launch(fault={"kind": "long_jit", "seconds": 2.5, "compilers": 3})
    s.wait_log(r"TP0\] Entering DeepGEMM JIT Pre-Compile session\. It may take a long time")
    cache = tmp_path / "dg-cache"

    def compilers():
        return [p for p in s.children() if comm(p) in ("nvcc", "cc1plus", "ptxas")]

    found = wait_until(lambda: len(compilers()) == 3 and compilers(), timeout=10, what="compilers")
    assert sorted(comm(p) for p in found) == ["cc1plus", "nvcc", "ptxas"]
    assert {cmdline(p).split(b"\0")[0] for p in found} == {b"nvcc", b"cc1plus", b"ptxas"}
    log0 = s.output()
    gpus0 = query_gpus(s.env)
    c0 = cpu_ticks(found)
    time.sleep(0.8)
    assert cpu_ticks(found) - c0 >= 5
    assert s.output() == log0                            # silent
    gpus1 = query_gpus(s.env)
    assert [g["mem_used_mib"] for g in gpus0] == [g["mem_used_mib"] for g in gpus1]
    assert all(g["util_pct"] == 0 for g in gpus1)
    wait_until(lambda: len(list(cache.glob("*.cubin"))) >= 3, timeout=10, what="kernel files")
    s.wait_ready(timeout=40)
    assert compilers() == []


def test_leftover_rank_keeps_gpu_memory_and_blocks_the_next_start(launch):
    s = launch(fault={"kind": "leftover", "escape_cgroup": False})
    s.wait_ready()
    assert sorted(s.ranks()) == [0]          # TP1 left the process group
    gpu1 = query_gpus(s.env)[1]["uuid"]
    held = [a["pid"] for a in query_apps(s.env) if a["gpu_uuid"] == gpu1]
    assert len(held) == 1, held
    left = held[0]
    s.extra_pids.add(left)
    assert proc_stat(left)["ppid"] == s.pid
    assert proc_stat(left)["pgid"] != s.pid
    os.killpg(s.pid, signal.SIGKILL)
    s.proc.wait(timeout=10)
    wait_until(lambda: not s.group_pids(), timeout=10, what="unit processes gone")
    time.sleep(0.3)
    assert alive(left) and cmdline(left) == b"sglang::scheduler_TP1\0"
    apps = query_apps(s.env)
    assert [a["pid"] for a in apps] == [left], apps
    gpus = query_gpus(s.env)
    assert gpus[1]["mem_used_mib"] > 0.5 * gpus[1]["mem_total_mib"] and gpus[0]["mem_used_mib"] < 10
    # The next start finds GPU memory held by a foreign process, as real SGLang does.
    nxt = launch()
    assert nxt.proc.wait(timeout=30) == 1, nxt.output()[-3000:]
    assert "The memory capacity is unbalanced. Some GPUs may be occupied by other processes." in nxt.output()
    os.kill(left, signal.SIGKILL)
    wait_until(lambda: not alive(left), timeout=5, what="leftover gone")
    assert query_apps(s.env) == []
    assert query_gpus(s.env)[1]["mem_used_mib"] < 10


def test_hang_after_ready_blocks_generation_past_client_timeouts(launch):
    s = launch(fault={"kind": "hang_after_ready", "after_s": 0.2, "mode": "spin"})
    s.wait_ready()
    time.sleep(0.5)
    assert s.http("/health_generate", timeout=1.0)[0] == "timeout"
    assert s.http("/v1/completions", "POST", {"prompt": "hi", "max_tokens": 1}, timeout=1.0)[0] == "timeout"
    assert s.http("/health", timeout=5.0)[0] == 503     # after SGLANG_HEALTH_CHECK_TIMEOUT (2 s here)
    assert s.http("/v1/models")[0] == 200
    assert all(g["util_pct"] >= 97 for g in query_gpus(s.env)[:2])
    assert s.proc.poll() is None


def test_times_one_fails_only_the_first_start(launch, base_env):
    with open(base_env["SGLANG_STANDIN_FAULTS_FILE"], "w") as f:
        json.dump({"faults": [{"kind": "exit", "phase": "weight_load", "code": 3, "times": 1}]}, f)
    first = launch()
    assert first.proc.wait(timeout=30) == 3
    second = launch()
    second.wait_ready()
    second.kill()
    # Deleting the counter resets it: the fault fires again.
    os.unlink(os.path.join(base_env["SGLANG_STANDIN_STATE_DIR"], "starts.json"))
    third = launch()
    assert third.proc.wait(timeout=30) == 3


def test_bad_fault_json_is_refused_before_starting(launch):
    s = launch(fault={"kind": "meteor_strike"})
    assert s.proc.wait(timeout=20) == 2
    assert "kind must be one of" in s.output()


def _metric(body, name, **labels):
    """The sum of a metric's samples in a /metrics body whose labels include `labels`."""
    total = 0.0
    for line in body.decode().splitlines():
        m = re.match(r"(\S+?)\{(.*)\} (\S+)$", line)
        if m and m.group(1) == name and all(f'{k}="{v}"' in m.group(2) for k, v in labels.items()):
            total += float(m.group(3))
    return total


def test_prefill_saturation_keeps_completions_waiting_while_the_prefill_counters_rise(launch):
    s = launch("--enable-metrics", fault={"kind": "prefill_saturation", "after_s": 0.2, "seconds": 4,
                                          "running": 8, "queued": 40, "prompt_tokens": 2000, "prompt_tokens_s": 10000})
    s.wait_ready()
    time.sleep(0.6)
    assert s.http("/v1/completions", "POST", {"prompt": "hi", "max_tokens": 1}, timeout=1.0)[0] == "timeout"
    first = s.http("/metrics")[1]
    time.sleep(1.0)
    second = s.http("/metrics")[1]
    # the scheduler's backlog, the completion above queued on top of it
    assert _metric(second, "sglang:num_running_reqs") == 8 and _metric(second, "sglang:num_queue_reqs") == 41
    # prompts finish prefilled (2000 tokens each at 10000/s), nothing is generated
    assert _metric(second, "sglang:prompt_tokens_total") - _metric(first, "sglang:prompt_tokens_total") >= 6000
    assert _metric(second, "sglang:num_requests_total") > _metric(first, "sglang:num_requests_total")
    assert (_metric(second, "sglang:realtime_tokens_total", mode="prefill_compute")
            - _metric(first, "sglang:realtime_tokens_total", mode="prefill_compute")) >= 8000
    assert _metric(second, "sglang:generation_tokens_total") == _metric(first, "sglang:generation_tokens_total")
    assert all(g["util_pct"] >= 45 for g in query_gpus(s.env)[:2])
    # once it ends, the queued completion is answered and new ones are answered at once
    wait_until(lambda: _metric(s.http("/metrics")[1], "sglang:num_queue_reqs") == 0, timeout=10)
    status, body = s.http("/v1/completions", "POST", {"prompt": "hi", "max_tokens": 1}, timeout=2.0)
    assert status == 200 and json.loads(body)["choices"]
    # the answered request leaves the running count just after its answer is written
    wait_until(lambda: _metric(s.http("/metrics")[1], "sglang:num_running_reqs") == 0, timeout=5, what="no running request")
    after = s.http("/metrics")[1]
    assert _metric(after, "sglang:prompt_tokens_total") >= _metric(second, "sglang:prompt_tokens_total")
    assert s.proc.poll() is None
