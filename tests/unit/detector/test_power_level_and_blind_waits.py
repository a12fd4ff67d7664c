"""One reading of the same evidence. With power, a spin needs a spin-wait's power (a fraction of
the board's power.limit); without it, identical stacks in one wait are weighed against what the
phase usually takes, and that patience ends. On a shared GPU, the board's utilisation and
power are not the start's."""
import pytest

from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.detector_settings import DetectorSettings

SYNC = ["synchronize (torch/cuda/__init__.py)", "capture_one_batch_size (cuda_graph_runner.py)", "capture (cuda_graph_runner.py)"]
GEMM = ["synchronize (torch/cuda/__init__.py)", "run_gemms (warmup.py)", "rank_main (scheduler.py)"]
CAPTURE_BEGIN = "[2026-11-29 10:01:00 TP0] Capture cuda graph begin. This can take up to several minutes. avail mem=9.91 GB"


def _stacks(frames, ranks=1):
    return {"stacks": [{"pid": 5000 + r, "rank": "TP%d" % r, "frames": list(frames)} for r in range(ranks)]}


def _poll(s, limit_w=None, gpu_procs=None, stacks=None, **kwargs):
    """One poll of Start `s`, its GPUs saying their power.limit and the holders as given."""
    obs = s.obs(extra=stacks, **kwargs)
    for g in obs.get("gpus") or ():
        if limit_w is not None:
            g["power_limit_w"] = limit_w
    if gpu_procs is not None:
        obs["gpu_procs"] = gpu_procs
    return s.det.observe(obs)


def _in_capture(start, gpus=1, **settings):
    s = start(gpus=gpus, poll_s=5.0, **settings)
    s.comm = {"python3": gpus + 1}
    s.loaded()
    s.poll(log=[CAPTURE_BEGIN])
    return s


def test_gemms_at_most_of_the_power_limit_with_identical_stacks_are_work_never_a_spin(start):
    # as the H100 recording: no idle reading with power before, then silent GEMMs at 480-650 W of 700 W
    s = start(gpus=1, poll_s=5.0)
    s.loaded()
    s.util, s.power = [100], [560.0]
    out = [_poll(s, limit_w=700.0, cpu_pct=100, stacks=_stacks(GEMM) if i % 6 == 0 else None) for i in range(48)]
    assert not any(a.final for a in out), out[-1].reason
    assert out[-1].evidence["signature"] == "gpu_active"


def test_a_spin_at_a_fraction_of_the_power_limit_is_a_spin_wait_without_an_idle_reading(start):
    s = _in_capture(start)
    s.util, s.power = [100], [118.0]
    out = [_poll(s, limit_w=700.0, cpu_pct=100) for dummy in range(48)]      # 4 min, no stacks
    stalled = [a for a in out if a.final]
    assert stalled and stalled[0].reason_code == "stall_spin"
    # the short window of a spin the power reading confirms, not the kernel phases' 20 min
    assert 180 <= stalled[0].t - out[0].t <= 200, stalled[0].t


def test_a_board_without_its_limit_above_the_absolute_spin_level_computes(start):
    s = start(gpus=1, poll_s=5.0)
    s.loaded()
    s.util, s.power = [100], [400.0]
    out = [_poll(s, cpu_pct=100, stacks=_stacks(GEMM) if i % 6 == 0 else None) for i in range(48)]
    assert not any(a.final for a in out), out[-1].reason


def test_without_power_two_minutes_in_one_synchronize_is_left_alone_and_far_past_the_phase_it_stalls(start):
    s = _in_capture(start)
    s.util = [100]                     # no power reading on this board
    out = [_poll(s, cpu_pct=100, stacks=_stacks(SYNC) if i % 6 == 0 else None) for i in range(72)]   # 6 min
    t0 = out[0].t
    assert not any(a.final for a in out if a.t - t0 <= 150), [a.reason for a in out if a.final][:1]
    stalled = [a for a in out if a.final]
    assert stalled, out[-1].reason
    a = stalled[0]
    # 2 x the default 2 min of graph capture, counted from the first of the identical samples
    assert a.reason_code == "stall_spin" and 240 <= a.t - t0 <= 270
    assert "2 x the 2m00s cuda_graph usually takes (the default)" in a.reason
    assert a.evidence["stacks"]["usual_from"] == "the default" and a.evidence["stacks"]["bound_s"] == 240


def test_without_any_gpu_reading_ranks_in_the_same_synchronize_end_in_a_stall(start):
    # the NCCL all-reduce spin that stayed "quiet: CPU busy" to the end of its recording
    s = _in_capture(start, gpus=2)
    out = [_poll(s, cpu_pct=200, drop=("gpus",), stacks=_stacks(SYNC, ranks=2) if i % 6 == 0 else None)
           for i in range(96)]
    stalled = [a for a in out if a.final]
    assert stalled and stalled[0].reason_code == "stall_wait_stacks", out[-1].reason
    assert stalled[0].evidence["rule"].startswith("rule 5: identical stacks in one wait")
    assert "no GPU reading" in stalled[0].reason


