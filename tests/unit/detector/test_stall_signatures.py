"""Rules 3 and 5 on their own unit: which stall signature holds, for how long, and the
rule that decided, given what the detector has seen on polls without progress."""
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.gpu_readings import GpuSample
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.detector_settings import DetectorSettings
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.stall_signatures import Silence, StallSignatures

POLL_S = 10.0
PARKED = ("futex_wait (threading.py:320)", "recv (nccl.py:12)", "run (scheduler.py:900)")


def gpus_idle(t, count=8):
    return GpuSample(t, count, 8000.0, 640000.0, 0.0, [], True, False, False)


def gpus_spinning(t, count=8, at_idle_power=False):
    return GpuSample(t, count, 8000.0, 640000.0, 100.0, list(range(count)), False, False, at_idle_power)


def silent_polls(until_s, sig=None, **seen):
    """Polls every POLL_S from POLL_S to until_s, nothing moving since t=0; each keyword is a
    value or a function of t. Returns [(t, Judgement, evidence)]."""
    sig = sig or StallSignatures(DetectorSettings())
    out = []
    t = POLL_S
    while t <= until_s:
        fields = {k: (v(t) if callable(v) else v) for k, v in seen.items()}
        fields.setdefault("phase", "weight_load")
        evidence = {}
        out.append((t, sig.judge(Silence(t=t, last_progress_t=0.0, **fields), evidence), evidence))
        t += POLL_S
    return out


def first_stall(polls):
    return next(((t, j, ev) for t, j, ev in polls if j.verdict == "stalled"), None)


def test_a_frozen_cpu_clock_stalls_on_its_own_after_the_frozen_window():
    polls = silent_polls(200, cpu_pct=0.3, cpu_known=True, gpus=gpus_idle, frozen_s=lambda t: t)
    t, j, ev = first_stall(polls)
    assert t == 120
    assert (j.reason_code, ev["rule"], ev["signature"]) == (
        "stall_idle", "rule 5: frozen CPU clock, evidence on its own", "frozen")
    assert "CPU time has not moved for 2m" in j.reason


def test_identical_wait_stacks_with_idle_gpus_are_parked_only_after_the_quiet_spell():
    def stacks(t):
        return [(s, {0: PARKED, 1: PARKED}) for s in (40.0, 100.0, 160.0) if s <= t]
    polls = silent_polls(200, cpu_pct=5.0, cpu_known=True, gpus=gpus_idle, gpu_run=lambda t: int(t / POLL_S),
                         stacks=stacks)
    t, j, ev = first_stall(polls)
    # the samples at 40 and 100 s match, but 100 s is within stall_parked_quiet_s of the last progress
    assert t == 160
    assert j.reason_code == "stall_wait_stacks"
    assert ev["rule"] == "rule 3: parked signature (identical stacks in a wait, GPUs idle)"
    assert ev["stacks"]["wait_frame"] == "futex_wait" and ev["stacks"]["ranks"] == 2


def test_a_gpu_burst_between_the_stack_samples_is_not_parked():
    stacks = [(100.0, {0: PARKED}), (160.0, {0: PARKED})]
    polls = silent_polls(160, cpu_pct=5.0, cpu_known=True, gpus=gpus_idle, gpu_run=9, gpu_active_t=130.0,
                         stacks=lambda t: [s for s in stacks if s[0] <= t])
    assert first_stall(polls) is None


def test_spinning_gpus_stall_after_the_spin_window_and_sooner_at_idle_power():
    t, j, ev = first_stall(silent_polls(400, cpu_pct=100.0, cpu_known=True, gpus=gpus_spinning))
    assert (t, j.reason_code, ev["rule"]) == (310, "stall_spin", "rule 3: spinning signature")
    assert "8 of 8 GPUs at >= 90% utilisation" in j.reason
    t, j, dummy_ev = first_stall(silent_polls(400, cpu_pct=100.0, cpu_known=True,
                                              gpus=lambda t: gpus_spinning(t, at_idle_power=True)))
    assert (t, j.reason_code) == (190, "stall_spin")


def test_spinning_before_its_window_is_suspect_and_asks_for_stacks():
    polls = silent_polls(300, cpu_pct=100.0, cpu_known=True, gpus=gpus_spinning)
    assert first_stall(polls) is None
    dummy_t, j, dummy_ev = polls[-1]
    assert (j.verdict, j.reason_code, j.want_stacks) == ("suspect", "suspect_spin", True)


def test_progress_restarts_the_spin_window():
    sig = StallSignatures(DetectorSettings())
    silent_polls(250, sig=sig, cpu_pct=100.0, cpu_known=True, gpus=gpus_spinning)
    sig.on_progress()
    evidence = {}
    j = sig.judge(Silence(t=320.0, phase="weight_load", last_progress_t=310.0, cpu_pct=100.0, cpu_known=True,
                          gpus=gpus_spinning(320.0)), evidence)
    assert j.verdict == "quiet"


def test_every_process_stopped_stalls_on_its_own_after_the_stopped_window():
    t, j, ev = first_stall(silent_polls(200, cpu_pct=0.0, cpu_known=True, stopped=True))
    assert t == 70   # the clock starts on the first poll, at 10 s
    assert (j.reason_code, ev["rule"], ev["signature"]) == (
        "stall_idle", "rule 5: every process stopped (state T), evidence on its own", "stopped")


def test_idle_without_a_gpu_reading_waits_the_longer_blind_window():
    t, j, ev = first_stall(silent_polls(1200, cpu_pct=5.0, cpu_known=True, gpus=gpus_idle))
    assert (t, j.reason_code, ev["rule"]) == (490, "stall_idle", "rule 3: idle signature")
    t, j, ev = first_stall(silent_polls(1200, cpu_pct=5.0, cpu_known=True))
    assert (t, j.reason_code) == (970, "stall_idle")
    assert ev["rule"] == "rule 3: idle without a GPU reading (rule 5 window) signature"
    assert ev["gpus"] == "unknown" and "no GPU reading" in j.reason


def test_a_wedged_nvidia_smi_stalls_while_nothing_moves():
    t, j, ev = first_stall(silent_polls(600, cpu_pct=300.0, cpu_known=True, smi_since=0.0))
    assert (t, j.reason_code, ev["rule"]) == (300, "stall_spin", "rule 5: nvidia-smi wedged while nothing moves")
    assert ev["gpus"] == "unanswered since 5m00s"


def test_the_hard_ceiling_ends_a_start_that_only_busy_polls():
    t, j, ev = first_stall(silent_polls(2000, cpu_pct=300.0, cpu_known=True))
    assert (t, j.reason_code, ev["rule"]) == (1500, "stall_no_progress", "rule 5: hard ceiling without progress")
    assert ev["signature"] == "busy"
