"""The weight cache vocabulary: why a restart must be cold, the daemon's and the client's
lines (as SGLang 0.5.23 prints them, sglang/srt/weight_cache/), the ready file."""
import pytest

from ansible_collections.sglang_ops.serving.plugins.module_utils.domain import weight_cache as wc

# Lines as daemon.py / ipc_loader.py format them.
LOADING = "[WeightCacheDaemon gpu=3 tp_rank=3] Loading model from disk: /models/Kimi-K2.6"
LOADED = "[WeightCacheDaemon gpu=3 tp_rank=3] Model loaded from disk in 512.34s"
EXPORTED_RANK = "[WeightCacheDaemon gpu=3 tp_rank=3] Exported 1234 tensors as IPC handles."
EXPORTED = ("[WeightCacheDaemon gpu=3] Exported 1234 tensors (5 non-persistent buffers), transport=cuda_ipc, "
            "metadata size ~1.2 MB")
LISTENING = "[WeightCacheDaemon gpu=3] Listening on /run/sglang-k26-ddtree-weights/sglang_weight_cache_abc.sock"
ALL_READY = "All 8 weight cache daemons on node 0 are ready (pp_ranks=0..0, tp_ranks=0..7, dist_init_method=None)"
SIGNALLED = "[WeightCacheDaemon gpu=3] Received signal 15, shutting down"
SHUTDOWN = "[WeightCacheDaemon gpu=3] Shutdown complete"
ATTACHED = "[IpcModelLoader] Loaded model via IPC (mode=client), total=3.21s"
FALLBACK = "[IpcModelLoader] Weight cache not available or config mismatch, falling back to disk load"
DIED = ("[IpcModelLoader] Weight cache daemon (pid=4242) died while this engine holds its weights via CUDA IPC. "
        "The mapped weight pointers are now dangling; continuing would read freed GPU memory. Terminating this process.")


def test_a_healthy_daemon_and_a_clean_failure_allow_a_warm_restart():
    assert wc.cold_reason("stall_idle", True, False, False) is None
    assert wc.cold_reason(None, True, False, False) is None


def test_an_unhealthy_daemon_forces_a_cold_restart_whatever_else_is_known():
    assert wc.cold_reason("fatal_checkpoint", False, True, True) == "daemon_not_healthy"


@pytest.mark.parametrize("code", ["fatal_checkpoint", "fatal_nccl", "fatal_packing", "weight_cache_daemon_died"])
def test_a_class_that_implicates_the_weights_forces_a_cold_restart_and_is_named(code):
    assert wc.cold_reason(code, True, False, False) == "implicates_weights: %s" % code


def test_a_failed_warm_start_then_a_fallback_force_a_cold_restart_in_that_order():
    assert wc.cold_reason("stall_idle", True, True, True) == "warm_start_failed"
    assert wc.cold_reason("stall_idle", True, False, True) == "fallback_to_disk"


def test_an_unknown_failure_class_is_refused_loudly():
    with pytest.raises(KeyError, match="no_such_class"):
        wc.cold_reason("no_such_class", True, False, False)


def test_the_daemons_lines_are_read_with_their_numbers():
    assert wc.DAEMON_LOADING.search(LOADING).group("path") == "/models/Kimi-K2.6"
    assert wc.DAEMON_LOADED.search(LOADED).group("seconds") == "512.34"
    assert wc.DAEMON_EXPORTED.search(EXPORTED_RANK).group("tensors") == "1234"
    assert wc.DAEMON_EXPORTED.search(EXPORTED).group("gpu") == "3"
    assert wc.DAEMON_LISTENING.search(LISTENING).group("socket").endswith("_abc.sock")
    m = wc.DAEMONS_READY.search(ALL_READY)
    assert (m.group("count"), m.group("node")) == ("8", "0")
    assert wc.DAEMON_SHUTDOWN.search(SIGNALLED) and wc.DAEMON_SHUTDOWN.search(SHUTDOWN)
    assert not wc.DAEMON_SHUTDOWN.search(LISTENING)


