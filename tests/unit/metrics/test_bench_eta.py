"""bench/eta.py's pairs: each change does to a start what it claims, and the judge can fail."""
import importlib.util
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
COLD = os.path.join(ROOT, "tests", "traces", "corpus", "healthy_cold_cache_silent.jsonl")


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_eta", os.path.join(ROOT, "bench", "eta.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def cold(bench):
    header, observations = bench.read_trace(COLD)
    record = bench.record_from_trace(header, observations)
    versions, model_bytes = bench.starts_of(header, observations, record)
    return record, {k: bench.record_from_trace(*v) for k, v in versions.items()}, model_bytes


def phase(record, name):
    return next(p for p in record["phases"] if p["phase"] == name)


def test_a_warm_page_cache_reads_nothing_in_the_weight_load_and_loads_at_the_corpus_warm_rate(bench, cold):
    record, versions, model_bytes = cold
    warm = versions["warm"]
    assert warm["outcome"] == "ready"
    assert phase(warm, "weight_load")["read_bytes"] < bench.MIN_PHASE_BYTES
    assert phase(warm, "weight_load")["duration_s"] == pytest.approx(model_bytes / bench.WARM_LOAD_BPS, abs=10)
    assert phase(warm, "post_load")["duration_s"] == phase(record, "post_load")["duration_s"]
    assert bench.conditions(warm, model_bytes).storage_bytes() == 0
    assert bench.conditions(record, model_bytes).storage_bytes() == model_bytes


def test_a_slower_disk_reads_the_same_bytes_over_twice_the_time(cold):
    record, versions, model_bytes = cold
    slow, load = phase(versions["slow_disk"], "weight_load"), phase(record, "weight_load")
    assert slow["duration_s"] == pytest.approx(2 * load["duration_s"], abs=10)
    assert slow["read_bytes"] == pytest.approx(load["read_bytes"], rel=0.01)


def test_a_post_load_twice_as_long_changes_that_phase_alone(cold):
    record, versions, model_bytes = cold
    longer = versions["post_load_x2"]
    assert phase(longer, "post_load")["duration_s"] == pytest.approx(2 * phase(record, "post_load")["duration_s"], abs=10)
    assert phase(longer, "weight_load")["duration_s"] == phase(record, "weight_load")["duration_s"]


class Said:
    def __init__(self, remaining_s=None, remaining_low_s=None, past_bound_s=None, phase_basis="usual"):
        self.remaining_s, self.remaining_low_s, self.past_bound_s = remaining_s, remaining_low_s, past_bound_s
        self.phase_basis = phase_basis


def test_the_judge_fails_an_estimate_more_than_3x_off_or_past_twice_the_longest_start(bench):
    ready_s, longest_s = 400.0, 300.0
    estimates = [(100.0, Said(remaining_s=1000.0)), (200.0, Said(remaining_s=50.0)), (300.0, Said(remaining_s=100.0))]
    problems = [row[4] for row in bench.judge(estimates, ready_s, longest_s)]
    assert problems == ["past 2x the longest start", "4.0x off", None]
    # a phase counting its own share done (the GPU memory a load fills) may end past the bound
    paced = [(100.0, Said(remaining_s=800.0, phase_basis="gpu_memory"))]
    assert [row[4] for row in bench.judge(paced, 1000.0, 300.0)] == [None] * 3


def test_the_judge_takes_a_bound_for_what_it_says(bench):
    rows = bench.judge([(100.0, Said(remaining_low_s=500.0)), (200.0, Said(remaining_low_s=100.0)),
                        (300.0, Said(past_bound_s=10.0))], 400.0, 100.0)
    assert [row[4] for row in rows] == ["wrong bound", None, None]
