import pytest

from ansible_collections.sglang_ops.serving.plugins.plugin_utils.restart import retry_policy
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.failure_classes import FAILURE_CLASSES
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.restart.retry_policy import (
    HAND_OVER, READY, RESTART, Backoff, decide)


@pytest.mark.parametrize("code", sorted(FAILURE_CLASSES))
def test_first_failure_restarts_exactly_when_the_class_says_a_restart_helps(code):
    decision = decide(code, attempts_so_far=1, max_attempts=3)
    expected = RESTART if FAILURE_CLASSES[code].restart_helps else HAND_OVER
    assert decision.action == expected


def test_stall_idle_restarts_with_a_reason_naming_the_class_and_next_attempt():
    decision = decide("stall_idle", 1, 3)
    assert decision.restarts
    assert "stall_idle" in decision.reason and "attempt 2 of 3" in decision.reason


def test_spinning_gpus_are_handed_over_because_a_restart_cannot_fix_them():
    decision = decide("stall_spin", 1, 3)
    assert decision.action == HAND_OVER
    assert "cannot fix stall_spin" in decision.reason


def test_same_failure_twice_hands_over_even_with_attempts_left():
    decision = decide("stall_idle", 2, 5, earlier_codes=["stall_idle"])
    assert decision.action == HAND_OVER
    assert decision.reason == "same failure twice: stall_idle"


def test_a_different_failure_after_a_restart_is_restarted_again():
    assert decide("process_exited", 2, 3, earlier_codes=["stall_idle"]).restarts


def test_attempts_exhausted_hands_over():
    decision = decide("process_exited", 3, 3, earlier_codes=["stall_idle", "fatal_packing"])
    assert decision.action == HAND_OVER
    assert decision.reason.startswith("attempts exhausted: 3 of 3")


def test_max_attempts_one_never_restarts():
    assert decide("stall_idle", 1, 1).action == HAND_OVER


def test_unknown_code_is_handed_over_not_restarted_blind():
    assert decide("probe_error", 1, 3).action == HAND_OVER


def test_ready_is_ready():
    assert decide("ready", 1, 3).action == READY


@pytest.mark.parametrize("restart_n", [1, 2, 3, 4, 8, 30])
def test_backoff_stays_inside_its_bounds_for_extreme_jitter(restart_n):
    backoff = Backoff(base_s=10, factor=2, max_s=120, jitter_frac=0.2)
    low_s, high_s = backoff.bounds_s(restart_n)
    assert 0 <= low_s <= high_s <= 120
    for r in (0.0, 0.5, 0.999999):
        assert low_s <= backoff.delay_s(restart_n, rng=lambda: r) <= high_s


def test_backoff_grows_until_the_cap():
    backoff = Backoff(base_s=10, factor=2, max_s=120, jitter_frac=0.0)
    delays = [backoff.delay_s(n, rng=lambda: 0.5) for n in range(1, 7)]
    assert delays == [10, 20, 40, 80, 120, 120]


def test_backoff_jitter_spreads_hosts_apart():
    backoff = Backoff(base_s=10, jitter_frac=0.2)
    assert backoff.delay_s(1, rng=lambda: 0.0) == pytest.approx(8.0)
    assert backoff.delay_s(1, rng=lambda: 0.999) == pytest.approx(11.996)


@pytest.mark.parametrize("kwargs", [{"factor": 0.5}, {"jitter_frac": 1.0}, {"base_s": -1}])
def test_backoff_rejects_settings_that_would_shrink_or_go_negative(kwargs):
    with pytest.raises(ValueError):
        Backoff(**kwargs)


def test_policy_module_has_no_side_effect_imports():
    # decisions only: nothing in the policy reaches for the network, files or Ansible
    src = open(retry_policy.__file__).read()
    for forbidden in ("import os", "import subprocess", "from ansible.", "open("):
        assert forbidden not in src
