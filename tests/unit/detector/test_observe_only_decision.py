"""Rule 4's memory: when do the earlier starts make the next one observe-only."""
import dataclasses

import pytest

from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.observe_only_decision import ObserveOnly, observe_only_from_starts


def rec(verdict, code, phase, **extra):
    return dict({"verdict": verdict, "reason_code": code, "phase": phase}, **extra)


def test_two_stalls_in_the_same_phase_make_the_next_start_observe_only():
    got = observe_only_from_starts([rec("stalled", "stall_idle", "weight_load"), rec("stalled", "stall_idle", "weight_load")])
    assert got == ObserveOnly(1800.0, "the last 2 starts ended stalled (stall_idle) in weight_load", "stalled",
                              "stall_idle", "weight_load")


def test_stall_signatures_are_one_family_but_failures_are_their_own_code():
    stalls = [rec("stalled", "stall_wait_stacks", "post_load"), rec("stalled", "stall_idle", "post_load")]
    assert observe_only_from_starts(stalls).why == "the last 2 starts ended stalled (stall_idle, then stall_wait_stacks) in post_load"
    fails = [rec("failed", "fatal_oom", "cuda_graph"), rec("failed", "fatal_cuda_graph", "cuda_graph")]
    assert observe_only_from_starts(fails) is None
    assert observe_only_from_starts([rec("failed", "fatal_error", "warmup")] * 2).reason_code == "fatal_error"


def test_a_different_phase_or_verdict_is_not_a_repeat():
    assert observe_only_from_starts([rec("stalled", "stall_idle", "weight_load"), rec("stalled", "stall_idle", "post_load")]) is None
    assert observe_only_from_starts([rec("stalled", "stall_idle", "post_load"), rec("failed", "fatal_error", "post_load")]) is None


def test_a_ready_start_in_between_breaks_the_chain():
    starts = [rec("stalled", "stall_idle", "kv_cache"), rec("ready", "ready", "ready"), rec("stalled", "stall_idle", "kv_cache")]
    assert observe_only_from_starts(starts) is None


def test_dead_processes_and_operator_stops_do_not_count_and_do_not_break_the_chain():
    starts = [rec("stalled", "stall_spin", "distributed_init"), rec("failed", "process_exited", "distributed_init"),
              rec("stopped", None, "distributed_init"), rec("interrupted", None, "distributed_init"),
              rec("running", None, "distributed_init"),
              rec("failed", "fatal_oom", "distributed_init", rule="rule 1: lethal line confirmed by the process exiting"),
              rec("stalled", "stall_spin", "distributed_init")]
    assert observe_only_from_starts(starts).verdict == "stalled"


def test_one_counting_start_is_not_enough():
    assert observe_only_from_starts([rec("stalled", "stall_idle", "post_load")]) is None
    assert observe_only_from_starts([]) is None


def test_the_ceiling_is_a_multiple_of_the_usual_start_and_never_below_the_floor():
    starts = [rec("stalled", "stall_idle", "post_load")] * 2
    assert observe_only_from_starts(starts, usual_ready_s=900.0).ceiling_s == 2700.0
    assert observe_only_from_starts(starts, usual_ready_s=300.0).ceiling_s == 1800.0
    assert observe_only_from_starts(starts, usual_ready_s=300.0, min_ceiling_s=600.0, ceiling_factor=4.0).ceiling_s == 1200.0


def test_the_answer_is_frozen_and_bad_records_fail_loud():
    got = observe_only_from_starts([rec("stalled", "stall_idle", "post_load")] * 2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        got.ceiling_s = 1.0
    with pytest.raises(ValueError, match="mapping"):
        observe_only_from_starts(["stalled"])