def test_the_clients_lines_say_attached_fallen_back_or_daemon_dead():
    assert wc.attach_outcome(ATTACHED) == wc.RESTART_WARM
    assert wc.attach_outcome(FALLBACK) == wc.RESTART_COLD_FALLBACK
    assert wc.attach_outcome(LOADED) is None
    assert wc.CLIENT_DAEMON_DIED.search(DIED).group("pid") == "4242"


def test_the_ready_path_drops_nvidia_smis_gpu_prefix_like_torch():
    template = "/run/u-weights/sglang_weight_cache_{device_uuid}.ready"
    assert wc.ready_path(template, "GPU-1f2e") == "/run/u-weights/sglang_weight_cache_1f2e.ready"
    assert wc.ready_path(template, "1f2e") == "/run/u-weights/sglang_weight_cache_1f2e.ready"


def test_a_template_without_the_device_field_is_refused():
    with pytest.raises(ValueError, match="device_uuid"):
        wc.ready_path("/run/u-weights/ready", "GPU-1f2e")


def test_the_ready_file_gives_pid_and_config():
    ready = wc.parse_ready_file("pid=4242\nconfig={'model_path': '/m', 'tp_size': 8}\n")
    assert ready.pid == 4242 and ready.config == "{'model_path': '/m', 'tp_size': 8}"


@pytest.mark.parametrize("text", ["", "pid=\n", "pid=abc\n", "pid=0\n", "config={}\n"])
def test_a_ready_file_without_a_usable_pid_names_none(text):
    assert wc.parse_ready_file(text).pid is None


def test_an_engine_launched_warm_is_cold_once_it_falls_back_and_stays_so():
    kind = wc.StartKind(daemon_healthy=True)
    assert kind.to_record() == {"restart_kind": "warm", "restart_kind_reason": None}
    assert kind.on_line(FALLBACK) and kind.words() == "cold"
    assert kind.to_record() == {"restart_kind": "cold_fallback", "restart_kind_reason": "fallback_to_disk"}
    assert not kind.on_line(ATTACHED) and kind.kind == "cold_fallback"


def test_an_engine_launched_without_a_healthy_daemon_is_warm_only_if_it_attached():
    kind = wc.StartKind(daemon_healthy=False)
    assert kind.to_record() == {"restart_kind": "cold", "restart_kind_reason": "daemon_not_healthy"}
    assert kind.on_line(ATTACHED) and kind.warm and kind.attached


INT4_CONFIG = {"quantization_config": {"quant_method": "compressed-tensors", "format": "pack-quantized"}}
BLOCK_FP8 = {"quantization_config": {"quant_method": "fp8", "weight_block_size": [128, 128]}}


@pytest.mark.parametrize("flags, model_config, method, source", [
    ([], INT4_CONFIG, "compressed-tensors", "config.json quantization_config.quant_method"),
    ([], {"architectures": ["X"]}, "", "config.json (no quantization_config)"),
    ([], None, "", "config.json (no quantization_config)"),
    (["--quantization", "awq"], INT4_CONFIG, "awq", "--quantization"),
    (["--kv-cache-dtype", "fp8_e4m3", "--quantization=fp8"], None, "fp8", "--quantization"),
])
def test_the_quantization_method_is_resolved_as_sglang_does(flags, model_config, method, source):
    found, _config, where = wc.quant_method_of(flags, model_config)
    assert (found, where) == (method, source)


@pytest.mark.parametrize("method, model_config, held", [
    ("", {}, True),
    ("fp8", BLOCK_FP8, True),
    ("fp8", {"quantization_config": {"quant_method": "fp8"}}, False),   # per-tensor FP8
    ("fp8", {}, False),
    ("compressed-tensors", INT4_CONFIG, False),
    ("gptq", {}, False),
])
def test_the_pinned_allowlist_holds_only_unquantized_and_block_wise_fp8(method, model_config, held):
    assert wc.pinned_ipc_quant_supported(method, model_config.get("quantization_config")) is held


def test_the_pinned_allowlist_in_words():
    assert wc.accepted_words(wc.PINNED_IPC_QUANT_ALLOWLIST) == "none (unquantized), 'fp8' (with weight_block_size set)"
