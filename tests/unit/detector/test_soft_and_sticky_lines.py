"""Issue 32: soft and sticky lines (rule 1), the CPU floor (rule 2), a blind watcher (rule 5)."""
import pytest

from ansible_collections.sglang_ops.serving.plugins.module_utils.domain import log_lines, sticky_lines
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.life_signs import CpuFloor
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.line_confirmation import (
    CONFIRMED_FROZEN, LineConfirmation)

BIND = "ERROR:    [Errno 98] error while attempting to bind on address ('0.0.0.0', 30001): address already in use"
STATE_DICT = "RuntimeError: Error(s) in loading state_dict for DeepseekV3ForCausalLM:"
OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.50 GiB. GPU 0 has a total capacity of 95.59 GiB"


@pytest.mark.parametrize("msg, code", [
    ("RuntimeError: CUDA error: an illegal memory access was encountered", "fatal_error"),
    ("torch.AcceleratorError: CUDA error: device-side assert triggered", "fatal_error"),
    ("RuntimeError: CUDA error: unspecified launch failure", "fatal_error"),
    ("RuntimeError: CUDA error: misaligned address", "fatal_error"),
    (STATE_DICT, "fatal_checkpoint"),
    ("\tMissing key(s) in state_dict: \"model.layers.0.mlp.gate.weight\".", "fatal_checkpoint"),
    ("\tsize mismatch for model.embed.weight: copying a param with shape torch.Size([2]) from checkpoint", "fatal_checkpoint"),
    ("torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:3356, unhandled system error", "fatal_nccl"),
    (BIND, "fatal_port_in_use"),
    ("Subprocess sglang::scheduler_TP3 (pid=4242) crashed with exit code -6. Triggering SIGQUIT for cleanup...", "fatal_error"),
    ("Scheduler watchdog timeout (self.watchdog_timeout=300, self.soft=False)", "fatal_watchdog"),
])
def test_sticky_lines_are_lethal_and_sticky_with_their_class(msg, code):
    line = log_lines.classify(msg)
    assert (line.lethal, line.sticky, line.fatal_code) == (True, True, code)
    assert sticky_lines.sticky_code(line.text) == code


@pytest.mark.parametrize("msg", [OOM, "Traceback (most recent call last):", "KeyError: 'model.layers.61.mlp'",
                                 "safetensors_rust.SafetensorError: Error while deserializing header: MetadataIncompleteBuffer"])
def test_soft_lines_are_lethal_but_not_sticky(msg):
    line = log_lines.classify(msg)
    assert line.lethal and not line.sticky


def test_every_sticky_entry_names_the_source_it_comes_from():
    assert all(source and code for dummy_pattern, code, source in sticky_lines.STICKY)


def test_uvicorns_teardown_after_a_bind_failure_is_part_of_the_error_not_progress():
    for msg in ("INFO:     Waiting for application shutdown.", "INFO:     Application shutdown complete.",
                "INFO:     Finished server process [1986]"):
        assert log_lines.classify(msg).chatter


def test_a_sticky_hypothesis_is_confirmed_without_progress_whatever_else_and_progress_only_delays_it():
    c = LineConfirmation(confirm_window_s=60.0, freeze_min_s=10.0, priority={}.get, sticky_quiet_s=15.0)
    c.on_line(100.0, "fatal_port_in_use", BIND, "http_server", 105.0, sticky=True)
    assert c.judge(115.0, None, [], None) == (None, None)
    assert c.judge(125.0, None, ["gpu_mem"], None) == (None, None)   # progress: the clock restarts, the line stays
    assert c.open is not None and not c.survived
    assert c.judge(135.0, None, [], None) == (None, None)
    outcome, h = c.judge(140.0, None, [], None)
    assert outcome == CONFIRMED_FROZEN and h.code == "fatal_port_in_use"


def test_a_sticky_line_makes_an_open_soft_hypothesis_sticky_and_the_most_specific_class_names_it():
    c = LineConfirmation(confirm_window_s=60.0, freeze_min_s=10.0, priority={"fatal_oom": 0, "fatal_nccl": 5}.get)
    c.on_line(100.0, "fatal_oom", OOM, "cuda_graph", 105.0)
    c.on_line(101.0, "fatal_nccl", "NCCL error: unhandled cuda error", "cuda_graph", 105.0, sticky=True)
    assert c.open.sticky and c.open.code == "fatal_oom"


def test_a_sticky_error_inside_a_line_of_a_more_specific_class_keeps_that_class():
    line = log_lines.classify("Unexpected error during packing of layer 3: RuntimeError: CUDA error: an illegal memory "
                              "access was encountered")
    assert (line.sticky, line.fatal_code) == (True, "fatal_packing")


