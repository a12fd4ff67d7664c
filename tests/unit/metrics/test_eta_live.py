"""The ETA's measures of the start it watches (records/eta_live.py) and how the estimator uses
them: a cold start after a warm one follows its own GPU memory, not the history's load time,
and every estimate carries the range the progress line shows."""
import pytest

from ansible_collections.sglang_ops.serving.plugins.module_utils.records import eta_live
from ansible_collections.sglang_ops.serving.plugins.module_utils.records.eta import EtaEstimator, loaded_mib

GB = 10**9


def a(t, phase, **progress):
    return {"t": t, "phase": phase, "verdict": "progressing", "reason": "", "progress": dict(progress, elapsed_s=t)}


def ready_start(*phases):
    """A ready start's record from (phase, seconds) in order, nothing read from storage."""
    out, t = [], 0.0
    for phase, seconds in phases:
        out.append({"phase": phase, "started_s": t, "duration_s": float(seconds), "read_bytes": 0})
        t += seconds
    return {"outcome": "ready", "ready_after_s": t, "phases": out}


def estimate_after(history, *polls):
    """The estimate at the last of (t, phase) polls, with `history` as the only earlier start."""
    est = EtaEstimator([history])
    for t, phase in polls:
        e = est.update(a(t, phase))
    return e


def test_the_read_rate_is_the_bytes_since_the_phase_began_over_its_time_and_a_trickle_is_none():
    assert eta_live.rate_bps(11 * GB, 0, 10.0) == pytest.approx(1.1 * GB)
    assert eta_live.rate_bps(10**5, 0, 10.0) is None                 # 10 kB/s: no rate to divide by
    assert eta_live.rate_bps(None, 0, 10.0) is None and eta_live.rate_bps(5, 0, 0.0) is None
    assert eta_live.bytes_left_s(550 * GB, 11 * GB, 1.1 * GB) == pytest.approx(490)
    assert eta_live.bytes_left_s(550 * GB, 550 * GB, 1.1 * GB) is None


def test_a_share_done_gives_the_rest_at_the_same_pace_once_it_says_anything():
    assert eta_live.fraction_left_s(0.25, 100.0) == pytest.approx(300)
    assert eta_live.fraction_left_s(0.01, 100.0) is None              # under MIN_FRACTION
    assert eta_live.fraction_left_s(1.0, 100.0) is None
    assert eta_live.loaded_fraction(30000, 10000, 80000) == pytest.approx(0.25)
    assert eta_live.loaded_fraction(200000, 10000, 80000) == 1.0
    assert eta_live.loaded_fraction(None, 10000, 80000) is None and eta_live.loaded_fraction(1, 0, 0) is None


def test_a_young_measure_is_blended_with_the_history_and_counts_alone_once_it_has_aged():
    assert eta_live.live_weight(0.0) == 0.0
    assert eta_live.live_weight(eta_live.MIN_RATE_S) == pytest.approx(0.5)
    assert eta_live.live_weight(10 * eta_live.MIN_RATE_S) == 1.0
    assert eta_live.blend(100.0, 300.0, 0.5) == pytest.approx(200)
    assert eta_live.blend(None, 300.0, 0.1) == 300.0 and eta_live.blend(100.0, None, 0.9) == 100.0


def test_the_range_is_narrow_for_the_measured_part_and_wide_for_the_part_from_history():
    low, high = eta_live.spread(100.0, 200.0)
    assert low == pytest.approx(100 * (1 - eta_live.LIVE_SPREAD) + 200 * eta_live.GUESS_LOW)
    assert high == pytest.approx(100 * (1 + eta_live.LIVE_SPREAD) + 200 * eta_live.GUESS_HIGH)
    assert eta_live.spread(None, None) == (0.0, 0.0)


# A warm start's weight load: 40 s filling 600 000 MiB of GPU memory, reading nothing
WARM = {"outcome": "ready", "ready_after_s": 160.0, "phases": [
    {"phase": "distributed_init", "started_s": 0.0, "duration_s": 20.0, "read_bytes": 0, "gpu_mem_mib": 8000},
    {"phase": "weight_load", "started_s": 20.0, "duration_s": 40.0, "read_bytes": 0, "gpu_mem_mib": 608000},
    {"phase": "post_load", "started_s": 60.0, "duration_s": 100.0, "read_bytes": 0, "gpu_mem_mib": 700000}]}


def test_a_cold_start_after_a_warm_one_follows_the_gpu_memory_its_load_fills():
    assert loaded_mib(WARM) == 600000
    est = EtaEstimator([WARM])                                 # no load conditions: no residency read
    est.update(a(10, "distributed_init", gpu_mem_used_mib=8000, read_bytes=0))
    est.update(a(20, "weight_load", gpu_mem_used_mib=8000, read_bytes=0))
    e = est.update(a(170, "weight_load", gpu_mem_used_mib=158000, read_bytes=140 * GB))
    # a quarter of the weights on the GPUs after 150 s: 450 s more, then the usual 100 s
    assert e.phase_basis == "gpu_memory" and e.phase_remaining_s == pytest.approx(450)
    assert e.remaining_s == pytest.approx(550)
    assert e.remaining_low_s == pytest.approx(0.7 * 450 + eta_live.GUESS_LOW * 100)
    assert e.text() == "ETA 9m10s (5m55s-13m05s, usual 2m40s)"


