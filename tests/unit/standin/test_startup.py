"""A healthy start of the SGLang stand-in, as a watcher sees it from outside."""
import json
import os
import re
import signal
import threading
import time

from .conftest import (alive, cmdline, comm, query_apps, query_gpus, read_bytes, wait_until)

TS = r"\[\d{4}-\d\d-\d\d \d\d:\d\d:\d\d"


def _index(lines, pattern, start=0):
    rx = re.compile(pattern)
    for i in range(start, len(lines)):
        if rx.search(lines[i]):
            return i
    raise AssertionError(f"no line matches {pattern!r} after line {start}")


def test_0523_family_prints_the_phases_in_order(launch):
    s = launch()
    s.wait_ready()
    lines = s.lines()
    order = [TS + r"\] server_args=\{", TS + r" TP0\] Init parallel begin\.", r"sglang is using nccl==",
             TS + r" TP0\] Init parallel ends\. elapsed=", TS + r" TP0\] Load weight begin\. avail mem=",
             r"\rMulti-thread loading shards: 100% Completed \| 4/4 \[",
             TS + r" TP0\] Load weight end\. elapsed=[\d.]+ s, type=DeepseekV3ForCausalLM, quant=",
             TS + r" TP0\] KV Cache is allocated\. #tokens: \d+, KV size: [\d.]+ GB, dtype: ",
             TS + r" TP0\] Capture target decode CUDA graph begin\.",
             r"Capturing batches \(bs=\d+ avail_mem=[\d.]+ GB\)",
             TS + r" TP0\] Capture target decode CUDA graph end\. bs=\[",
             TS + r" TP0\] max_total_num_tokens=\d+, .*available_gpu_mem=",
             TS + r"\] INFO:     Started server process \[\d+\]",
             TS + r"\] INFO:     Application startup complete\.",
             TS + rf"\] INFO:     Uvicorn running on http://127\.0\.0\.1:{s.port}",
             r'"GET /model_info HTTP/1\.1" 200 OK', r'"POST /generate HTTP/1\.1" 200 OK',
             TS + r"\] The server is fired up and ready to roll!"]
    at = 0
    for pattern in order:
        at = _index(lines, pattern, at)
    assert any(re.search(TS + r" TP1\] Load weight end\.", line) for line in lines)


def test_0516_family_prints_the_incident_strings(launch):
    s = launch(env={"SGLANG_STANDIN_LOG_FAMILY": "0.5.16"})
    s.wait_ready()
    out = s.output()
    for pattern in [r"server_args=ServerArgs\(model_path=", r"TP0\] Init torch distributed begin\.",
                    r"TP1\] Init torch distributed ends\. mem usage=[\d.]+ GB",
                    r"\rLoading safetensors checkpoint shards: 100% Completed \| 4/4 ",
                    r"TP0\] Load weight end\. type=DeepseekV3ForCausalLM, dtype=torch\.bfloat16, avail mem=",
                    r"TP0\] Capture cuda graph begin\. This can take up to several minutes\.",
                    r"TP0\] Capture cuda graph end\. Time elapsed: [\d.]+ s\.",
                    r'"GET /get_model_info HTTP/1\.1" 200 OK', "The server is fired up and ready to roll!"]:
        assert re.search(pattern, out), pattern
    assert "Init parallel begin" not in out and "Multi-thread loading" not in out


def test_shard_bar_is_written_as_tqdm_frames_on_stderr(launch):
    s = launch()
    s.wait_ready()
    out = s.output()
    frames = re.findall(r"\r(Multi-thread loading shards:[^\r\n\[]*\[[^\]]*\])", out)
    counts = [int(re.search(r"\| (\d+)/4 \[", f).group(1)) for f in frames]
    assert counts == [0, 1, 2, 3, 4]
    # no newline inside the bar; one newline when it closes (journald sees one record)
    assert re.search(r"\rMulti-thread loading shards: 100% Completed \| 4/4 \[[^\]]*\] *\n", out)
    assert not re.search(r"\n *Multi-thread loading shards", out)
    assert re.match(r"Multi-thread loading shards:  25% Completed \| 1/4 \[\d\d:\d\d<\d\d:\d\d, +[\d.]+(it/s|s/it)\]",
                    frames[1])


def test_only_rank_zero_draws_the_shard_bar(launch):
    s = launch(tp=3)
    s.wait_ready()
    assert s.output().count("\rMulti-thread loading shards:   0% Completed") == 1


