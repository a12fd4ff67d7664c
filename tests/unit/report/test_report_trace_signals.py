"""Series and readable log lines drawn from trace observations."""
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.shared import trace_signals as ts

from ansible_collections.sglang_ops.serving.tests.unit.report.report_fixtures import obs


def test_lines_printed_by_every_rank_at_once_fold_into_one():
    o = obs(10, log=[(5, "[2026-05-30 20:27:00 TP%d] Load weight begin. avail mem=94.52 GB" % r) for r in range(8)])
    lines = ts.log_lines([o])
    assert len(lines) == 1
    assert lines[0].render() == "TP0-7: Load weight begin. avail mem=94.52 GB"
    assert lines[0].stamp == "2026-05-30 20:27:00"


def test_the_same_text_at_different_times_stays_two_lines():
    o = obs(10, log=[(1, "[2026-05-30 20:27:00 TP0] Heartbeat"), (9, "[2026-05-30 20:27:08 TP0] Heartbeat")])
    assert [ln.t for ln in ts.log_lines([o])] == [1.0, 9.0]


def test_some_ranks_are_listed_by_name():
    o = obs(10, log=[(5, "[2026-05-30 20:27:43 TP4] boom"), (5, "[2026-05-30 20:27:43 TP1] boom")])
    assert ts.log_lines([o])[0].ranks == "TP1, TP4"


def test_blob_record_is_reduced_to_its_last_frame_and_says_it_was_a_bar():
    msg = "\rLoading safetensors checkpoint shards:   0% Completed | 0/64\rLoading safetensors checkpoint shards: 100% Completed | 64/64 [00:40<00:00]"
    line = ts.log_lines([obs(60, log=[(59.9, msg)])])[0]
    assert line.text.startswith("Loading safetensors checkpoint shards: 100%")
    assert line.frames == 2
    assert "blob data" in line.note


def test_shard_progress_reads_both_bar_families():
    assert ts.shard_progress("Loading safetensors checkpoint shards:  45% Completed | 29/64 [01:02<01:10]") == (29, 64)
    assert ts.shard_progress("Multi-thread loading shards:  50% Completed | 32/64 [00:10<00:10]") == (32, 64)
    assert ts.shard_progress("Capturing batches (bs=8 avail_mem=3.1 GB):  50%|#  | 26/52") is None


def test_rates_come_from_consecutive_observations_and_gaps_stay_gaps():
    a = obs(0, cpu_s=0.0, read_bytes=0)
    b = obs(10, cpu_s=20.0, read_bytes=50_000_000)
    c = obs(20, cpu_s=40.0)
    del c["procs"]["read_bytes"]
    s = ts.build_series([a, b, c])
    assert s.cpu_cores == [None, 2.0, 2.0]
    assert s.disk_read_mb_s == [None, 5.0, None]


def test_gpu_memory_is_averaged_over_gpus_in_gib():
    o = obs(0, gpus=2)
    o["gpus"][0]["mem_used_mib"] = 1024
    o["gpus"][1]["mem_used_mib"] = 3072
    s = ts.build_series([o])
    assert s.gpu_mem_gib_mean == [2.0]
    assert s.gpu_mem_gib_max == [3.0]
    assert round(s.gpu_mem_total_gib, 1) == 95.6


def test_missing_gpu_sample_is_a_gap_not_a_zero():
    o = obs(0)
    del o["gpus"]
    assert ts.build_series([o]).gpu_mem_gib_mean == [None]
