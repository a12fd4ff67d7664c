import pytest

from ansible_collections.sglang_ops.serving.plugins.module_utils.domain import log_lines


@pytest.mark.parametrize("msg, phase", [
    ("server_args=ServerArgs(model_path='/m', tp_size=8)", "starting"),
    ("[2026-11-29 10:00:00 TP0] Init torch distributed begin.", "distributed_init"),
    ("[2026-11-29 10:00:00 TP0] Load weight begin. avail mem=94.52 GB", "weight_load"),
    ("[2026-11-29 10:00:00 TP0] Load weight end. type=X, dtype=torch.bfloat16, avail mem=1 GB, mem usage=74 GB.", "post_load"),
    ("[2026-11-29 10:00:00 TP0] Capture cuda graph begin. This can take up to several minutes. avail mem=9.91 GB", "cuda_graph"),
    ('INFO:     127.0.0.1:5 - "GET /get_model_info HTTP/1.1" 200 OK', "warmup"),
    ("The server is fired up and ready to roll!", "ready"),
])
def test_old_family_lines_mark_their_phase(msg, phase):
    assert log_lines.classify(msg).phase == phase


@pytest.mark.parametrize("msg, phase", [
    ("server_args={'model_path': '/m'}", "starting"),
    ("[2026-11-29 10:00:00 TP0] Init parallel begin.", "distributed_init"),
    ("[2026-11-29 10:00:00 TP0] sglang is using nccl==2.28.3", "distributed_init"),
    ("[2026-11-29 10:00:00 TP0] Multi-thread loading shards:  12% Completed | 8/64 [00:10<01:10]", "weight_load"),
    ("[2026-11-29 10:00:00 TP0] Load weight end. elapsed=40.1 s, type=X, quant=y, avail mem=1 GB, mem usage=74 GB.", "post_load"),
    ("[2026-11-29 10:00:00 TP0] Capture target decode CUDA graph begin. This can take up to several minutes.", "cuda_graph"),
    ("[2026-11-29 10:00:00 TP0] Entering DeepGEMM JIT Pre-Compile session. It may take a long time", "jit_compile"),
    ('INFO:     127.0.0.1:5 - "GET /model_info HTTP/1.1" 200 OK', "warmup"),
])
def test_new_family_lines_mark_their_phase(msg, phase):
    assert log_lines.classify(msg).phase == phase


def test_rank_prefix_with_milliseconds_and_dp_ep_parts_is_stripped():
    line = log_lines.classify("[2026-11-29 10:00:00.123 DP0 TP5 EP5] Load weight begin. avail mem=94.52 GB")
    assert line.rank == 5
    assert line.text.startswith("Load weight begin")


def test_main_process_lines_have_no_rank():
    assert log_lines.classify("INFO:     Started server process [1986]").rank is None


@pytest.mark.parametrize("msg, code", [
    ("[x TP3] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB.", "fatal_oom"),
    ("ERROR:    [Errno 98] error while attempting to bind on address ('127.0.0.1', 30001): address already in use", "fatal_port_in_use"),
    ("ValueError: The memory capacity is unbalanced. Some GPUs may be occupied by other processes.", "fatal_gpu_occupied"),
    ("safetensors_rust.SafetensorError: Error while deserializing header: MetadataIncompleteBuffer", "fatal_checkpoint"),
    ("Unexpected error during packing of layer model.layers.37.mlp.experts: RuntimeError: CUDA error", "fatal_packing"),
    ("Capture cuda graph failed: invalid argument", "fatal_cuda_graph"),
    ("Initialization failed. warmup error: Traceback", "fatal_warmup"),
    ("[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE)", "fatal_nccl"),
    ("Scheduler hit an exception: Traceback (most recent call last):", "fatal_error"),
])
def test_fatal_lines_name_their_failure_class(msg, code):
    line = log_lines.classify(msg)
    assert line.fatal_code == code and line.lethal


def test_out_of_memory_outranks_the_capture_failure_it_causes():
    oom = log_lines.classify("torch.OutOfMemoryError: CUDA out of memory.").fatal_code
    cap = log_lines.classify("Capture cuda graph failed: CUDA out of memory.").fatal_code
    assert oom == cap == "fatal_oom"
    assert log_lines.fatal_priority("fatal_oom") < log_lines.fatal_priority("fatal_cuda_graph")


