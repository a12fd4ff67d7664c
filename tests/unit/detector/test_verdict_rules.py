"""Each verdict rule of the detector, on small synthetic starts (conftest.Start)."""
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.failure_classes import FAILURE_CLASSES, INTERIM_CODES, VERDICTS

SPIN_S = 120
IDLE_S = 120


def test_blob_record_with_finished_bar_means_weights_loaded(start):
    s = start()
    a = s.loaded()
    assert a.phase == "post_load"
    assert a.progress["shards_done"] == 64 and a.progress["shards_total"] == 64
    assert "bar" in a.evidence["moved"]


def test_a_lethal_line_fails_once_the_start_freezes_after_it_with_its_phase(start):
    s = start()
    s.loaded()
    at = s.t + s.poll_s - 0.5     # the line came half a second before the poll: not yet
    a = s.poll(log=[{"t": at - 1, "msg": "[x TP0] Capture cuda graph begin. avail mem=2.1 GB"},
                    {"t": at, "msg": "[x TP3] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."}])
    assert not a.final and "OutOfMemoryError" in a.evidence["fatal_lines"][0]
    s.util = [100 if i % 2 else 0 for i in range(8)]    # the other ranks wait in a collective
    a = s.poll(cpu_pct=300)
    assert a.evidence["rule"].startswith("rule 1: lethal line confirmed by the start freezing")
    assert (a.verdict, a.reason_code, a.phase, a.final) == ("failed", "fatal_oom", "cuda_graph", True)


def test_a_lethal_line_and_the_process_going_fail_in_the_same_poll(start):
    s = start()
    s.loaded()
    s.unit = {"active": "failed", "sub": "failed", "main_pid": None, "restarts": 0}
    a = s.poll(log=["[x TP3] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."])
    assert (a.verdict, a.reason_code, a.phase) == ("failed", "fatal_oom", "post_load")


def test_exit_zero_is_a_failure_not_a_success(start):
    s = start()
    s.loaded()
    s.unit = {"active": "inactive", "sub": "dead", "main_pid": None, "restarts": 0}
    a = s.poll(log=["sglang-k26-ddtree.service: Main process exited, code=exited, status=0/SUCCESS",
                    "sglang-k26-ddtree.service: Deactivated successfully."])
    assert (a.verdict, a.reason_code) == ("failed", "process_exited")
    assert "0/SUCCESS" in a.reason and "success" in a.reason


def test_auto_restart_state_means_the_process_died(start):
    s = start()
    s.loaded()
    s.unit = {"active": "activating", "sub": "auto-restart", "main_pid": 4242, "restarts": 1}
    assert s.poll().reason_code == "process_exited"


def test_a_new_main_pid_means_the_process_was_replaced(start):
    s = start()
    s.loaded()
    s.unit = dict(s.unit, main_pid=5151)
    assert s.poll().reason_code == "process_exited"


def test_journal_exit_line_fails_before_systemd_state_catches_up(start):
    s = start()
    s.loaded()
    a = s.poll(log=["sglang-k26-ddtree.service: Main process exited, code=exited, status=1/FAILURE"])
    assert a.reason_code == "process_exited" and "1/FAILURE" in a.reason


def test_successful_completion_is_ready(start):
    s = start()
    s.loaded()
    s.http = {"health": 200, "completion": {"ok": True, "status": 200, "ms": 150.0}}
    a = s.poll()
    assert (a.verdict, a.reason_code, a.phase, a.final) == ("ready", "ready", "ready", True)


def test_health_503_is_not_ready_but_is_progress(start):
    s = start()
    s.loaded()
    s.http = {"health": 503, "completion": None}
    a = s.poll(cpu_pct=5)
    assert a.verdict == "progressing" and "http" in a.evidence["moved"]
    assert a.phase == "http_server"