def test_ranks_and_detokenizer_carry_sglang_process_titles(launch):
    s = launch(tp=3)
    s.wait_ready()
    ranks = s.ranks()
    assert sorted(ranks) == [0, 1, 2]
    for n, pid in ranks.items():
        assert cmdline(pid) == f"sglang::scheduler_TP{n}\0".encode()
        assert comm(pid) == "sglang::schedul"
    titles = [cmdline(p).split(b"\0")[0] for p in s.children()]
    assert titles.count(b"sglang::detokenizer") == 1
    assert len(s.children()) == 4


def test_ranks_die_when_the_main_process_dies(launch):
    s = launch()
    s.wait_ready()
    kids = s.children()
    assert kids
    os.kill(s.pid, signal.SIGKILL)
    wait_until(lambda: not any(alive(p) for p in kids), timeout=10, what="children gone")
    assert query_apps(s.env) == []


def test_sigterm_stops_the_whole_tree_and_releases_gpu_memory(launch):
    s = launch()
    s.wait_ready()
    kids = s.children()
    s.proc.send_signal(signal.SIGTERM)
    assert s.proc.wait(timeout=10) == -signal.SIGTERM
    wait_until(lambda: not any(alive(p) for p in kids), timeout=10, what="children gone")
    assert all(g["mem_used_mib"] < 10 for g in query_gpus(s.env))


def test_weight_loading_reads_the_shards_from_storage(launch, model_dir):
    s = launch()
    s.wait_ready()
    total = sum(os.path.getsize(os.path.join(model_dir, n)) for n in os.listdir(model_dir)
                if n.endswith(".safetensors"))
    got = sum(read_bytes(p) for p in s.ranks().values())
    assert got >= total * 0.9


def test_gpu_state_follows_the_phases(launch):
    """Memory rises in steps while loading (util low), jumps for the KV cache, is flat when ready."""
    s = launch(env={"SGLANG_STANDIN_TIME_SCALE": "0.12"})
    seen = []
    while not re.search("ready to roll", s.output()):
        health = s.http("/health")[0]
        gpus = query_gpus(s.env)
        out = s.output()   # read last: the phase is at least as far as the samples above
        phase = ("ready" if "ready to roll" in out else "http" if "Started server process" in out
                 else "graph" if "CUDA graph begin" in out else "kv" if "KV Cache is allocated" in out
                 else "post" if "Load weight end" in out else "load" if "Load weight begin" in out
                 else "init")
        seen.append((phase, gpus[0]["mem_used_mib"], gpus[0]["util_pct"], health))
        assert s.proc.poll() is None
        time.sleep(0.05)
    loading = [m for p, m, u, h in seen if p == "load"]
    assert len(set(loading)) >= 3, seen
    assert loading == sorted(loading)
    assert all(u <= 3 for p, m, u, h in seen if p in ("init", "load"))
    assert all(h is None for p, m, u, h in seen if p in ("init", "load", "post", "kv", "graph"))
    ready = [g["mem_used_mib"] for g in query_gpus(s.env)]
    assert ready[0] > max(loading) and ready[1] == ready[0]
    assert ready[2] < 10 and ready[3] < 10   # GPUs the server does not use stay idle
    time.sleep(1.1)
    assert [g["mem_used_mib"] for g in query_gpus(s.env)] == ready
    apps = query_apps(s.env)
    assert sorted(a["pid"] for a in apps) == sorted(s.ranks().values())
    by_uuid = {g["uuid"]: g for g in query_gpus(s.env)}
    assert all(by_uuid[a["gpu_uuid"]]["mem_used_mib"] >= a["mem_mib"] for a in apps)


def test_http_answers_per_phase(launch):
    s = launch(fault={"kind": "stall", "phase": "warmup"})
    s.wait_log(r"Uvicorn running on")
    for path in ("/health", "/health_generate", "/ready"):
        assert s.http(path)[0] == 503
    for path in ("/model_info", "/get_model_info", "/server_info", "/v1/models"):
        assert s.http(path)[0] == 200, path