@pytest.mark.parametrize("msg", [
    "Load weight begin. avail mem=94.52 GB",
    "KV Cache is allocated. #tokens: 412160, KV size: 9.42 GB",
    "[x TP0] ProcessGroupNCCL initialization options: size: 8, global rank: 0, TIMEOUT(ms): 600000",
    "Using default MoE kernel config. Performance might be sub-optimal! Config file not found at /x/E=384.json",
])
def test_ordinary_lines_are_not_fatal(msg):
    line = log_lines.classify(msg)
    assert line.fatal_code is None and not line.lethal and not line.chatter


@pytest.mark.parametrize("msg", [
    "[2026-11-29 10:00:00 TP2] Traceback (most recent call last):",
    "[2026-11-29 10:00:00 TP2] RuntimeError: shape mismatch in expert 17",
    "[rank3]: KeyError: 'model.layers.4.mlp.gate.weight'",
    "AssertionError",
    "[2026-11-29 10:00:00] ERROR model_runner.py:312: ValueError: unsupported quantization for expert weights",
    "Scheduler hit an exception: Traceback (most recent call last):",
])
def test_an_exception_of_no_known_class_is_lethal_as_fatal_error(msg):
    line = log_lines.classify(msg)
    assert (line.fatal_code, line.lethal) == ("fatal_error", True)


@pytest.mark.parametrize("msg", [
    "[x TP0] Scheduler watchdog timeout (self.watchdog_timeout=300, self.soft=True)",
    "[x TP0] Watchdog timeout (self.watchdog_timeout=300)",
    "[x TP0] DetokenizerManager watchdog timeout (self.watchdog_timeout=60, self.soft=True)",
])
def test_watchdog_lines_are_survivable_evidence_never_lethal(msg):
    line = log_lines.classify(msg)
    assert line.survivable in ("watchdog", "soft_watchdog") and not line.lethal and line.fatal_code == "fatal_watchdog"


def test_the_hard_watchdog_says_so_and_is_lethal():
    line = log_lines.classify("[x TP0] Scheduler watchdog timeout (self.watchdog_timeout=300, self.soft=False)")
    assert line.lethal and line.fatal_code == "fatal_watchdog" and line.survivable is None


@pytest.mark.parametrize("msg", [
    "[x TP0] WARNING: NCCL error on first attempt, retrying",
    "UserWarning: CUDA out of memory while tuning block size 256; skipping this config",
    "[W1130 10:00:00.000 ProcessGroupNCCL.cpp:1000] timeout while waiting, falling back to gloo",
    "Failed to import deep_gemm: ImportError: no module, falling back to triton kernels",
    "Port 30001 is in use (address already in use), trying another port",
    "[2026-11-29 10:00:00] WARNING server_args.py:2321: Overlap scheduler is disabled; error-prone spec v1 path",
])
def test_warnings_retries_and_fallbacks_are_survivable_however_they_are_worded(msg):
    line = log_lines.classify(msg)
    assert line.survivable == "warning" and not line.lethal


@pytest.mark.parametrize("msg", [
    '  File "/sgl/srt/model_executor/model_runner.py", line 300, in load_model',
    "    self.model = get_model(...)",
    "                 ^^^^^^^^^^^^^",
    "Received sigquit from a child process. It usually means the child failed.",
    "During handling of the above exception, another exception occurred:",
])
def test_traceback_bodies_and_the_launchers_reaction_are_failure_chatter(msg):
    assert log_lines.classify(msg).chatter


@pytest.mark.parametrize("code, phase", [
    ("fatal_port_in_use", "http_server"), ("fatal_packing", "post_load"), ("fatal_checkpoint", "weight_load"),
])
def test_fault_classes_that_prove_their_phase(code, phase):
    assert log_lines.CLASS_PHASES[code] == phase


def test_heartbeat_lines_are_heartbeats_and_never_fatal():
    hb = log_lines.classify("No available shared memory broadcast block found in 60 seconds. This typically happens when some processes are hanging.")
    assert hb.heartbeat and hb.fatal_code is None
    soft = log_lines.classify("Scheduler soft watchdog timeout: dumping stacks")
    assert soft.heartbeat and soft.fatal_code is None


def test_main_process_exit_line_gives_the_exit_status():
    line = log_lines.classify("sglang-k26-ddtree.service: Main process exited, code=exited, status=0/SUCCESS")
    assert line.exit_status == "0/SUCCESS"


def test_repeats_of_one_message_share_a_key_whatever_the_numbers():
    a = log_lines.classify("[x TP0] waited 60 s for peers")
    b = log_lines.classify("[x TP0] waited 120 s for peers")
    assert a.key == b.key
