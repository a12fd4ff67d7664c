"""Check mode (playbooks/status.yml) tells what `restart` would do: the preflight decisions of
a real run on the same host and options, and on a supervised unit the one restart its
supervisor follows, assessed with the supervisor's detector settings."""
from pathlib import Path

import pytest
import yaml

from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.detector_settings import DetectorSettings
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.restart.restart_procedure import RestartOptions

from ansible_collections.sglang_ops.serving.tests.unit.restart.restart_fakes import (
    SUPERVISED_OPTION_DEFAULTS, FakeHost, ScriptedDetector, SupervisedHost, holder, make_procedure, progressing)

ROOT = Path(__file__).resolve().parents[3]


def _procedure(tmp_path, host, **changed):
    """A procedure whose options are the module's defaults but changed; the detector records
    the settings it is made with."""
    made_with = []

    def new_detector(settings, observe_only=None):
        del observe_only
        made_with.append(settings)
        return ScriptedDetector([progressing()])

    proc, host, *dummy = make_procedure(tmp_path, [], host=host, detector=new_detector)
    proc.args.update(SUPERVISED_OPTION_DEFAULTS, **changed)
    proc.options = RestartOptions(proc.args, DetectorSettings().with_overrides(proc.args["detector"]),
                                  proc.options.backoff, new_detector=new_detector, defaults=SUPERVISED_OPTION_DEFAULTS)
    return proc, host, made_with


@pytest.mark.parametrize("option, value", [("max_attempts", 5), ("detector", {"stall_idle_window_s": 40}),
                                           ("stop_timeout_s", 60.0)])
def test_check_mode_says_a_supervised_unit_would_refuse_what_a_restart_refuses(tmp_path, option, value):
    proc, host, dummy = _procedure(tmp_path / "check", SupervisedHost(), **{option: value})
    would = proc.observe_once()["would"]
    real, dummy_host, dummy = _procedure(tmp_path / "real", SupervisedHost(), **{option: value})
    refused = real.restart()
    assert refused["reason_code"] == "option_not_applicable"
    assert would == "would refuse: " + refused["reason"]
    assert host.events == []


def test_check_mode_on_a_supervised_unit_says_it_would_follow_the_supervisor(tmp_path):
    proc, host, dummy = _procedure(tmp_path, SupervisedHost())
    res = proc.observe_once()
    assert res["would"].startswith("would restart sglang-k26-ddtree once and follow its supervisor")
    assert "attempts" not in res["would"]
    assert res["supervised"] and host.events == []


def test_check_mode_on_a_supervised_unit_with_leftovers_would_refuse_them_as_a_restart_does(tmp_path):
    orphans = [holder(555, 8000, "sglang::scheduler_TP0")]
    proc, dummy_host, dummy = _procedure(tmp_path / "check", SupervisedHost(holders=orphans))
    real, dummy_host, dummy = _procedure(tmp_path / "real", SupervisedHost(holders=orphans))
    refused = real.restart()
    assert refused["reason_code"] == "orphan_processes"
    assert proc.observe_once()["would"] == "would refuse: " + refused["reason"]


def test_a_supervised_unit_is_assessed_with_the_supervisors_settings(tmp_path):
    proc, dummy_host, made_with = _procedure(tmp_path, SupervisedHost())
    supervisor = DetectorSettings().with_overrides({"stall_idle_window_s": 42})
    res = proc.observe_once(supervised_settings=supervisor)
    assert made_with == [supervisor]
    assert res["settings"]["stall_idle_window_s"] == 42


def test_an_unsupervised_unit_is_assessed_with_the_playbooks_settings(tmp_path):
    proc, dummy_host, made_with = _procedure(tmp_path, FakeHost(), detector={"stall_idle_window_s": 60})
    res = proc.observe_once(supervised_settings=DetectorSettings().with_overrides({"stall_idle_window_s": 42}))
    assert [s.stall_idle_window_s for s in made_with] == [60]
    assert res["settings"]["stall_idle_window_s"] == 60
    assert res["would"].startswith("would stop sglang-k26-ddtree") and "up to 3 attempts" in res["would"]


def test_status_runs_the_restart_task_itself_in_check_mode():
    """The same options as a restart (playbooks/tasks/sglang_restart.yml), so the same decisions."""
    [play] = yaml.safe_load((ROOT / "playbooks" / "status.yml").read_text())
    [observe] = [t for t in play["tasks"] if t.get("name") == "Observe the unit once and assess it"]
    assert observe["ansible.builtin.import_tasks"] == "tasks/sglang_restart.yml"
    assert observe["check_mode"] is True
    [task] = yaml.safe_load((ROOT / "playbooks" / "tasks" / "sglang_restart.yml").read_text())
    assert "sglang_service_supervisor_detector" in task["sglang_ops.serving.sglang_restart"]["supervisor_detector"]
