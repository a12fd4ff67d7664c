"""One test per principle of docs/detector.md ("Principles"), on small synthetic starts."""
from ansible_collections.sglang_ops.serving.tests.unit.detector.conftest import Start

from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.detector import Detector

DEAD = {"active": "failed", "sub": "failed", "main_pid": None, "restarts": 0}


def _stacks(frames, ranks=8):
    return {"stacks": [{"pid": 100 + r, "rank": "TP%d" % r, "frames": list(frames)} for r in range(ranks)]}


# 1. a line SGLang survives is evidence, never a verdict
def test_soft_watchdog_dumps_and_warnings_in_a_silent_phase_are_evidence_not_a_verdict(start):
    s = start()
    s.loaded()
    a = s.poll(log=["[2026-11-29 10:00:00 TP0] Scheduler watchdog timeout (self.watchdog_timeout=300, self.soft=True)",
                    "[2026-11-29 10:00:00 TP0] WARNING: NCCL timeout while probing P2P, falling back to NCCL all-reduce"])
    assert not a.final and len(a.evidence["survived_lines"]) == 2
    assert not any(x.final for x in s.polls(600, cpu_pct=800))


def test_a_lethal_line_followed_by_ordinary_lines_was_survived(start):
    s = start()
    s.loaded()
    a = s.poll(log=[{"t": 65.0, "msg": "[2026-11-29 10:00:00 TP0] RuntimeError: optional kernel probe failed"},
                    {"t": 69.5, "msg": "[2026-11-29 10:00:04 TP0] KV Cache is allocated. #tokens: 1, KV size: 1 GB"}])
    assert not a.final and "optional kernel probe" in a.evidence["survived_lines"][-1]
    assert not any(x.final for x in s.polls(300))


def test_an_unknown_exception_after_which_the_load_reads_on_was_survived(start):
    s = start()
    s.poll(log=["[2026-11-29 10:00:00 TP0] Load weight begin. avail mem=94.52 GB"])
    s.poll(read_bps=2e9, log=["ModuleNotFoundError: No module named 'vllm'"])
    a = s.poll(read_bps=2e9)
    assert not a.final and "vllm" in a.evidence["survived_lines"][-1]
    assert not any(x.final for x in s.polls(300, read_bps=2e9))


def test_a_traceback_python_announces_as_ignored_is_survived(start):
    s = start()
    s.loaded()
    a = s.poll(log=["Exception ignored in: <function CustomAllreduce.__del__ at 0x7f3a2c1ff740>",
                    "Traceback (most recent call last):",
                    '  File "/sgl/srt/distributed/device_communicators/custom_all_reduce.py", line 300, in __del__',
                    "AttributeError: 'CustomAllreduce' object has no attribute '_ptr'"])
    assert "fatal_lines" not in a.evidence and len(a.evidence["survived_lines"]) == 3
    assert not any(x.final for x in s.polls(300))


def test_an_unknown_exception_while_the_other_ranks_wait_fails_within_two_polls(start):
    s = start()
    s.loaded()
    s.util = [100, 100, 0, 100, 100, 100, 100, 100]
    s.poll(log=["[2026-11-29 10:00:00 TP2] Traceback (most recent call last):"])
    a = s.poll(cpu_pct=300)
    assert (a.verdict, a.reason_code, a.phase) == ("failed", "fatal_error", "post_load")


def test_a_watchdog_line_that_does_not_say_soft_names_the_death_that_follows():
    s = Start()
    s.loaded()
    assert not s.poll(log=["[x TP0] Watchdog timeout (self.watchdog_timeout=300)"]).final
    s.unit = DEAD
    a = s.poll(cpu_pct=0)
    assert (a.verdict, a.reason_code) == ("failed", "fatal_watchdog")


# 2. identical stacks need the hardware to agree
def test_constant_stacks_in_synchronize_with_gpu_bursts_are_work_not_a_stall(start):
    s = start()
    s.loaded()
    frames = ["synchronize", "benchmark_config", "tune"]
    for i in range(120):          # 20 min; a burst of kernels every third poll
        s.util = [60] * 8 if i % 3 == 0 else [0] * 8
        a = s.poll(cpu_pct=30, extra=_stacks(frames) if i % 6 == 0 else None)
        assert not a.final, a.reason
    assert a.evidence["signature"] in ("gpu_active", "idle", "unknown")