def test_gpu_spin_with_flat_memory_stalls_after_the_spin_window_and_not_before(start):
    s = start(stall_spin_window_s=SPIN_S)
    s.loaded()
    s.util = [100, 98, 0, 0, 99, 0, 0, 0]
    out = s.polls(SPIN_S + 20)
    first_stall = next(a for a in out if a.final)
    assert first_stall.reason_code == "stall_spin"
    assert first_stall.evidence["spin_gpus"] == [0, 1, 4]
    spin_start = out[0].t
    assert SPIN_S <= first_stall.t - spin_start <= SPIN_S + s.poll_s


def test_spin_during_graph_capture_gets_the_longer_kernel_window(start):
    s = start(stall_spin_window_s=SPIN_S, stall_spin_kernel_phase_window_s=3 * SPIN_S)
    s.loaded()
    s.poll(log=["[x TP0] Capture cuda graph begin. avail mem=9.9 GB"])
    s.util = [100] * 8
    out = s.polls(2 * SPIN_S)
    assert not any(a.final for a in out)
    assert out[-1].verdict == "suspect"


def test_everything_flat_stalls_as_idle_after_the_idle_window(start):
    s = start(stall_idle_window_s=IDLE_S)
    s.loaded()
    out = s.polls(IDLE_S + 20, cpu_pct=25)     # idle, above a hung start's trickle: not frozen
    final = [a for a in out if a.final]
    assert final[0].reason_code == "stall_idle" and final[0].phase == "post_load"
    assert final[0].t - out[0].t >= IDLE_S and final[0].evidence["rule"] == "rule 3: idle signature"


def test_busy_cpu_silence_is_quiet_and_never_suspect_before_the_busy_fallback(start):
    s = start(stall_busy_no_progress_s=3000)
    s.loaded()
    out = s.polls(2900, cpu_pct=800)
    assert {a.verdict for a in out} == {"quiet"}
    assert "CPU busy" in out[-1].reason


def test_busy_silence_ends_in_no_progress_after_the_busy_fallback(start):
    s = start(stall_busy_no_progress_s=600)
    s.loaded()
    out = s.polls(700, cpu_pct=800)
    assert next(a for a in out if a.final).reason_code == "stall_no_progress"


def test_without_cpu_or_gpu_data_only_the_no_progress_window_applies(start):
    s = start(stall_no_progress_s=300)
    s.loaded()
    out = s.polls(400, drop=("procs", "gpus"))
    stall = next(a for a in out if a.final)
    assert stall.reason_code == "stall_no_progress" and stall.evidence["signature"] == "unknown"


def _stacks(frames, ranks=8):
    return {"stacks": [{"pid": 100 + r, "rank": "TP%d" % r, "frames": list(frames)} for r in range(ranks)]}


def test_identical_wait_stacks_with_busy_cpu_and_idle_gpus_are_not_parked(start):
    s = start()
    s.loaded()
    frames = ["all_reduce", "forward", "capture", "run_scheduler_process"]
    out = [s.poll(cpu_pct=800, extra=_stacks(frames))]
    for dummy in range(5):
        out += [s.poll(cpu_pct=800)] + [s.poll(cpu_pct=800, extra=_stacks(frames))]
    assert not any(a.final for a in out), "a CPU still moving with GPUs that do not spin is a sign of life"


def test_identical_wait_stacks_with_spinning_gpus_stall_even_with_busy_cpu(start):
    s = start()
    s.loaded()
    frames = ["all_reduce", "forward", "capture", "run_scheduler_process"]
    s.util = [100] * 8
    s.poll(cpu_pct=800, extra=_stacks(frames))
    for dummy in range(5):
        assert not s.poll(cpu_pct=800).final
    a = s.poll(cpu_pct=800, extra=_stacks(frames))
    assert (a.verdict, a.reason_code) == ("stalled", "stall_spin")
    assert a.evidence["stacks"]["wait_frame"] == "all_reduce" and a.evidence["stacks"]["ranks"] == 8


def test_identical_busy_loop_stacks_do_not_stall(start):
    s = start()
    s.loaded()
    frames = ["_pack_marlin_moe_weights", "process_weights_after_loading", "load_model"]
    out = []
    for dummy in range(10):
        out.append(s.poll(cpu_pct=800, extra=_stacks(frames)))
        out.extend(s.polls(50, cpu_pct=800))
    assert not any(a.final for a in out)


