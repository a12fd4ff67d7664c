"""bench/eta_pairs.py (`make bench-eta`): the pairs carry no load conditions, the split keeps
a recording on one side, and the judge of the line's range can fail."""
import importlib.util
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


@pytest.fixture(scope="module")
def bench():
    sys.path.insert(0, os.path.join(ROOT, "bench"))
    spec = importlib.util.spec_from_file_location("bench_eta_pairs", os.path.join(ROOT, "bench", "eta_pairs.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Said:
    def __init__(self, remaining_s=None, low=None, high=None, past_bound_s=None, bound_s=None):
        self.remaining_s, self.remaining_low_s, self.remaining_high_s = remaining_s, low, high
        self.past_bound_s, self.bound_s = past_bound_s, bound_s


def test_the_conditions_and_the_live_estimates_are_removed_from_header_and_lines(bench):
    header = {"name": "x", "load_conditions": {"model_bytes": 1}, "poll_s": 10}
    lines = [{"t": 1, "load_conditions": {"model_bytes": 1}, "eta": {"remaining_s": 5}, "procs": {}}]
    h, obs = bench.without_conditions(header, lines)
    assert h == {"name": "x", "poll_s": 10} and obs == [{"t": 1, "procs": {}}]
    assert "load_conditions" in header                         # the recording itself is left alone


def test_the_range_holds_the_true_time_or_not(bench):
    assert bench.inside(Said(100, 60, 200), 0, 150, 1000)
    assert not bench.inside(Said(100, 60, 200), 0, 250, 1000)
    assert not bench.inside(Said(100), 0, 150, 1000)           # a point is its own range
    assert bench.inside(Said(low=300), 0, 400, 1000)            # "ETA over 5m00s", 400 s left
    assert not bench.inside(Said(low=300), 0, 200, 1000)
    assert bench.inside(Said(past_bound_s=10, bound_s=500), 510, 490, 1000)


def test_pairs_of_another_setup_are_told_apart_and_a_recording_stays_on_one_side(bench):
    def rec(load_end, ready):
        return {"ready_after_s": ready, "phases": [{"phase": "weight_load", "started_s": 0, "duration_s": load_end}]}
    assert bench.same_setup(rec(100, 400), rec(500, 1000))     # 300 and 500 s after the load
    assert not bench.same_setup(rec(40, 270), rec(40, 3260))   # a 50-minute autotune against none
    pairs = bench.pairs()
    sides = {}
    for split, source, kind, *rest in pairs:
        if not kind.startswith("after ") and split != "other setup":
            sides.setdefault(source, set()).add(split)
    assert sides and all(len(s) == 1 for s in sides.values())
    assert {"tuning", "held-out", "other setup"} <= {p[0] for p in pairs}
    assert all("load_conditions" not in p[4] for p in pairs)