def test_the_same_stacks_with_flat_idle_gpus_are_parked_only_after_a_quiet_spell_without_bursts(start):
    frames = ["synchronize", "busy_gpu", "main"]
    tuning = start()
    tuning.loaded()
    for i in range(60):        # 10 min: the host wakes for a burst of work every 40 s, GPUs read 0
        a = tuning.poll(cpu_pct=300 if i % 4 == 0 else 0.2, extra=_stacks(frames) if i % 3 == 0 else None)
        assert not a.final, "a loop timing short kernels wakes for each batch; its GPU bursts fall between readings"
    s = start()
    s.loaded()
    quiet_polls = int(s.det.settings.stall_parked_quiet_s / s.poll_s)
    out = [s.poll(cpu_pct=25, extra=_stacks(frames) if i % 3 == 0 else None) for i in range(quiet_polls + 4)]
    assert not any(a.final for a in out[:quiet_polls - 1]), "a steady CPU, no burst: parked only after the quiet spell"
    a = next(a for a in out if a.final)
    assert (a.verdict, a.reason_code) == ("stalled", "stall_wait_stacks") and a.evidence["stacks"]["hardware"] == "GPUs idle"


def test_without_gpu_readings_only_collective_or_host_waits_settle_a_stall(start):
    s = start()
    s.loaded()
    for frames, final in ((["synchronize", "benchmark_config", "tune"], False), (["all_reduce", "forward", "capture"], True)):
        s.poll(cpu_pct=800, drop=("gpus",), extra=_stacks(frames))
        s.polls(50, cpu_pct=800, drop=("gpus",))
        assert s.poll(cpu_pct=800, drop=("gpus",), extra=_stacks(frames)).final is final


def test_power_tells_kernels_at_full_tilt_from_a_spin_wait(start):
    frames = ["synchronize", "benchmark_config", "tune"]
    for watts, final in ((690.0, False), (121.0, True)):     # as recorded on two H200s: autotune, hung all-reduce
        s = start(gpus=2)
        s.power = [80.0, 80.0]
        s.loaded()
        s.util, s.power = [99, 99], [watts, watts]
        out = [s.poll(cpu_pct=200, extra=_stacks(frames, ranks=2) if i % 6 == 0 else None) for i in range(36)]
        assert any(a.final for a in out) is final, out[-1].reason


def test_a_spin_at_idle_power_gets_the_short_window_even_in_a_kernel_phase(start):
    s = start(gpus=2)
    s.power = [80.0, 80.0]
    s.loaded()
    s.poll(log=["[x TP0] Capture cuda graph begin. avail mem=2 GB"])
    s.util, s.power = [100, 0], [121.0, 116.0]
    out = s.polls(330, cpu_pct=100)
    assert out[-1].verdict == "stalled" and out[-1].reason_code == "stall_spin" and out[-1].phase == "cuda_graph"


def test_without_gpu_readings_ranks_parked_apart_on_the_host_settle_a_stall(start):
    s = start(gpus=2)
    s.loaded()
    ranks = {"stacks": [{"pid": 1, "rank": "TP0", "frames": ["synchronize", "capture", "rank_main"]},
                        {"pid": 2, "rank": "TP1", "frames": ["wait", "wait", "wait_for_next_batch"]}]}
    s.poll(cpu_pct=100, drop=("gpus",), extra=ranks)
    s.polls(50, cpu_pct=100, drop=("gpus",))
    a = s.poll(cpu_pct=100, drop=("gpus",), extra=ranks)
    assert a.verdict == "stalled" and "on the host" in a.evidence["stacks"]["hardware"]


def test_every_process_stopped_is_a_stall_without_stacks(start):
    s = start()
    s.loaded()
    out = [s.poll(cpu_pct=0, extra={"procs": {"count": 3, "cpu_s": s.cpu_s, "states": {"T": 3}}}) for dummy in range(8)]
    assert out[-1].verdict == "stalled" and "stopped" in out[-1].reason
    assert not out[4].final          # not before the stopped window


# 3. a rank's exception is not "working silently": see test_an_unknown_exception_... above


