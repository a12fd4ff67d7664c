"""bench/scoring/perturbations.py: each perturbation does what its name says, on a
trace built in the test, and every variant of the repository's traces meets the format."""
import glob
import os
import random

import pytest

from bench.scoring import perturbations as p
from bench.scoring.runs import recorded_runs, variant_runs

from bench_fixtures import header, obs

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
STACKS = [{"pid": 1, "rank": 0, "frames": ["wait"]}]


def trace(n=10, poll_s=10.0):
    observations = [obs(i * poll_s, log=[(i * poll_s - 1, "[2026-01-01 00:00:%02d TP0] line %d" % (i, i))])
                    for i in range(n)]
    observations[min(3, n - 1)]["stacks"] = STACKS
    return header(poll_s=poll_s, onset_t=45.0), observations


def apply(name, h, observations, seed=0):
    return p.PERTURBATIONS[name](h, observations, random.Random(seed))


def all_records(observations):
    return [r for o in observations for r in o.get("log", [])]


@pytest.mark.parametrize("every", [2, 3])
def test_resample_keeps_every_nth_observation_and_the_last_and_multiplies_the_poll(every):
    h, observations = trace(10)
    h2, out = apply("resample%dx" % every, h, observations)
    assert h2["poll_s"] == 10.0 * every
    assert out[-1]["t"] == observations[-1]["t"]
    kept = [o["t"] for o in out[:-1]]
    assert len({(t / 10.0) % every for t in kept}) == 1 and len(out) <= 10 // every + 2
    assert all_records(out) == all_records(observations)   # nothing the journal said is lost


def test_a_dropped_observation_hands_its_records_and_stacks_to_the_next_kept_one():
    h, observations = trace(6)
    out = p.keep_only(observations, [0, 1, 2, 4, 5])
    assert [o["t"] for o in out] == [0.0, 10.0, 20.0, 40.0, 50.0]
    assert [r["msg"][-6:] for r in out[3]["log"]] == ["line 3", "line 4"]
    assert out[3]["stacks"] == STACKS


def test_drop15_drops_15_percent_never_the_last_and_keeps_the_poll():
    h, observations = trace(21)
    h2, out = apply("drop15", h, observations)
    assert len(out) == 21 - 3 and out[-1]["t"] == 200.0 and h2["poll_s"] == 10.0
    assert all_records(out) == all_records(observations)


def test_jitter_moves_times_within_a_fifth_of_a_poll_in_order_and_never_across_the_onset():
    h, observations = trace(20)
    for seed in range(20):
        _, out = apply("jitter20", h, observations, seed)
        times = [o["t"] for o in out]
        assert times == sorted(times) and len(set(times)) == len(times)
        for before, after in zip(observations, out):
            assert abs(after["t"] - before["t"]) <= 0.2 * 10.0 + 1e-3
            assert after["t"] >= max(r["t"] for r in before["log"])   # not before a record it reports
            if before["t"] >= 45.0:
                assert after["t"] >= 45.0
            assert {k: v for k, v in after.items() if k != "t"} == {k: v for k, v in before.items() if k != "t"}
    assert any(a["t"] != b["t"] for a, b in zip(out, observations))


def test_split_lines_cuts_each_record_in_the_middle_flagging_the_first_part_line_max():
    h, observations = trace(2)
    _, out = apply("split_lines", h, observations)
    msg = observations[1]["log"][0]["msg"]
    first, rest = out[1]["log"]
    assert first == {"t": 9.0, "msg": msg[:len(msg) // 2], "line_break": "line-max"}
    assert rest == {"t": 9.0, "msg": msg[len(msg) // 2:]}


def test_split_lines_rand_cuts_between_30_and_70_percent_and_keeps_the_text():
    h, observations = trace(10)
    _, out = apply("split_lines_rand", h, observations)
    for before, after in zip(observations, out):
        msg = before["log"][0]["msg"]
        first, rest = after["log"]
        assert first["msg"] + rest["msg"] == msg and first["line_break"] == "line-max"
        assert 0.3 * len(msg) - 1 <= len(first["msg"]) <= 0.7 * len(msg)


def test_no_gpu_and_no_stacks_remove_only_their_readings():
    h, observations = trace(5)
    _, no_gpu = apply("no_gpu", h, observations)
    assert all("gpus" not in o and "gpu_procs" not in o and "procs" in o for o in no_gpu)
    _, no_stacks = apply("no_stacks", h, observations)
    assert not any("stacks" in o for o in no_stacks) and all("gpus" in o for o in no_stacks)


def test_shift_moves_every_time_the_records_and_the_onset():
    h, observations = trace(3)
    h2, out = apply("shift1e9", h, observations)
    assert h2["expect"]["onset_t"] == 45.0 + 1e9
    assert [o["t"] for o in out] == [t + 1e9 for t in (0.0, 10.0, 20.0)]
    assert [r["t"] for r in all_records(out)] == [r["t"] + 1e9 for r in all_records(observations)]


def test_dup_samples_repeats_each_observation_at_its_time_without_its_records():
    h, observations = trace(3)
    _, out = apply("dup_samples", h, observations)
    assert [o["t"] for o in out] == [0.0, 0.0, 10.0, 10.0, 20.0, 20.0]
    assert out[1]["log"] == [] and out[0]["log"] == observations[0]["log"]
    assert {k: v for k, v in out[1].items() if k != "log"} == {k: v for k, v in out[0].items() if k != "log"}


def test_every_variant_is_named_and_leaves_the_recorded_trace_untouched():
    h, observations = trace(8)
    before = repr((h, observations))
    for name in p.PERTURBATIONS:
        h2, _ = apply(name, h, observations)
        assert "+" in h2["name"] and "[perturbed: " in h2["description"]
    assert repr((h, observations)) == before


def test_a_variant_is_the_same_for_the_same_seed_and_differs_for_another():
    h, observations = trace(30)
    assert apply("drop15", h, observations, 1) == apply("drop15", h, observations, 1)
    assert apply("drop15", h, observations, 1) != apply("drop15", h, observations, 2)


def test_every_variant_of_the_repositorys_traces_meets_the_trace_format(tmp_path):
    folders = [os.path.join(ROOT, "tests", "traces", "corpus"), os.path.join(ROOT, "tests", "traces", "real")]
    recorded = recorded_runs(folders)
    assert len(recorded) == sum(len(glob.glob(os.path.join(f, "*.jsonl"))) for f in folders) >= 14
    variants, refused = variant_runs(recorded, list(p.PERTURBATIONS), 0, str(tmp_path))
    assert refused == []
    assert len(variants) == len(recorded) * len(p.PERTURBATIONS)


def test_no_gpu_marks_a_trace_patient_only_when_its_expect_says_so():
    h, observations = trace(5)
    plain, _ = apply("no_gpu", h, observations)
    assert "patient" not in plain["expect"]
    h["expect"]["without_gpu"] = "patient"
    blind, _ = apply("no_gpu", h, observations)
    assert blind["expect"]["patient"] is True
    no_stacks, _ = apply("no_stacks", h, observations)
    assert "patient" not in no_stacks["expect"]
    h["expect"]["without_stacks"] = "patient"
    no_stacks, _ = apply("no_stacks", h, observations)
    assert no_stacks["expect"]["patient"] is True
