"""The unit's OnFailure= handler (module_utils/services/unit_failed.py): a start limit is recorded as
needing a human in the start record and the metrics file; a failure systemd restarts is not."""
import json
import os

from ansible_collections.sglang_ops.serving.plugins.module_utils.services import unit_failed
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.failure_classes import exit_code
from ansible_collections.sglang_ops.serving.plugins.module_utils.records.start_metrics import StartMetrics

UNIT = "sglang-k26-ddtree"
NAME = "20261130T110000Z-411"
NOW = 1796001000.0


def _host(tmp_path, verdict="stalled", reason_code="stall_idle"):
    starts, metrics = tmp_path / "starts", tmp_path / "metrics"
    (starts / NAME).mkdir(parents=True)
    metrics.mkdir()
    (starts / NAME / "verdict.json").write_text(json.dumps({
        "verdict": verdict, "phase": "weight_load", "reason_code": reason_code, "exit_code": 76, "restarts": 2,
        "unit": UNIT, "phase_durations": {"starting": 3.0, "weight_load": 480.0}}))
    os.symlink(NAME, str(starts / "current"))
    # What the supervisor left: its last start stalled, a restart counted, the start still "in progress".
    left = StartMetrics(UNIT, clock=lambda: NOW - 600, host="gpu-a1")
    left.start(attempt=3)
    left.observe({"t": 480.0, "phase": "weight_load", "verdict": "stalled", "final": True})
    left.restarted("stall_idle")
    (metrics / "sglang_ops_sglang_k26_ddtree.prom").write_text(left.render())
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"unit": UNIT, "host": "gpu-a1", "starts_dir": str(starts),
                                    "metrics_dir": str(metrics)}))
    return str(settings), starts, metrics


RESTARTING = {"ActiveState": "activating", "SubState": "auto-restart"}
LEFT_FAILED = {"ActiveState": "failed", "SubState": "failed"}


def _run(settings, environ, state=None):
    return unit_failed.main(["--settings", settings, UNIT + ".service"], environ=environ,
                            show=lambda u: dict(state or RESTARTING), now=lambda: NOW, sleep=lambda s: None)


def test_the_start_limit_needs_a_human_and_ends_the_watched_start(tmp_path):
    settings, starts, metrics = _host(tmp_path)
    assert _run(settings, {"MONITOR_SERVICE_RESULT": "start-limit-hit"}) == 0
    record = json.loads((starts / NAME / "verdict.json").read_text())
    assert record["needed_human"]["why"] == "start_limit"
    assert "systemctl reset-failed %s.service" % UNIT in record["needed_human"]["words"]
    assert record["verdict"] == "stalled" and record["reason_code"] == "stall_idle"   # what the start was stays
    text = (metrics / "sglang_ops_sglang_k26_ddtree.prom").read_text()
    assert 'sglang_start_in_progress{host="gpu-a1",unit="%s"} 0' % UNIT in text
    assert 'sglang_last_start_needed_human{host="gpu-a1",unit="%s"} 1' % UNIT in text
    assert 'sglang_last_start_info{host="gpu-a1",outcome="gave_up",reason_code="stall_idle",unit="%s"} 1' % UNIT in text
    assert 'sglang_last_start_attempts{host="gpu-a1",unit="%s"} 3' % UNIT in text
    assert 'sglang_restarts_total{host="gpu-a1",reason_code="stall_idle",unit="%s"} 1' % UNIT in text   # carried on
    assert "sglang_start_verdict{" not in text    # no stale "stalled" for SGLangStartStuck to read


def test_a_failure_systemd_restarts_changes_nothing(tmp_path):
    settings, starts, metrics = _host(tmp_path)
    before = (metrics / "sglang_ops_sglang_k26_ddtree.prom").read_text(), (starts / NAME / "verdict.json").read_text()
    assert _run(settings, {"MONITOR_SERVICE_RESULT": "exit-code", "MONITOR_EXIT_STATUS": str(exit_code("stall_idle"))}) == 0
    assert _run(settings, {"MONITOR_SERVICE_RESULT": "signal", "MONITOR_EXIT_STATUS": "KILL"}) == 0
    after = (metrics / "sglang_ops_sglang_k26_ddtree.prom").read_text(), (starts / NAME / "verdict.json").read_text()
    assert after == before


def test_on_systemd_252_a_refused_restart_keeps_result_exit_code_and_is_the_start_limit(tmp_path):
    # "Start request repeated too quickly", then "Failed with result 'exit-code'" (seen on the
    # Debian 12 test host): the last start's restartable status, and no restart coming
    settings, starts, metrics = _host(tmp_path)
    environ = {"MONITOR_SERVICE_RESULT": "exit-code", "MONITOR_EXIT_STATUS": str(exit_code("stall_idle"))}
    assert _run(settings, environ, state=LEFT_FAILED) == 0
    assert json.loads((starts / NAME / "verdict.json").read_text())["needed_human"]["why"] == "start_limit"
    assert 'sglang_last_start_needed_human{host="gpu-a1",unit="%s"} 1' % UNIT in \
        (metrics / "sglang_ops_sglang_k26_ddtree.prom").read_text()


