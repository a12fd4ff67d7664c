"""The time-to-ready estimate: the current phase at its own rate, plus the usual phases ahead."""
import re

import pytest

from ansible_collections.sglang_ops.serving.plugins.module_utils.records.eta import (
    MAX_ESTIMATE_S, PAGE_CACHE_LOAD_BPS, EtaEstimator, LoadConditions, slower_than_usual, usual_phase_s, WEIGHT_CACHE_ATTACH_S)
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.progress_line import progress_line
from ansible_collections.sglang_ops.serving.plugins.module_utils.records.eta_live import GUESS_HIGH, GUESS_LOW

GB = 10**9


def record(*phases, ready=None):
    """A start record of (phase, seconds[, bytes read]) in order."""
    out, began = [], 0.0
    for p in phases:
        out.append({"phase": p[0], "started_s": began, "duration_s": float(p[1]),
                    "read_bytes": p[2] if len(p) > 2 else 0})
        began += p[1]
    return {"outcome": "ready", "ready_after_s": ready if ready is not None else began, "phases": out}


EARLIER = record(("distributed_init", 20), ("weight_load", 500, 550 * GB), ("post_load", 70),
                 ("kv_cache", 20), ("cuda_graph", 100), ("http_server", 20), ("ready", 0))


def a(t, phase, verdict="progressing", **progress):
    return {"t": t, "phase": phase, "verdict": verdict, "reason": "", "progress": dict(progress, elapsed_s=t)}


def test_a_silent_phase_counts_down_from_its_usual_duration_plus_the_phases_ahead():
    est = EtaEstimator([EARLIER])
    est.update(a(10, "distributed_init"))
    est.update(a(20, "weight_load"))
    est.update(a(520, "post_load"))
    e = est.update(a(550, "post_load"))
    assert e.phase_basis == "usual"
    assert e.phase_remaining_s == pytest.approx(40)            # 70 usual - 30 spent
    assert e.remaining_s == pytest.approx(40 + 20 + 100 + 20)   # and the phases after post_load
    assert e.usual_total_s == 730


def test_the_weight_load_runs_at_its_measured_read_rate_over_the_bytes_it_read_last_time():
    est = EtaEstimator([EARLIER])
    est.update(a(10, "distributed_init", read_bytes=0))
    est.update(a(20, "weight_load", read_bytes=0))
    # half as fast as last time: 110 GB in 200 s, 440 GB left at 0.55 GB/s = 800 s
    e = est.update(a(220, "weight_load", read_bytes=110 * GB, shards_done=None, shards_total=None))
    assert e.phase_basis == "bytes"
    assert e.phase_remaining_s == pytest.approx(800)
    assert e.remaining_s == pytest.approx(800 + 70 + 20 + 100 + 20)


def test_shards_left_at_the_measured_shard_rate_come_first():
    est = EtaEstimator([EARLIER])
    est.update(a(10, "distributed_init"))
    est.update(a(20, "weight_load", shards_done=0, shards_total=64))
    e = est.update(a(120, "weight_load", shards_done=16, shards_total=64, read_bytes=0))
    assert e.phase_basis == "shards"
    assert e.phase_remaining_s == pytest.approx(300)   # 48 shards at 100 s per 16


def test_a_warm_page_cache_reads_nothing_so_the_usual_time_is_used_not_a_zero_rate():
    est = EtaEstimator([EARLIER])
    est.update(a(10, "distributed_init", read_bytes=0))
    est.update(a(20, "weight_load", read_bytes=0))
    e = est.update(a(60, "weight_load", read_bytes=4096))
    assert e.phase_basis == "usual"
    assert e.phase_remaining_s == pytest.approx(460)


def test_a_phase_past_its_usual_duration_is_overdue_and_the_estimate_becomes_a_range():
    est = EtaEstimator([EARLIER])
    est.update(a(20, "cuda_graph"))
    e = est.update(a(400, "cuda_graph"))       # 400 s in (the watch's first phase begins at 0), usual 100 s
    assert e.phase_basis == "overdue" and e.overdue_s == pytest.approx(300)
    assert e.phase_remaining_s == pytest.approx(300)                    # as long again as it overran
    assert (e.remaining_low_s, e.remaining_high_s) == (pytest.approx(20), pytest.approx(20 + 600))
    assert e.text() == "ETA 20s-10m20s (cuda_graph overdue by 5m00s, usual 1m40s; start usual 12m10s)"