def test_ready_server_answers_health_info_and_completions(launch):
    s = launch("--served-model-name", "kimi-k2", "--enable-metrics")
    s.wait_ready()
    for path in ("/health", "/health_generate", "/ready"):
        assert s.http(path)[0] == 200
    status, body = s.http("/server_info")
    info = json.loads(body)
    assert status == 200 and info["version"] == "0.5.23" and info["tp_size"] == 2
    assert {"load_weight", "kv_cache_allocation", "cuda_graph"} <= set(info["startup_time"])
    models = json.loads(s.http("/v1/models")[1])
    assert models["data"][0]["id"] == "kimi-k2"
    req = {"model": "kimi-k2", "prompt": "The capital of France is", "max_tokens": 6, "temperature": 0}
    status, body = s.http("/v1/completions", "POST", req)
    first = json.loads(body)
    assert status == 200 and first["object"] == "text_completion"
    assert set(first) >= {"id", "object", "created", "model", "choices", "usage"}
    choice = first["choices"][0]
    assert choice["index"] == 0 and choice["finish_reason"] == "length" and "logprobs" in choice
    assert len(choice["text"].split()) == 6 and first["usage"]["completion_tokens"] == 6
    again = json.loads(s.http("/v1/completions", "POST", req)[1])
    other = json.loads(s.http("/v1/completions", "POST", dict(req, prompt="Something else"))[1])
    assert again["choices"][0]["text"] == choice["text"]
    assert other["choices"][0]["text"] != choice["text"]
    gen = json.loads(s.http("/generate", "POST", {"text": "hi", "sampling_params": {"max_new_tokens": 3}})[1])
    assert len(gen["text"].split()) == 3
    metrics = s.http("/metrics")[1].decode()
    assert re.search(r'^sglang:num_requests_total\{model_name="kimi-k2"\} [1-9]', metrics, re.M)
    assert 'sglang:startup_time_seconds{phase="load_weight"' in metrics


def test_metrics_are_not_served_without_enable_metrics(launch):
    s = launch()
    s.wait_ready()
    assert s.http("/metrics")[0] == 404


def test_api_key_is_enforced_except_on_health_ready_and_metrics(launch):
    s = launch("--api-key", "sekret", "--enable-metrics", "--speculative-algorithm", "EAGLE")
    s.wait_ready()
    out = s.output()
    assert "TP0] Capture target verify CUDA graph begin" in out and "TP0] Capture draft decode CUDA graph end" in out
    req = {"prompt": "hello", "max_tokens": 2}
    assert s.http("/v1/completions", "POST", req)[0] == 401
    assert s.http("/v1/completions", "POST", req, key="wrong")[0] == 401
    assert s.http("/v1/completions", "POST", req, key="sekret")[0] == 200
    for path in ("/v1/models", "/model_info", "/server_info"):
        assert s.http(path)[0] == 401, path
        assert s.http(path, key="sekret")[0] == 200, path
    for path in ("/health", "/health_generate", "/ready", "/metrics"):
        assert s.http(path)[0] == 200, path
    assert "sekret" not in s.http("/server_info", key="sekret")[1].decode()


def test_sigstopped_server_is_a_true_hang(launch):
    s = launch()
    s.wait_ready()
    pids = s.group_pids()
    before = query_gpus(s.env)
    for p in pids:
        os.kill(p, signal.SIGSTOP)
    wait_until(lambda: all(open(f"/proc/{p}/stat").read().split(") ")[1][0] == "T" for p in pids),
               timeout=5, what="state T")
    cpu = {p: open(f"/proc/{p}/stat").read().split(") ")[1].split()[11:13] for p in pids}
    assert s.http("/health", timeout=1.5)[0] == "timeout"
    assert s.http("/v1/completions", "POST", {"prompt": "x"}, timeout=1.5)[0] == "timeout"
    after = query_gpus(s.env)
    assert [g["mem_used_mib"] for g in after] == [g["mem_used_mib"] for g in before]
    assert all(g["util_pct"] == 0 for g in after)
    assert sorted(a["pid"] for a in query_apps(s.env)) == sorted(s.ranks().values())
    assert cpu == {p: open(f"/proc/{p}/stat").read().split(") ")[1].split()[11:13] for p in pids}


def _running_and_queued(metrics):
    values = {}
    for name in ("num_running_reqs", "num_queue_reqs"):
        m = re.search(rf'^sglang:{name}\{{[^}}]*\}} (\S+)$', metrics, re.M)
        values[name] = float(m.group(1))
    return values["num_running_reqs"], values["num_queue_reqs"]


def test_metrics_count_the_completions_in_flight_while_they_decode(launch):
    s = launch("--enable-metrics", env={"SGLANG_STANDIN_DECODE_S_PER_TOKEN": "0.2"})
    s.wait_ready()
    assert _running_and_queued(s.http("/metrics")[1].decode()) == (0.0, 0.0)
    answers = []
    req = {"model": "default", "prompt": "slow", "max_tokens": 10}   # 2 s each
    threads = [threading.Thread(target=lambda: answers.append(s.http("/v1/completions", "POST", req, timeout=10)))
               for _ in range(3)]
    started = time.monotonic()
    for t in threads:
        t.start()
    wait_until(lambda: _running_and_queued(s.http("/metrics")[1].decode())[0] == 3.0, timeout=1.5,
               what="3 completions in flight")
    for t in threads:
        t.join()
    assert time.monotonic() - started >= 2.0
    assert [status for status, _ in answers] == [200, 200, 200]
    assert _running_and_queued(s.http("/metrics")[1].decode()) == (0.0, 0.0)