def test_a_phase_no_earlier_start_went_through_takes_the_history_s_time_after_its_load():
    history = ready_start(("starting", 10), ("weight_load", 5), ("kv_cache", 165), ("http_server", 5))
    # SGLang named this start's long phase otherwise
    e = estimate_after(history, (5, "starting"), (10, "weight_load"), (20, "cuda_graph"), (60, "cuda_graph"))
    # no time of its own in the history: overdue from the start, as long again as it has run (40 s)
    # plus http_server's 5 s; but the history's work lay ahead of it, so the history's time after
    # its load is the point: 170 s less the 40 s spent
    assert e.phase_basis == "overdue" and e.overdue_s == pytest.approx(40) and e.usual_phase_s == 0.0
    assert e.remaining_s == pytest.approx(130)
    assert (e.remaining_low_s, e.remaining_high_s) == (pytest.approx(5), pytest.approx(130))
    assert e.text() == "ETA 5s-2m10s (cuda_graph: 40s so far, no time in earlier starts; start usual 3m05s)"


def test_a_phase_no_earlier_start_went_through_is_not_given_the_time_a_late_peer_cost_the_history():
    # the history waited 220 s for a peer in its rendezvous; this start's peers were on time
    history = ready_start(("distributed_init", 220), ("weight_load", 5), ("kv_cache", 20), ("http_server", 5))
    e = estimate_after(history, (0, "distributed_init"), (5, "weight_load"), (10, "cuda_graph"), (40, "cuda_graph"))
    # as long again as it has run (30 s) and http_server's 5 s; the history's time from here
    # (250 s less the 10 s before this phase and the 5 s ahead) would count the peer's wait
    assert e.remaining_s == pytest.approx(35)
    assert e.remaining_high_s == pytest.approx(65)


def test_past_the_load_the_history_s_time_after_its_load_is_a_second_guess_when_work_moves_between_phases():
    # the history spent its long stretch in the KV cache setup; this start's KV cache setup is
    # short, so its long stretch comes in another phase: the phases ahead alone would say 90 s
    history = ready_start(("weight_load", 60), ("kv_cache", 1300), ("cuda_graph", 90), ("http_server", 10))
    e = estimate_after(history, (0, "weight_load"), (60, "kv_cache"), (80, "cuda_graph"), (100, "cuda_graph"))
    by_phases = 70 + 10                                    # 90 s usual less 20 s, then http_server
    left = 1400 - 40                                       # 1400 s after the load, 40 s of it spent
    assert e.remaining_s == pytest.approx((by_phases + left) / 2)
    assert e.remaining_low_s <= by_phases and e.remaining_high_s >= left


def test_without_history_or_a_shard_bar_the_load_is_the_model_s_size_filling_the_gpus():
    from ansible_collections.sglang_ops.serving.plugins.module_utils.records.eta import LoadConditions
    est = EtaEstimator([], LoadConditions(model_bytes=100 * 2**30, resident_bytes=100 * 2**30))
    est.update(a(0, "distributed_init", gpu_mem_used_mib=4096, read_bytes=0))
    est.update(a(10, "weight_load", gpu_mem_used_mib=4096, read_bytes=0))
    e = est.update(a(50, "weight_load", gpu_mem_used_mib=4096 + 25 * 1024, read_bytes=0))
    # a quarter of 100 GiB on the GPUs after 40 s: 120 s more; nothing known of the rest
    assert e.phase_basis == "gpu_memory" and e.phase_remaining_s == pytest.approx(120)
    assert e.text() == "weight_load ends in ~2m00s (no earlier start for the rest)"


def _long_phase_history(post_load_s, cuda_graph_s):
    return ready_start(("weight_load", 40), ("post_load", post_load_s), ("kv_cache", 20), ("cuda_graph", cuda_graph_s),
                       ("http_server", 10))


def test_an_overdue_phase_whose_history_did_its_long_work_later_is_that_work_moved_here():
    e = estimate_after(_long_phase_history(60, 1040), (0, "weight_load"), (40, "post_load"), (100, "kv_cache"),
                       (500, "kv_cache"))                   # 20 s usual, 400 s in
    as_long_again = 380 + 1040 + 10                          # its overrun again, then the phases ahead
    left = 1130 - 460                                        # the history's time after its load, less 460 s
    moved = 1050 / (1050 + 20.0)                             # the history's work ahead of this phase
    assert e.remaining_s == pytest.approx(moved * left + (1 - moved) * as_long_again)
    assert e.remaining_low_s == pytest.approx(left) and e.remaining_high_s == pytest.approx(1050 + 2 * 380)


def test_an_overdue_phase_that_was_the_history_s_long_work_runs_as_long_again():
    e = estimate_after(_long_phase_history(2700, 90), (0, "weight_load"), (40, "post_load"),
                       (2840, "post_load"))                 # 2700 s usual, 2800 s in
    as_long_again = 1350 + 120                               # half its usual at least, then the phases ahead
    left = 2820 - 2800
    moved = 120 / (120 + 2700.0)
    assert e.remaining_s == pytest.approx(moved * left + (1 - moved) * as_long_again)
    assert e.remaining_s > 0.9 * as_long_again