def test_a_phase_just_overdue_keeps_half_its_usual_duration_not_a_confident_zero():
    est = EtaEstimator([EARLIER])
    est.update(a(10, "weight_load"))
    est.update(a(20, "post_load"))
    e = est.update(a(100, "post_load"))        # 80 s in, usual 70 s
    assert e.phase_remaining_s == pytest.approx(35)


WARM_NOW = LoadConditions(model_bytes=550 * GB, resident_bytes=550 * GB)
COLD_NOW = LoadConditions(model_bytes=550 * GB, resident_bytes=0)


def test_a_warm_start_after_a_cold_one_loads_from_memory_and_never_divides_by_its_crawling_reads():
    est = EtaEstimator([EARLIER], WARM_NOW)
    est.update(a(10, "distributed_init", read_bytes=0))
    before = est.update(a(15, "distributed_init", read_bytes=0))
    # the weight load ahead is the model from memory, not the cold 500 s of the last start
    assert before.remaining_s == pytest.approx(5 + 550 * GB / PAGE_CACHE_LOAD_BPS + 70 + 20 + 100 + 20)
    est.update(a(20, "weight_load", read_bytes=0))
    e = est.update(a(60, "weight_load", read_bytes=80 * 10**6))   # 2 MB/s of stray reads
    assert e.phase_basis == "page_cache"
    assert e.phase_remaining_s == pytest.approx(55 - 40)
    assert e.remaining_s < 300


def test_a_cold_start_after_a_warm_one_reads_the_model_at_its_own_measured_rate():
    warm = record(("distributed_init", 20), ("weight_load", 40, 0), ("post_load", 70), ("ready", 0))
    est = EtaEstimator([warm], COLD_NOW)
    est.update(a(10, "distributed_init", read_bytes=0))
    est.update(a(20, "weight_load", read_bytes=0))
    e = est.update(a(30, "weight_load", read_bytes=11 * GB))      # 1.1 GB/s, young but the only rate
    assert e.phase_basis == "bytes"
    assert e.phase_remaining_s == pytest.approx(539 / 1.1)


def test_an_attached_weight_cache_reads_nothing_from_storage():
    assert LoadConditions(model_bytes=550 * GB, resident_bytes=0, weight_cache=True).storage_bytes() == 0
    assert LoadConditions(model_bytes=550 * GB, resident_bytes=100 * GB).storage_bytes() == 450 * GB
    assert LoadConditions().storage_bytes() is None
    est = EtaEstimator([EARLIER], LoadConditions(model_bytes=550 * GB, weight_cache=True))
    est.update(a(10, "distributed_init", read_bytes=0))
    est.update(a(20, "weight_load", read_bytes=0))
    e = est.update(a(30, "weight_load", read_bytes=0))
    # the weights are mapped from the daemon, not copied from the page cache: an attach
    assert e.phase_basis == "weight_cache" and e.usual_phase_s == WEIGHT_CACHE_ATTACH_S


def test_the_storage_left_at_a_slower_disk_comes_from_the_bytes_not_the_usual_duration():
    est = EtaEstimator([EARLIER], COLD_NOW)
    est.update(a(10, "distributed_init", read_bytes=0))
    est.update(a(20, "weight_load", read_bytes=0))
    e = est.update(a(120, "weight_load", read_bytes=55 * GB))     # 0.55 GB/s, half the last rate
    assert e.phase_basis == "bytes" and e.phase_remaining_s == pytest.approx(900)


def test_no_estimate_ends_past_twice_the_longest_recorded_start():
    est = EtaEstimator([EARLIER], COLD_NOW)                       # longest: 730 s
    est.update(a(10, "distributed_init", read_bytes=0))
    est.update(a(20, "weight_load", read_bytes=0))
    e = est.update(a(220, "weight_load", read_bytes=2 * GB))      # 10 MB/s: 54 000 s left by the bytes
    assert e.remaining_s is None and e.remaining_low_s == pytest.approx(1460 - 220)
    assert e.text() == "ETA over 20m40s (longer than twice the longest earlier start, 12m10s)"
    late = est.update(a(1500, "weight_load", read_bytes=20 * GB))
    assert late.remaining_s is None and late.remaining_low_s is None and late.past_bound_s == pytest.approx(40)
    assert late.text() == "ETA unknown (overdue by 40s: 24m20s is twice the longest earlier start)"


