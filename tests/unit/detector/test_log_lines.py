import pytest

from ansible_collections.sglang_ops.serving.plugins.module_utils import log_lines


@pytest.mark.parametrize("msg, phase", [
    ("server_args=ServerArgs(model_path='/m', tp_size=8)", "starting"),
    ("[2026-11-29 10:00:00 TP0] Init torch distributed begin.", "distributed_init"),
    ("[2026-11-29 10:00:00 TP0] Load weight begin. avail mem=94.52 GB", "weight_load"),
    ("[2026-11-29 10:00:00 TP0] Load weight end. type=X, dtype=torch.bfloat16, avail mem=1 GB, mem usage=74 GB.", "kv_cache"),
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
    ("[2026-11-29 10:00:00 TP0] Load weight end. elapsed=40.1 s, type=X, quant=y, avail mem=1 GB, mem usage=74 GB.", "kv_cache"),
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
    ("Scheduler watchdog timeout (self.watchdog_timeout=300, self.soft=False)", "fatal_watchdog"),
    ("[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE)", "fatal_nccl"),
    ("Scheduler hit an exception: Traceback (most recent call last):", "fatal_error"),
])
def test_fatal_lines_name_their_failure_class(msg, code):
    assert log_lines.classify(msg).fatal_code == code


def test_out_of_memory_outranks_the_capture_failure_it_causes():
    oom = log_lines.classify("torch.OutOfMemoryError: CUDA out of memory.").fatal_code
    cap = log_lines.classify("Capture cuda graph failed: CUDA out of memory.").fatal_code
    assert oom == cap == "fatal_oom"
    assert log_lines.fatal_priority("fatal_oom") < log_lines.fatal_priority("fatal_cuda_graph")


@pytest.mark.parametrize("msg", [
    "Load weight begin. avail mem=94.52 GB",
    "Traceback (most recent call last):",
    "KV Cache is allocated. #tokens: 412160, KV size: 9.42 GB",
])
def test_ordinary_lines_are_not_fatal(msg):
    assert log_lines.classify(msg).fatal_code is None


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