def test_identical_stacks_with_idle_cpu_stall_whatever_the_frames(start):
    s = start()
    s.loaded()
    frames = ["_load_one_shard", "load_weights"]
    out = [s.poll(cpu_pct=20, extra=_stacks(frames) if i % 3 == 0 else None) for i in range(20)]
    assert [a.reason_code for a in out if a.final][0] == "stall_wait_stacks"


def test_stacks_that_changed_between_samples_do_not_stall(start):
    s = start()
    s.loaded()
    s.poll(cpu_pct=800, extra=_stacks(["all_reduce", "layer_3"]))
    s.polls(50, cpu_pct=800)
    assert not s.poll(cpu_pct=800, extra=_stacks(["all_reduce", "layer_4"])).final


def test_spinning_gpus_with_waiting_stacks_are_named_a_spin(start):
    s = start()
    s.loaded()
    s.util = [100] * 8
    frames = ["ncclCommInitRank", "wait"]
    s.poll(extra=_stacks(frames))
    s.polls(50)
    assert s.poll(extra=_stacks(frames)).reason_code == "stall_spin"


def test_progress_between_samples_clears_the_stack_evidence(start):
    s = start()
    s.loaded()
    frames = ["barrier", "wait"]
    s.poll(cpu_pct=3, extra=_stacks(frames))
    s.polls(30, cpu_pct=3)
    s.poll(cpu_pct=3, log=["[x TP0] Load weight end. avail mem=19 GB"])
    s.polls(20, cpu_pct=3)
    assert not s.poll(cpu_pct=3, extra=_stacks(frames)).final


def test_heartbeat_lines_are_not_progress(start):
    s = start(stall_idle_window_s=IDLE_S)
    s.loaded()
    hb = "[x TP0] No available shared memory broadcast block found in 60 seconds."
    out = [s.poll(cpu_pct=5, log=[hb] if i % 3 == 0 else []) for i in range(int(IDLE_S / 10) + 2)]
    assert "log" not in out[0].evidence["moved"]
    assert out[-1].reason_code == "stall_idle"


def test_a_message_repeated_over_several_polls_becomes_a_heartbeat(start):
    s = start(heartbeat_repeat_polls=2)
    s.loaded()
    moved = [("log" in s.poll(cpu_pct=5, log=["[x TP0] waited %d s for the peer group" % (10 * i)]).evidence["moved"])
             for i in range(4)]
    assert moved == [True, True, False, False]


def test_allocator_jitter_is_not_progress_but_slow_growth_adds_up(start):
    s = start()
    s.loaded()
    base = s.mem[0]
    for d in (3, -4, 2, -2):
        s.mem = [base + d] * 8
        assert "gpu_mem" not in s.poll(cpu_pct=5).evidence["moved"]
    moved = []
    for step in range(1, 8):
        s.mem = [base + 20 * step] * 8
        moved.append("gpu_mem" in s.poll(cpu_pct=5).evidence["moved"])
    assert any(moved) and not all(moved)


def test_disk_noise_is_not_progress_but_a_failing_disk_trickle_is(start):
    s = start()
    s.loaded()
    assert "disk_read" not in s.poll(cpu_pct=50, read_bps=400).evidence["moved"]
    assert "disk_read" in s.poll(cpu_pct=50, read_bps=300e3).evidence["moved"]


def test_compiler_children_at_work_are_progress(start):
    s = start()
    s.loaded()
    s.comm = {"python3": 10, "cc1plus": 8, "nvcc": 2}
    s.poll(cpu_pct=1600)
    assert "compile" in s.poll(cpu_pct=1600).evidence["moved"]


def test_nvidia_smi_timeouts_keep_the_last_gpu_sample_until_it_is_stale(start):
    s = start(stall_spin_window_s=SPIN_S, signal_stale_s=30)
    s.loaded()
    s.util = [100] * 8
    s.polls(30)
    a = s.poll(drop=("gpus",))
    assert a.evidence["signature"] == "spin"
    s.poll(drop=("gpus",))
    s.poll(drop=("gpus",))
    assert s.poll(drop=("gpus",)).evidence["signature"] != "spin"