def test_a_slow_shard_counter_does_not_grow_the_estimate_between_its_steps():
    est = EtaEstimator([EARLIER])
    est.update(a(0, "weight_load", shards_done=0, shards_total=8))
    first = est.update(a(100, "weight_load", shards_done=1, shards_total=8))
    later = est.update(a(150, "weight_load", shards_done=1, shards_total=8))
    assert first.phase_remaining_s == pytest.approx(700)
    assert later.phase_remaining_s == pytest.approx(650)


def test_without_history_a_crawling_rate_gives_no_estimate_rather_than_hours():
    est = EtaEstimator([], COLD_NOW)
    est.update(a(20, "weight_load", read_bytes=0))
    e = est.update(a(60, "weight_load", read_bytes=4 * 10**6))    # 100 kB/s
    assert e.phase_remaining_s is None and e.remaining_s is None
    fast = EtaEstimator([], COLD_NOW)
    fast.update(a(20, "weight_load", read_bytes=0))
    assert fast.update(a(60, "weight_load", read_bytes=44 * GB)).phase_remaining_s < MAX_ESTIMATE_S


def test_without_history_it_says_so_and_estimates_only_the_current_phase_from_its_rate():
    est = EtaEstimator([])
    est.update(a(10, "distributed_init"))
    est.update(a(20, "weight_load", shards_done=0, shards_total=64))
    e = est.update(a(120, "weight_load", shards_done=32, shards_total=64))
    assert e.remaining_s is None and e.phase_remaining_s == pytest.approx(100)
    assert e.text() == "weight_load ends in ~1m40s (no earlier start for the rest)"
    silent = EtaEstimator([])
    silent.update(a(10, "weight_load"))
    silent.update(a(20, "post_load"))
    assert silent.update(a(50, "post_load")).text() == "ETA unknown (no earlier start)"


def test_the_progress_line_ends_with_the_eta_its_range_and_the_usual_time():
    est = EtaEstimator([record(("weight_load", 300), ("post_load", 340))])
    est.update(a(0, "weight_load"))
    line = progress_line(a(50, "weight_load"), est.update(a(50, "weight_load")))
    # all of it from history alone: from GUESS_LOW to GUESS_HIGH times the point
    assert (GUESS_LOW, GUESS_HIGH) == (0.4, 2.0)
    assert line.endswith(" \u00b7 50s \u00b7 ETA 9m50s (3m56s-19m40s, usual 10m40s)")


def test_a_ready_start_has_nothing_left():
    est = EtaEstimator([EARLIER])
    e = est.update(a(700, "ready", verdict="ready"))
    assert e.remaining_s == 0 and e.text() == ""


def test_usual_is_the_median_of_the_history_and_slower_than_usual_needs_one_and_a_half_times():
    history = [record(("post_load", 60)), record(("post_load", 100)), record(("post_load", 80))]
    assert usual_phase_s(history) == {"post_load": 80}
    finished = record(("weight_load", 10), ("post_load", 121))["phases"]
    assert slower_than_usual(finished, history) == [("post_load", 121.0, 80)]
    assert slower_than_usual(record(("post_load", 120))["phases"], history) == []


# ---- a phase without a progress measure whose earlier starts disagree: a range ----------
SHORT_POST = record(("distributed_init", 20), ("weight_load", 500, 550 * GB), ("post_load", 40),
                    ("kv_cache", 20), ("cuda_graph", 100), ("http_server", 20), ("ready", 0))
LONG_POST = record(("distributed_init", 20), ("weight_load", 500, 550 * GB), ("post_load", 160),
                   ("kv_cache", 20), ("cuda_graph", 100), ("http_server", 20), ("ready", 0))