def test_a_restart_that_shows_late_is_still_a_restart():
    states = iter([LEFT_FAILED, LEFT_FAILED, RESTARTING])
    assert unit_failed.restart_coming(UNIT, show=lambda u: next(states), sleep=lambda s: None)
    assert not unit_failed.restart_coming(UNIT, show=lambda u: LEFT_FAILED, sleep=lambda s: None)


def test_a_failure_a_restart_cannot_help_is_marked_in_the_record_and_the_metrics_are_the_supervisors(tmp_path):
    settings, starts, metrics = _host(tmp_path, verdict="failed", reason_code="fatal_oom")
    before = (metrics / "sglang_ops_sglang_k26_ddtree.prom").read_text()
    assert _run(settings, {"MONITOR_SERVICE_RESULT": "exit-code", "MONITOR_EXIT_STATUS": str(exit_code("fatal_oom"))}) == 0
    assert json.loads((starts / NAME / "verdict.json").read_text())["needed_human"]["why"] == "no_restart"
    assert (metrics / "sglang_ops_sglang_k26_ddtree.prom").read_text() == before


def test_without_systemds_variables_the_result_is_read_from_the_unit(tmp_path):
    settings, starts, dummy = _host(tmp_path)
    asked = []
    rc = unit_failed.main(["--settings", settings, UNIT + ".service"], environ={},
                          show=lambda u: asked.append(u) or {"Result": "start-limit-hit", "ExecMainStatus": "76"},
                          now=lambda: NOW, sleep=lambda s: None)
    assert rc == 0 and asked == [UNIT + ".service"]
    assert json.loads((starts / NAME / "verdict.json").read_text())["needed_human"]["why"] == "start_limit"


def test_needs_human_tells_the_start_limit_from_a_failure_that_is_restarted():
    assert unit_failed.needs_human("start-limit-hit", None) == "start_limit"
    assert unit_failed.needs_human("exit-code", exit_code("fatal_oom")) == "no_restart"
    assert unit_failed.needs_human("exit-code", exit_code("stall_idle")) is None
    assert unit_failed.needs_human("exit-code", exit_code("stall_idle"), restart_coming=False) == "start_limit"
    assert unit_failed.needs_human("success", 0, restart_coming=False) is None
    assert unit_failed.needs_human("watchdog", None) is None
    assert unit_failed.needs_human("timeout", None) is None


def test_bad_settings_or_usage_are_refused_with_their_status(tmp_path, capsys):
    bad = tmp_path / "s.json"
    bad.write_text('{"unit": "x", "nonsense": 1}')
    assert unit_failed.main(["--settings", str(bad), "x.service"], environ={}) == 64
    assert unit_failed.main(["x.service"], environ={}) == 2
    assert "unknown setting(s)" in capsys.readouterr().err


def test_a_start_stopped_while_on_call_holds_the_unit_pages_nobody_and_ends_the_watch(tmp_path, monkeypatch, capsys):
    """The hold's Restart=no leaves the unit failed; the handler reads the hold drop-in, ends
    the start in the metrics without a human needed, and marks nothing in the record."""
    settings, starts, metrics = _host(tmp_path)
    hold = tmp_path / "sglang-ops-hold.conf"
    hold.write_text("[Unit]\n")
    monkeypatch.setattr(unit_failed, "hold_path", lambda unit: str(hold))
    assert _run(settings, {"MONITOR_SERVICE_RESULT": "exit-code", "MONITOR_EXIT_STATUS": "76"}, LEFT_FAILED) == 0
    record = json.loads((starts / NAME / "verdict.json").read_text())
    assert "needed_human" not in record
    text = (metrics / "sglang_ops_sglang_k26_ddtree.prom").read_text()
    assert 'sglang_start_in_progress{host="gpu-a1",unit="%s"} 0' % UNIT in text
    assert 'sglang_last_start_needed_human{host="gpu-a1",unit="%s"} 0' % UNIT in text
    assert "while on-call holds it (%s)" % hold in capsys.readouterr().err
    hold.unlink()   # released: the same failure is a start limit again
    assert _run(settings, {"MONITOR_SERVICE_RESULT": "exit-code", "MONITOR_EXIT_STATUS": "76"}, LEFT_FAILED) == 0
    assert json.loads((starts / NAME / "verdict.json").read_text())["needed_human"]["why"] == "start_limit"