def test_a_final_verdict_sticks_for_later_observations(start):
    s = start()
    s.loaded()
    s.poll(log=["[x TP0] Scheduler hit an exception: Traceback (most recent call last):"])
    s.unit = {"active": "failed", "sub": "failed", "main_pid": None, "restarts": 0}
    failed = s.poll()
    assert failed.verdict == "failed"
    s.http = {"health": 200, "completion": {"ok": True, "status": 200, "ms": 1.0}}
    assert s.poll() is failed


def test_stacks_are_asked_for_after_a_quiet_spell_and_then_once_per_interval(start):
    s = start(stacks_after_quiet_s=20, stacks_interval_s=60)
    s.loaded()
    wants = [a.want_stacks for a in s.polls(20, cpu_pct=800)]
    assert wants == [False, True]
    assert s.poll(cpu_pct=800, extra=_stacks(["loop"])).want_stacks is False
    later = [a.want_stacks for a in s.polls(60, cpu_pct=800)]
    assert later[:5] == [False] * 5 and later[-1] is True


def test_assessment_carries_the_contract_fields(start):
    s = start()
    a = s.loaded()
    d = a.to_dict()
    for key in ("t", "phase", "verdict", "reason_code", "reason", "evidence", "progress", "want_stacks", "final"):
        assert key in d
    for key in ("shards_done", "shards_total", "gpu_mem_used_mib", "gpu_mem_total_mib", "read_bps", "cpu_pct", "http", "elapsed_s"):
        assert key in d["progress"]
    assert d["progress"]["gpu_mem_used_mib"] == sum(s.mem)
    assert "last_moved" in d["evidence"] and "moved" in d["evidence"]


def test_every_reason_code_is_a_failure_class_or_a_documented_interim_code(start):
    s = start(stall_idle_window_s=60)
    s.loaded()
    seen = s.polls(90, cpu_pct=5)
    for a in seen:
        assert a.verdict in VERDICTS
        if a.verdict in ("stalled", "failed"):
            assert a.reason_code in FAILURE_CLASSES
        else:
            assert a.reason_code in INTERIM_CODES


def test_health_200_after_the_ready_line_is_ready_unless_completion_is_required(start):
    for required, verdict in ((False, "ready"), (True, "progressing")):
        s = start(ready_requires_completion=required)
        s.loaded()
        s.http = {"health": 200, "completion": None}
        assert s.poll(log=["The server is fired up and ready to roll!"]).verdict == verdict


def test_a_failed_completion_is_not_ready_even_with_health_200(start):
    s = start()
    s.loaded()
    s.http = {"health": 200, "completion": {"ok": False, "status": 500, "ms": 20.0}}
    assert s.poll(log=["The server is fired up and ready to roll!"]).verdict != "ready"


def test_a_lethal_line_followed_by_busy_cpu_and_gpu_bursts_was_survived(start):
    s = start()
    s.loaded()
    a = s.poll(log=["E1201 12:00:01.123000 4242 torch/_inductor/select_algorithm.py:2105] RuntimeError: No valid triton "
                    "configs. OutOfMemoryError: out of resource: triton_mm Required: 262144 Hardware limit:232448"])
    assert not a.final
    for i in range(12):
        s.util = [18 if i % 3 == 0 else 0] * 8
        a = s.poll(cpu_pct=1500)
        assert not a.final, a.reason
    assert "OutOfMemoryError" in a.evidence["survived_lines"][-1]


def test_a_survived_lethal_line_still_names_a_death_that_follows_within_the_window(start):
    s = start()
    s.loaded()
    s.poll(log=["[x TP3] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB."])
    s.poll(cpu_pct=900)
    s.unit = {"active": "failed", "sub": "failed", "main_pid": None, "restarts": 0}
    a = s.poll(cpu_pct=5)
    assert (a.verdict, a.reason_code) == ("failed", "fatal_oom")
    assert a.evidence["rule"] == "rule 1: lethal line confirmed by the process exiting"
