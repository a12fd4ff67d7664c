"""Restart options on a supervised unit take effect or are refused before anything changes:
kill_orphans kills the leftovers before the one restart; the playbook-watch options the
supervisor decides instead (detector, max_attempts, backoff, stop timeouts) are refused,
naming each and the role variable that does the same."""
import pytest

from ansible_collections.sglang_ops.serving.plugins.plugin_utils.restart.preflight import supervised_option_problem
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.restart.restart_procedure import RestartOptions
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.restart.restart_run import RemoteStepFailed

from ansible_collections.sglang_ops.serving.tests.unit.restart.restart_fakes import (
    SUPERVISED_OPTION_DEFAULTS, SupervisedHost, holder, make_procedure)


def _supervised(tmp_path, holders=(), **changed):
    """A procedure on a supervised host whose options are the module's defaults but changed."""
    proc, host, *dummy = make_procedure(tmp_path, [], host=SupervisedHost(holders=holders))
    proc.args.update(SUPERVISED_OPTION_DEFAULTS, **changed)
    proc.options = RestartOptions(proc.args, proc.options.settings, proc.options.backoff, defaults=SUPERVISED_OPTION_DEFAULTS)
    return proc, host


def test_options_left_at_their_defaults_are_not_refused():
    assert supervised_option_problem(RestartOptions(dict(SUPERVISED_OPTION_DEFAULTS), None, None, defaults=SUPERVISED_OPTION_DEFAULTS)) is None


def test_each_ignored_option_is_named_with_the_role_variable_that_does_it():
    args = dict(SUPERVISED_OPTION_DEFAULTS, detector={"stall_idle_window_s": 40}, max_attempts=2)
    words = supervised_option_problem(RestartOptions(args, None, None, defaults=SUPERVISED_OPTION_DEFAULTS))
    assert "detector" in words and "sglang_service_supervisor_detector" in words
    assert "max_attempts" in words and "sglang_service_start_limit_burst" in words
    assert "backoff_base_s" not in words


@pytest.mark.parametrize("option, value", [("detector", {"stall_idle_window_s": 40}), ("max_attempts", 5),
                                           ("backoff_base_s", 3.0)])
def test_a_supervised_restart_refuses_an_ignored_option_before_touching_the_unit(tmp_path, option, value):
    proc, host = _supervised(tmp_path, **{option: value})
    res = proc.restart()
    assert res["failed"] and res["reason_code"] == "option_not_applicable"
    assert option in res["msg"]
    assert host.events == [] and not res["changed"]


def test_kill_orphans_kills_the_leftovers_before_the_supervised_restart(tmp_path):
    orphan = holder(555, 8000, "sglang::scheduler_TP0")
    proc, host = _supervised(tmp_path, holders=[orphan], kill_orphans=True)
    # The scripted host has no start records to follow: the run stops right after its restart.
    with pytest.raises(RemoteStepFailed):
        proc.restart()
    assert host.events == ["kill -9 555"]
    assert proc.record["preflight"]["orphans_killed"][0].startswith("PID 555")