def test_the_hosts_history_of_the_phase_sets_the_bound(start):
    s = _in_capture(start, blind_wait_history_s=("cuda_graph=300",))
    s.util = [100]
    out = [_poll(s, cpu_pct=100, stacks=_stacks(SYNC) if i % 6 == 0 else None) for i in range(144)]   # 12 min
    t0 = out[0].t
    stalled = [a for a in out if a.final]
    assert stalled and 600 <= stalled[0].t - t0 <= 630
    assert "(the host's history)" in stalled[0].reason


def test_stacks_that_change_restart_the_blind_count(start):
    s = _in_capture(start)
    s.util = [100]
    out = []
    for i in range(72):
        frames = SYNC if (i // 24) % 2 == 0 else GEMM       # another wait every 2 min
        out.append(_poll(s, cpu_pct=100, stacks=_stacks(frames) if i % 6 == 0 else None))
    assert not any(a.final for a in out), [a.reason for a in out if a.final][:1]


@pytest.mark.parametrize("entry", ["cuda_graph", "cuda_graph=soon", "=30", "cuda_graph=-5"])
def test_a_phase_bound_that_is_not_phase_equals_seconds_is_refused(entry):
    with pytest.raises(ValueError, match="blind_wait_usual_s"):
        DetectorSettings().with_overrides({"blind_wait_usual_s": [entry]})


def _shared_start(start):
    s = start(gpus=1, poll_s=5.0)
    s.comm = {"python3": 1}                         # the unit is its main process, the rank
    s.unit["main_pid"] = 5000
    s.loaded()
    s.poll(log=[CAPTURE_BEGIN])
    return s


def _holders(s, neighbour_mib):
    own = {"pid": 5000, "gpu": 0, "mem_mib": s.mem[0]}
    return [own] if neighbour_mib is None else [{"pid": 7001, "gpu": 0, "mem_mib": neighbour_mib}, own]


def test_a_neighbour_working_on_a_shared_gpu_does_not_keep_a_frozen_start_alive(start):
    s = _shared_start(start)
    out = []
    for i in range(40):
        s.util = [30 + 10 * (i % 5)]                  # the neighbour's kernels, on the board's reading
        out.append(_poll(s, cpu_pct=0, gpu_procs=_holders(s, 20000 + 1024 * (i % 3))))
    stalled = [a for a in out if a.final]
    assert stalled and stalled[0].reason_code == "stall_idle", out[-1].reason
    assert stalled[0].evidence["signature"] == "frozen"


def test_on_a_gpu_the_unit_holds_alone_the_same_readings_are_its_own_kernels(start):
    s = _shared_start(start)
    out = []
    for i in range(40):
        s.util = [30 + 10 * (i % 5)]
        out.append(_poll(s, cpu_pct=0, gpu_procs=_holders(s, None)))
    assert not any(a.final for a in out), [a.reason for a in out if a.final][:1]


def test_on_a_shared_gpu_a_board_pinned_at_a_spin_waits_power_still_bounds_the_starts_own(start):
    # a neighbour only adds power: the board at 120 W of 700 W means no kernel of the start computes
    s = _shared_start(start)
    s.util, s.power = [100], [120.0]
    out = [_poll(s, limit_w=700.0, cpu_pct=100, gpu_procs=_holders(s, 20000), stacks=_stacks(SYNC) if i % 6 == 0 else None)
           for i in range(24)]
    stalled = [a for a in out if a.final]
    assert stalled and stalled[0].reason_code == "stall_spin" and stalled[0].t - out[0].t <= 90, out[-1].reason


def test_on_a_shared_gpu_a_board_at_compute_power_is_not_the_starts_work_nor_its_spin(start):
    # the neighbour's GEMMs pin the board: the start's own utilisation and power are unknown,
    # so its identical synchronize stacks wait for the blind bound (4 min in graph capture)
    s = _shared_start(start)
    s.util, s.power = [100], [600.0]
    out = [_poll(s, limit_w=700.0, cpu_pct=100, gpu_procs=_holders(s, 20000), stacks=_stacks(SYNC) if i % 6 == 0 else None)
           for i in range(60)]
    t0 = out[0].t
    assert not any(a.final for a in out if a.t - t0 <= 200), [a.reason for a in out if a.final][:1]
    stalled = [a for a in out if a.final]
    assert stalled and stalled[0].evidence["rule"].startswith("rule 5: identical stacks in one wait")
    assert "no GPU reading" in stalled[0].reason
