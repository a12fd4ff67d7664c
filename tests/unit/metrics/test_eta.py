"""The time-to-ready estimate: the current phase at its own rate, plus the usual phases ahead."""
import pytest

from ansible_collections.sglang_ops.serving.plugins.module_utils.eta import (
    EtaEstimator, slower_than_usual, usual_phase_s)
from ansible_collections.sglang_ops.serving.plugins.module_utils.progress_line import progress_line

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


def test_a_phase_past_its_usual_duration_has_nothing_left_but_the_phases_ahead():
    est = EtaEstimator([EARLIER])
    est.update(a(20, "cuda_graph"))
    e = est.update(a(400, "cuda_graph"))
    assert e.phase_remaining_s == 0
    assert e.remaining_s == pytest.approx(20)


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


def test_the_progress_line_ends_with_the_eta_and_the_usual_time():
    est = EtaEstimator([record(("weight_load", 300), ("post_load", 340))])
    est.update(a(0, "weight_load"))
    line = progress_line(a(50, "weight_load"), est.update(a(50, "weight_load")))
    assert line.endswith(" \u00b7 50s \u00b7 ETA 9m50s (usual 10m40s)")


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