# 4. records cut at LineMax are joined before anything is matched
def test_a_fatal_line_cut_at_line_max_is_read_whole(start):
    s = start()
    s.loaded()
    line = "[2026-11-29 10:00:00 TP5] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.50 GiB."
    parts = [line[:33], line[33:60], line[60:]]
    s.poll(log=[{"t": 60.0, "msg": parts[0], "line_break": "line-max"}, {"t": 60.0, "msg": parts[1], "line_break": "line-max"}])
    s.unit = {"active": "failed", "sub": "failed", "main_pid": None, "restarts": 0}
    a = s.poll(log=[{"t": 60.0, "msg": parts[2]}])      # the rest came with the next poll, and the process went
    assert (a.verdict, a.reason_code) == ("failed", "fatal_oom")


def test_a_heartbeat_cut_differently_each_time_is_still_a_heartbeat(start):
    s = start()
    s.loaded()
    hb = "[2026-11-29 10:00:00 TP0] No available shared memory broadcast block found in 60 seconds."
    moved = []
    for cut in (20, 41, 33, 57, 28, 50):
        a = s.poll(cpu_pct=500, log=[{"t": s.t + 5, "msg": hb[:cut], "line_break": "line-max"}, {"t": s.t + 5, "msg": hb[cut:]}])
        moved.append("log" in a.evidence["moved"])
    assert not any(moved)


# 5. a missing or timed-out reading is its own state with a bound
def test_nvidia_smi_timing_out_while_ranks_busy_poll_is_a_stall_within_its_window(start):
    s = start(stall_gpu_unanswered_window_s=300)
    s.loaded()
    timed_out = {"missing": {"gpus": "nvidia-smi timed out after 10 s"}}
    out = [s.poll(cpu_pct=800, drop=("gpus",), extra=timed_out) for dummy in range(32)]
    assert not out[25].final and out[-1].verdict == "stalled" and "nvidia-smi" in out[-1].reason


def test_gpu_readings_missing_without_a_timeout_leave_busy_cpu_unexplained_for_the_fallback_only(start):
    s = start(stall_no_progress_s=1500)
    s.loaded()
    out = s.polls(1600, cpu_pct=800, drop=("gpus",))
    assert not out[100].final and out[-1].reason_code == "stall_no_progress"


# 6. the phase at a fault is the phase it belongs to
def test_records_of_one_poll_are_read_in_their_own_time_order(start):
    s = start()
    s.loaded()
    a = s.poll(log=[{"t": 64.0, "msg": "[2026-11-29 10:00:04 TP3] torch.OutOfMemoryError: CUDA out of memory."},
                    {"t": 61.0, "msg": "[2026-11-29 10:00:01 TP0] Capture cuda graph begin. avail mem=2 GB"}])
    s.unit = DEAD
    a = s.poll(cpu_pct=0)
    assert (a.reason_code, a.phase) == ("fatal_oom", "cuda_graph")


def test_a_fault_class_that_proves_its_phase_sets_it():
    d = Detector()
    d.observe({"t": 0.0, "log": [{"t": 0.0, "msg": "[x TP0] KV Cache is allocated. #tokens: 1, KV size: 1 GB"}]})
    a = d.observe({"t": 10.0, "unit": DEAD, "log": [
        {"t": 5.0, "msg": "ERROR:    [Errno 98] error while attempting to bind on address ('127.0.0.1', 30001): address already in use"}]})
    assert (a.reason_code, a.phase) == ("fatal_port_in_use", "http_server")


# rule 5: blind means patient, not deaf
def test_a_frozen_cpu_clock_is_a_stall_without_gpu_telemetry(start):
    s = start()
    s.loaded()
    window = s.det.settings.stall_frozen_window_s
    # the trickle of a hung process's background threads: well under a core's hundredth each
    out = [s.poll(cpu_pct=2, drop=("gpus",)) for dummy in range(int(window / s.poll_s) + 1)]
    assert not any(a.final for a in out[:-2])
    a = out[-1]
    assert (a.verdict, a.reason_code) == ("stalled", "stall_idle")
    assert a.evidence["rule"] == "rule 5: frozen CPU clock, evidence on its own"


def test_a_blind_start_whose_cpu_wakes_for_work_is_not_frozen(start):
    s = start()
    s.loaded()
    # a GPU-bound loop seen without GPU readings: a trickle, and a burst of work every 40 s
    out = [s.poll(cpu_pct=300 if i % 4 == 0 else 0.3, drop=("gpus",)) for i in range(42)]
    assert not any(a.final for a in out), [a.reason for a in out if a.final][:1]