def test_a_silent_phase_whose_earlier_starts_disagree_is_a_range_from_the_shortest_to_the_longest():
    est = EtaEstimator([SHORT_POST, LONG_POST, EARLIER])
    est.update(a(20, "weight_load"))
    est.update(a(520, "post_load"))
    e = est.update(a(550, "post_load"))                      # 30 s in; earlier: 40, 70, 160 s
    assert e.range_reason == "history_disagrees" and e.phase_range_s == (40, 160)
    ahead = 20 + 100 + 20
    assert (e.remaining_low_s, e.remaining_high_s) == (pytest.approx(10 + ahead), pytest.approx(130 + ahead))
    assert e.remaining_s == pytest.approx(40 + ahead)         # the point stays the median's
    assert e.text() == "ETA 2m30s-4m30s (post_load took 40s-2m40s in earlier starts; usual 12m10s)"
    assert e.to_dict()["range_reason"] == "history_disagrees"
    assert "ETA 2m30s-4m30s" in progress_line(
        {"t": 550, "phase": "post_load", "verdict": "progressing", "reason": "", "progress": {"elapsed_s": 550}}, e)


def test_earlier_starts_that_agree_give_a_point_within_the_spread_of_a_guess():
    close = record(("distributed_init", 20), ("weight_load", 500, 550 * GB), ("post_load", 80),
                   ("kv_cache", 20), ("cuda_graph", 100), ("http_server", 20), ("ready", 0))
    est = EtaEstimator([EARLIER, close])                      # 70 and 80 s: within 1.5x
    est.update(a(20, "weight_load"))
    est.update(a(520, "post_load"))
    e = est.update(a(550, "post_load"))
    assert e.range_reason == "spread" and e.text().startswith("ETA ")
    assert "-" not in e.text().split()[1]                     # the point first, the range beside it
    assert (e.remaining_low_s, e.remaining_high_s) == pytest.approx((GUESS_LOW * e.remaining_s, GUESS_HIGH * e.remaining_s))


def test_a_phase_with_its_own_progress_measure_is_no_disagreement_range_but_a_measured_one():
    fast = record(("distributed_init", 20), ("weight_load", 250, 550 * GB), ("post_load", 70), ("ready", 0))
    est = EtaEstimator([EARLIER, fast], COLD_NOW)             # loads of 500 and 250 s
    est.update(a(20, "weight_load", shards_done=0, shards_total=64, read_bytes=0))
    e = est.update(a(120, "weight_load", shards_done=16, shards_total=64, read_bytes=110 * GB))
    assert e.phase_basis == "shards" and e.range_reason == "spread"
    ahead = e.remaining_s - e.phase_remaining_s               # the measured part +-30 %, the rest a guess
    assert e.remaining_low_s == pytest.approx(0.7 * e.phase_remaining_s + GUESS_LOW * ahead)
    assert e.remaining_high_s == pytest.approx(1.3 * e.phase_remaining_s + GUESS_HIGH * ahead)


def test_an_overdue_phase_says_overdue_not_disagreement():
    est = EtaEstimator([SHORT_POST, LONG_POST, EARLIER])
    est.update(a(20, "weight_load"))
    est.update(a(520, "post_load"))
    e = est.update(a(700, "post_load"))                       # 180 s in: past the median (70 s)
    assert e.range_reason == "overdue" and e.overdue_s == pytest.approx(110)


# ---- the conditions a trace records ------------------------------------------------------
def test_load_conditions_round_trip_through_their_dict_and_refuse_bad_fields():
    c = LoadConditions(model_bytes=548 * GB, resident_bytes=0, weight_cache=False, restart_kind="cold",
                       compile_caches="warm")
    assert LoadConditions.from_dict(c.to_dict()) == c
    assert LoadConditions.from_dict({}) == LoadConditions()
    assert c.words() == "0% of 548.0 GB in the page cache; cold restart; compile caches warm"
    assert LoadConditions(weight_cache=True).words().startswith("weights attached from the weight cache")
    for bad, says in (({"model_bytes": -1}, "model_bytes must be a byte count"),
                      ({"resident_bytes": True}, "resident_bytes must be a byte count"),
                      ({"weight_cache": "yes"}, "weight_cache must be true or false"),
                      ({"restart_kind": "tepid"}, "restart_kind must be one of warm, cold, cold_fallback"),
                      ({"compile_caches": 3}, "compile_caches must be one of warm, cold, partial"),
                      ({"page_cache": 1}, "unknown field(s) page_cache"), ([], "must be a JSON object")):
        with pytest.raises(ValueError, match=re.escape(says)):
            LoadConditions.from_dict(bad)
