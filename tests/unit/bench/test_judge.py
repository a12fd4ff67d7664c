"""bench/scoring/judge.py: a verdict against its trace's label (docs/trace-format.md)."""
import dataclasses

import pytest

from bench.scoring import judge as j
from bench.scoring.label import Label

from bench_fixtures import header, obs, verdict

STACKS = [{"pid": 1, "rank": 0, "frames": ["wait"]}]


def label(outcome="stalled", onset_t=100.0, poll_s=10.0, stacks=False, phase="weight_load"):
    observations = [obs(0, stacks=STACKS if stacks else None)]
    return Label.of(header(outcome, onset_t, poll_s, phase), observations)


@pytest.mark.parametrize("v", ["stalled", "failed"])
def test_acting_on_a_healthy_start_is_a_false_restart(v):
    result = j.judge(label("ready", None), verdict(v, 300.0))
    assert result.kind == j.FALSE_RESTART and result.false_restart and not result.ok


def test_a_healthy_start_declared_ready_passes_and_undecided_does_not():
    assert j.judge(label("ready", None), verdict("ready", 300.0)).ok
    assert j.judge(label("ready", None), verdict("undecided", 900.0)).kind == j.NO_READY


@pytest.mark.parametrize("outcome", ["stalled", "failed"])
def test_a_verdict_before_the_onset_is_premature_which_counts_as_a_false_restart(outcome):
    result = j.judge(label(outcome, 100.0), verdict("stalled", 99.0))
    assert result.kind == j.PREMATURE and result.false_restart


def test_a_verdict_at_the_onset_is_not_premature():
    assert j.judge(label("failed", 100.0), verdict("failed", 100.0)).ok


@pytest.mark.parametrize("poll_s, last_ok_s", [(10.0, 60.0), (29.0, 60.0), (30.0, 61.0), (45.0, 91.0)])
def test_a_failed_verdict_may_come_up_to_the_larger_of_60_s_and_two_polls_and_a_second(poll_s, last_ok_s):
    onset_t = 100.0
    assert j.judge(label("failed", onset_t, poll_s), verdict("failed", onset_t + last_ok_s)).ok
    late = j.judge(label("failed", onset_t, poll_s), verdict("failed", onset_t + last_ok_s + 0.5))
    assert late.kind == j.LATE and late.latency_s == last_ok_s + 0.5


@pytest.mark.parametrize("stacks, budget_s", [(True, 600.0), (False, 1800.0 + 2 * 10.0)])
def test_a_stall_budget_is_ten_minutes_with_stacks_and_half_an_hour_and_two_polls_without(stacks, budget_s):
    assert j.judge(label("stalled", 100.0, stacks=stacks), verdict("stalled", 100.0 + budget_s)).ok
    assert j.judge(label("stalled", 100.0, stacks=stacks), verdict("stalled", 100.0 + budget_s + 1)).kind == j.LATE


@pytest.mark.parametrize("outcome, v", [("stalled", "failed"), ("failed", "stalled")])
def test_stalled_and_failed_both_count_as_acting_on_either_fault(outcome, v):
    assert j.judge(label(outcome, 100.0), verdict(v, 110.0)).ok


def test_a_fault_not_acted_on_is_missed_or_missed_at_end_when_the_trace_ended_inside_the_budget():
    assert j.judge(label("stalled", 100.0), verdict("undecided", 3000.0), end_t=3000.0).kind == j.MISSED
    at_end = j.judge(label("stalled", 100.0), verdict("undecided", 200.0), end_t=200.0)
    assert at_end.kind == j.MISSED_AT_END and not at_end.ok


def test_the_phase_is_reported_not_required():
    wrong_phase = j.judge(label("stalled", 100.0, phase="post_load"), verdict("stalled", 110.0, "weight_load"))
    assert wrong_phase.ok and wrong_phase.phase_right is False
    assert j.judge(label("stalled", 100.0, phase="post_load"), verdict("stalled", 110.0, "post_load")).phase_right


def test_a_replay_error_is_its_own_kind():
    assert j.judge(label("ready", None), {"verdict": "error", "t": None, "reason": "boom"}).kind == j.ERROR


def test_a_fault_label_without_onset_is_refused():
    with pytest.raises(ValueError, match="onset_t"):
        Label.of(header("stalled", None), [obs(0)])


def test_a_patient_label_passes_undecided_to_the_end_but_not_a_premature_verdict():
    patient = Label.of(dict(header("stalled", 100.0, 10.0, "cuda_graph"),
                            expect={"outcome": "stalled", "onset_t": 100.0, "phase": "cuda_graph", "patient": True}),
                       [obs(0)])
    assert patient.patient
    assert j.judge(patient, verdict("undecided", 400.0), end_t=400.0).ok
    assert j.judge(patient, verdict("stalled", 300.0), end_t=400.0).ok
    assert j.judge(patient, verdict("stalled", 20.0), end_t=400.0).kind == j.PREMATURE
    # however long the recording: without the channel the fault looks like healthy work throughout
    assert j.judge(patient, verdict("undecided", 4000.0), end_t=4000.0).ok
    assert j.judge(dataclasses.replace(patient, patient=False), verdict("undecided", 4000.0), end_t=4000.0).kind == j.MISSED
    assert not j.judge(label("stalled", 100.0), verdict("undecided", 400.0), end_t=400.0).ok


def test_a_label_that_allows_a_wait_passes_a_recording_that_ends_inside_it_and_no_longer_one():
    # a node at the rendezvous waits for its peer up to the rendezvous's timeout (10 min and a grace)
    expect = {"outcome": "stalled", "onset_t": 3.6, "phase": "distributed_init", "patient_s": 627.0}
    short = Label.of(dict(header("stalled", 3.6, 5.0, "distributed_init"), expect=expect), [obs(0), obs(160.0)])
    assert short.patient
    assert j.judge(short, verdict("undecided", 160.0), end_t=160.0).ok
    assert j.judge(short, verdict("stalled", 1.0), end_t=160.0).kind == j.PREMATURE
    long = Label.of(dict(header("stalled", 3.6, 5.0, "distributed_init"), expect=expect), [obs(0), obs(700.0)])
    assert not long.patient
    assert not j.judge(long, verdict("undecided", 700.0), end_t=700.0).ok
    assert j.judge(long, verdict("failed", 635.0), end_t=700.0).ok
