"""Rule 2's units: bursts above a GPU's own noise, children coming and going, stacks that
change, a frozen CPU clock."""
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.life_signs import (
    FrozenClock, GpuBursts, children_changed, stacks_changed)


def feed(bursts, values, idx=0):
    return [bursts.is_burst(idx, v) for v in values]


def test_two_percent_between_zeros_is_a_burst_on_a_board_that_reads_zero_when_idle():
    b = GpuBursts(min_pct=2, margin_pct=2)
    got = feed(b, [0] * 8 + [2, 0, 0, 18, 0, 27])
    assert got[8] and got[11] and got[13] and not any(got[:8])


def test_jitter_of_an_idle_board_is_not_a_burst_but_a_reading_above_it_is():
    b = GpuBursts(min_pct=2, margin_pct=2)
    noise = [1, 2, 3, 1, 1, 2, 3, 1, 2, 1, 3, 2, 1, 1, 2]
    assert not any(feed(b, noise))
    assert feed(b, [7]) == [True]


def test_a_gpu_needs_a_history_before_a_small_reading_counts():
    assert feed(GpuBursts(min_pct=2, margin_pct=2), [5, 5]) == [False, False]


def test_children_coming_and_going_change_the_count_or_the_names():
    before = {"count": 10, "comm": {"python3": 10}}
    assert children_changed(before, {"count": 14, "comm": {"python3": 14}})
    assert children_changed(before, {"count": 10, "comm": {"python3": 9, "cc1plus": 1}})
    assert not children_changed(before, {"count": 10, "comm": {"python3": 10}})
    assert not children_changed(None, before)


def test_stacks_changed_compares_the_ranks_sampled_twice():
    old = {"TP0": ("synchronize", "tune"), "TP1": ("synchronize", "tune")}
    assert not stacks_changed(old, {"TP0": ("synchronize", "tune")})
    assert stacks_changed(old, {"TP1": ("benchmark", "tune")})
    assert not stacks_changed(None, old)


def test_a_frozen_clock_holds_while_cpu_time_does_not_move_and_ends_when_it_does():
    c = FrozenClock(frozen_pct=0.5)
    for t, cpu_s in ((0, 100.0), (10, 100.0), (20, 100.01), (30, 100.01)):
        c.update(t, cpu_s)
    assert c.held_s(30) == 30
    c.update(40, None)              # an unknown reading neither starts nor ends it
    assert c.held_s(40) == 40
    c.update(50, 101.0)
    assert c.held_s(50) == 0
    c.update(60, 101.08, processes=2)   # 0.8 % of a core over two processes: a trickle
    c.update(70, 101.16, processes=2)
    assert c.held_s(70) == 20


def test_frequent_bursts_do_not_raise_the_noise_ceiling_over_the_small_ones():
    b = GpuBursts(min_pct=2, margin_pct=2)
    feed(b, [0] * 8)
    got = feed(b, [25, 0, 30, 0, 2, 0, 20, 0, 3, 0] * 4)
    assert got[4] and got[8] and got[-2]


def test_a_floor_that_moved_for_good_stops_counting_as_bursts():
    b = GpuBursts(min_pct=2, margin_pct=2)
    feed(b, [0] * 8)
    got = feed(b, [5] * 40)
    assert got[0] and not got[-1]


def test_a_cpu_burst_stands_out_from_the_trickle_and_a_steady_rate_never_does():
    from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.life_signs import CpuBursts
    tuning = CpuBursts(min_pct=5, floor_share_pct=33)
    got = [tuning.update(t, r) for t, r in enumerate([0.2, 0.3, 0.2, 0.2, 24.0, 0.2, 0.3, 60.0])]
    assert got == [False] * 4 + [True, False, False, True] and tuning.last_t == 7
    hung = CpuBursts(min_pct=5, floor_share_pct=33)
    assert not any(hung.update(t, r) for t, r in enumerate([1.4, 1.8, 2.0, 1.6] * 10))
    polling = CpuBursts(min_pct=5, floor_share_pct=33)
    assert not any(polling.update(t, r) for t, r in enumerate([780, 850, 720, 810] * 10))
