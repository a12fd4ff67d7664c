"""A run that ended because the restarts were used up tells on-call not to restart again:
systemd's start limit (supervised) says how to clear it once the cause is fixed; attempts
exhausted (the playbook's own watch) says to fix the cause first."""
import json

from ansible_collections.sglang_ops.serving.plugins.plugin_utils.report.incident_report import (
    write_incident_report, write_trace_report)
from ansible_collections.sglang_ops.serving.tests.unit.report.report_fixtures import HEADER, assessment, obs, write_trace

T0 = 1796000000.0


def _report(tmp_path, because, code="fatal_error", attempts=3):
    run = tmp_path / "artifacts" / "gpu-a1" / "20261130T000000Z"
    rows = []
    for n in range(1, attempts + 1):
        (run / ("attempt-%d" % n)).mkdir(parents=True)
        write_trace(str(run / ("attempt-%d" % n) / "trace.jsonl"), HEADER, [obs(t) for t in (0, 10, 20)],
                    [assessment(0, "weight_load", "progressing", "loading"),
                     assessment(10, "weight_load", "progressing", "loading"),
                     assessment(20, "weight_load", "failed", code, "Traceback: RuntimeError")])
        rows.append({"n": n, "trace": "attempt-%d/trace.jsonl" % n, "verdict": "failed", "phase": "weight_load",
                     "reason_code": code, "reason": "Traceback: RuntimeError", "t": 20.0,
                     "action": "handed_over" if n == attempts else "restarted by systemd",
                     "started_epoch_s": T0 + 100 * n})
    (run / "run.json").write_text(json.dumps({
        "host": "gpu-a1", "unit": "sglang-k26-ddtree", "started": "2026-11-30T00:00:00Z", "outcome": "gave_up",
        "phase": "weight_load", "reason_code": code, "gave_up_because": because, "attempts": rows}))
    with open(write_incident_report(str(run))["markdown"], encoding="utf-8") as fh:
        return fh.read()


def _next(md):
    return md.split("## What to do next", 1)[1].split("## Evidence", 1)[0]


def test_a_start_limit_says_fix_the_cause_then_clear_the_limit_not_one_more_restart(tmp_path):
    md = _next(_report(tmp_path, "systemd left sglang-k26-ddtree failed/start-limit-hit: systemd's start "
                                 "limit (StartLimitBurst) was reached"))
    assert "worth trying" not in md
    assert "Does a restart help? no — not again" in md
    assert "start limit stopped the restarts" in md
    assert "systemctl reset-failed sglang-k26-ddtree" in md          # the start-limit section's steps
    assert "runbook.md#unit-start-limit" in md and "runbook.md#fatal_error" in md
    assert md.index("start limit stopped") < md.index("From the runbook, [fatal_error")


def test_attempts_used_up_say_no_restart_without_the_start_limit_steps(tmp_path):
    md = _next(_report(tmp_path, "attempts exhausted: 3 of 3 used, last process_exited", code="process_exited"))
    assert "worth trying" not in md and "Does a restart help? no — not again" in md
    assert "reset-failed" not in md


def test_a_first_failure_a_restart_can_help_still_says_so(tmp_path):
    trace = tmp_path / "trace.jsonl"
    write_trace(str(trace), HEADER, [obs(t) for t in (0, 10)],
                [assessment(0, "weight_load", "progressing", "loading"),
                 assessment(10, "weight_load", "failed", "fatal_error", "Traceback")])
    with open(write_trace_report(str(trace), str(tmp_path / "out"))["markdown"], encoding="utf-8") as fh:
        assert "Does a restart help? yes — unknown cause; one restart is worth trying" in fh.read()


def test_the_report_of_a_start_the_start_limit_ended_on_the_host_says_the_same(tmp_path):
    """The report of the host's last start folder (/var/lib/sglang-ops/starts/current) after the OnFailure= handler
    marked the last start needed_human (why: start_limit)."""
    root = tmp_path / "starts"
    folder = root / "20261130T110000Z-411"
    folder.mkdir(parents=True)
    (folder / "verdict.json").write_text(json.dumps({
        "verdict": "failed", "unit": "sglang-k26-ddtree", "phase": "weight_load", "reason_code": "process_exited",
        "reason": "the server process exited (status 1)", "exit_code": 70, "started_at": T0, "ended_at": T0 + 40,
        "needed_human": {"why": "start_limit", "at": T0 + 45,
                         "words": "sglang-k26-ddtree hit its start limit (StartLimitBurst within "
                                  "StartLimitIntervalSec): systemd will not start it again until "
                                  "`systemctl reset-failed sglang-k26-ddtree`; the last start: failed"}}))
    with open(write_incident_report(str(folder), out_dir=str(tmp_path / "out"))["markdown"], encoding="utf-8") as fh:
        md = _next(fh.read())
    assert "worth trying" not in md and "Does a restart help? no — not again" in md
    assert "start limit stopped the restarts" in md and "runbook.md#unit-start-limit" in md