def _after_load_then(start, msg, cpu_pct, util, gpus=8):
    s = start(gpus=gpus)
    s.comm = {"python3": 10}
    s.loaded()
    s.polls(60, cpu_pct=800)
    s.util = list(util)
    a = s.poll(log=[msg], cpu_pct=cpu_pct)
    onset = s.t - 1
    out = [a] + s.polls(60, cpu_pct=cpu_pct)
    return next((x for x in out if x.final), out[-1]), onset


def test_a_bind_failure_with_the_ranks_at_their_poll_loops_fails_within_a_minute(start):
    a, onset = _after_load_then(start, BIND, cpu_pct=120, util=[0] * 8)
    assert (a.verdict, a.reason_code) == ("failed", "fatal_port_in_use")
    assert a.evidence["rule"].startswith("rule 1: sticky line confirmed by no progress")
    assert a.t - onset <= 60


def test_a_state_dict_mismatch_fails_while_the_other_ranks_burn_600_percent(start):
    a, onset = _after_load_then(start, STATE_DICT, cpu_pct=600, util=[0] * 8)
    assert (a.verdict, a.reason_code) == ("failed", "fatal_checkpoint") and a.t - onset <= 60


def test_a_soft_line_with_the_same_busy_cpu_is_survived(start):
    a, dummy_onset = _after_load_then(start, OOM, cpu_pct=600, util=[0] * 8)
    assert not a.final and a.evidence.get("survived_lines")


def test_blind_a_pinned_cpu_after_a_soft_line_is_never_a_freeze(start):
    s = start(gpus=8)
    s.loaded()
    s.polls(60, cpu_pct=800, drop=("gpus",))
    out = [s.poll(log=[OOM], cpu_pct=105, drop=("gpus",))] + s.polls(300, cpu_pct=105, drop=("gpus",))
    assert not any(a.final for a in out)
    assert any("cpu" in (a.evidence.get("survived_by") or ()) for a in out)


def test_blind_a_soft_line_then_a_frozen_cpu_fails(start):
    s = start(gpus=8)
    s.loaded()
    s.polls(60, cpu_pct=800, drop=("gpus",))
    out = [s.poll(log=[OOM], cpu_pct=1, drop=("gpus",))] + s.polls(60, cpu_pct=1, drop=("gpus",))
    a = next(a for a in out if a.final)
    assert (a.verdict, a.reason_code) == ("failed", "fatal_oom")


def test_the_cpu_floor_is_the_quietest_stretch_per_process_and_never_a_busy_rate():
    floor = CpuFloor(max_per_process_pct=15.0, margin_pct=50.0)
    for rate in (800, 790, 820, 120, 130, 118, 125):
        floor.update(rate, 10)
    assert floor.per_process_pct is None, "a stretch is no floor while the rate sits in it"
    floor.update(600, 10)
    assert floor.per_process_pct is None, "one reading above is noise, not the stretch left"
    floor.update(610, 10)
    floor.update(590, 10)
    assert floor.per_process_pct == pytest.approx(13.0)
    assert floor.at_floor(150, 10) and not floor.at_floor(400, 10)
    busy = CpuFloor(max_per_process_pct=15.0, margin_pct=50.0)
    for rate in (800, 790, 820, 810):
        busy.update(rate, 10)
    assert busy.per_process_pct is None and not busy.at_floor(800, 10)


def test_a_start_back_at_the_cpu_floor_it_sat_at_before_with_idle_gpus_is_idle_not_busy(start):
    s = start(gpus=8, stall_idle_window_s=120.0)
    s.comm = {"python3": 10}
    s.loaded()
    s.util = [0] * 8
    s.polls(60, cpu_pct=120)
    s.polls(60, cpu_pct=800)
    out = s.polls(400, cpu_pct=120)
    assert out[5].evidence["signature"] == "idle"
    a = next(a for a in out if a.final)
    assert (a.verdict, a.reason_code) == ("stalled", "stall_idle")


def test_one_process_busy_on_one_core_while_the_others_idle_is_never_its_own_floor(start):
    # a tokenizer or a CPU repack: 100 % of one core over 8 processes reads 12.5 % each,
    # within a floor's bound; learned from this stretch itself it would read as idle
    s = start(gpus=8)
    s.comm = {"python3": 8}
    s.loaded()
    s.util = [0] * 8
    out = s.polls(1200, cpu_pct=100)
    assert not any(a.final for a in out), next(a for a in out if a.final).reason
    assert out[-1].evidence.get("signature") != "idle"
