"""write_incident_report on a run directory laid out as docs/architecture.md describes."""
import json
import os
import shutil

import pytest

from ansible_collections.sglang_ops.serving.plugins.plugin_utils.report.incident_report import (
    ReportInputError, write_incident_report)

from ansible_collections.sglang_ops.serving.tests.unit.report.report_fixtures import CORPUS_TRACES


@pytest.fixture
def run_dir(tmp_path):
    run = tmp_path / "artifacts" / "sglang-demo" / "20261129T210000Z"
    for n in (1, 2):
        diag = run / ("attempt-%d" % n) / "diagnostics"
        diag.mkdir(parents=True)
        shutil.copy(os.path.join(CORPUS_TRACES, "stall_idle_after_load.jsonl"), str(run / ("attempt-%d" % n) / "trace.jsonl"))
        (diag / "unit-status.txt").write_text("ActiveState=active\nSubState=running\nMainPID=1986\n")
        (diag / "journal.txt").write_text("\n".join("journal record %d" % i for i in range(200)) + "\n")
        (diag / "py-spy-0.txt").write_text("Thread 1 (idle): \"MainThread\"\n    barrier (torch/distributed)\n")
    attempts = [{"n": n, "trace": "attempt-%d/trace.jsonl" % n, "verdict": "stalled", "phase": "post_load",
                 "reason_code": "stall_wait_stacks", "reason": "all ranks parked in barrier", "t": 170.0,
                 "action": "restarted" if n == 1 else "handed_over", "diagnostics": "attempt-%d/diagnostics" % n}
                for n in (1, 2)]
    (run / "run.json").write_text(json.dumps({
        "host": "sglang-demo", "unit": "sglang-k26-ddtree", "started": "2026-11-29T21:00:00Z",
        "finished": "2026-11-29T21:08:00Z", "outcome": "gave_up",
        "gave_up_because": "same failure twice: stall_wait_stacks", "attempts": attempts,
        "settings": {"no_such_setting_from_another_release": 1}}))
    return str(run)


def test_report_is_written_into_the_run_directory(run_dir):
    paths = write_incident_report(run_dir)
    assert sorted(os.path.basename(p) for p in paths.values()) == ["report.json", "report.md", "timeline.svg"]
    assert all(os.path.dirname(p) == run_dir for p in paths.values())


def test_run_report_tells_both_attempts_and_why_automation_gave_up(run_dir):
    paths = write_incident_report(run_dir)
    with open(paths["markdown"], encoding="utf-8") as fh:
        md = fh.read()
    assert md.startswith("# Incident: sglang-k26-ddtree on sglang-demo stalled in post_load (stall_wait_stacks)")
    summary = md.splitlines()[2:7]
    assert "attempt 1: stalled in post_load at t+2m50s (stall_wait_stacks) → restarted" in summary[4]
    assert "attempt 2" in summary[4] and "handed_over" in summary[4]
    assert "same failure twice: stall_wait_stacks" in summary[4]
    assert "| 2 | stalled | post_load | t+2m50s | `stall_wait_stacks` | handed_over |" in md
    assert "[attempt-1/trace.jsonl](attempt-1/trace.jsonl)" in md
    assert "[attempt-2/trace.jsonl](attempt-2/trace.jsonl)" in md


def test_run_report_carries_every_attempts_diagnostics_attempt_by_attempt(run_dir):
    with open(write_incident_report(run_dir)["markdown"], encoding="utf-8") as fh:
        md = fh.read()
    diag = md.split("## Diagnostics", 1)[1]
    order = [diag.index("### attempt-%d/%s" % (n, name)) for n in (1, 2)
             for name in ("unit-status.txt", "journal.txt", "py-spy-0.txt")]
    assert order == sorted(order)
    assert "### attempt-2/journal.txt (last 40 of 200 lines)" in diag
    assert "journal record 199" in diag and "journal record 100" not in diag
    assert "barrier (torch/distributed)" in diag


def test_diagnostics_of_an_earlier_attempt_show_when_the_last_captured_none(run_dir):
    shutil.rmtree(os.path.join(run_dir, "attempt-2", "diagnostics"))
    (open(os.path.join(run_dir, "attempt-1", "diagnostics", "log-tail.txt"), "w")
     .write("\n".join("log record %d" % i for i in range(100)) + "\n"))
    with open(write_incident_report(run_dir)["markdown"], encoding="utf-8") as fh:
        md = fh.read()
    diag = md.split("## Diagnostics", 1)[1]
    assert "None captured" not in diag
    assert "### journal.txt (last 40 of 200 lines)" in diag
    assert "### log-tail.txt (last 40 of 100 lines)" in diag and "log record 99" in diag


def test_report_written_elsewhere_links_back_to_the_run(run_dir, tmp_path):
    out = str(tmp_path / "elsewhere")
    paths = write_incident_report(run_dir, out_dir=out)
    with open(paths["markdown"], encoding="utf-8") as fh:
        md = fh.read()
    rel = os.path.relpath(os.path.join(run_dir, "attempt-2", "trace.jsonl"), out)
    assert "(%s)" % rel in md
    assert not os.path.exists(os.path.join(run_dir, "report.md"))


def test_a_folder_without_run_json_is_refused_with_its_name(tmp_path):
    with pytest.raises(ReportInputError, match="not a run directory"):
        write_incident_report(str(tmp_path))


def test_preflight_hand_over_without_attempts_names_the_holder_and_the_class(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "run.json").write_text(json.dumps({
        "host": "gpu-3", "unit": "sglang-k26-ddtree", "started": "2026-11-29T21:00:00Z", "outcome": "gave_up",
        "gave_up_because": "preflight: gpu_busy_foreign", "attempts": [],
        "preflight": {"nvidia_smi": True, "gpus": 8, "gpu_holders": [
            {"pid": 4242, "kind": "foreign", "mem_mib": 20480, "cmdline": "python bench.py --api-key sk-abcdefgh12345678"}]}}))
    paths = write_incident_report(str(run))
    with open(paths["markdown"], encoding="utf-8") as fh:
        md = fh.read()
    summary = md.splitlines()[2:7]
    assert summary[0] == ("1. sglang-k26-ddtree was not (re)started: GPUs held by processes outside the unit "
                          "(`gpu_busy_foreign`), found before starting.")
    assert summary[1].startswith("2. Phase: preflight")
    assert "GPU memory holder: PID 4242 (foreign), 20480 MiB" in md
    assert "sk-abcdefgh12345678" not in md
    assert "runbook.md#gpu_busy_foreign" in md
    with open(paths["chart"], encoding="utf-8") as fh:
        assert "not observed" in fh.read()


def test_hand_over_while_stopping_after_a_restart_reports_the_stop_problem(run_dir):
    with open(os.path.join(run_dir, "run.json"), encoding="utf-8") as fh:
        run = json.load(fh)
    run["attempts"] = run["attempts"][:1]
    run["gave_up_because"] = "stopping: gpu_not_released"
    with open(os.path.join(run_dir, "run.json"), "w", encoding="utf-8") as fh:
        json.dump(run, fh)
    with open(write_incident_report(run_dir)["json"], encoding="utf-8") as fh:
        data = json.load(fh)
    assert (data["verdict"], data["phase"], data["reason_code"]) == ("preflight", "stopping", "gpu_not_released")
    assert "attempt 1: stalled in post_load" in data["automation"]
    assert data["next_steps"]["anchor"] == "gpu_not_released"


def test_runbook_link_is_relative_inside_the_checkout_and_absolute_outside(tmp_path):
    from ansible_collections.sglang_ops.serving.plugins.plugin_utils.report.incident_report import _runbook_href
    root = tmp_path / "checkout"
    (root / "docs").mkdir(parents=True)
    (root / "artifacts" / "h" / "s").mkdir(parents=True)
    runbook = str(root / "docs" / "runbook.md")
    assert _runbook_href(runbook, str(root / "artifacts" / "h" / "s")) == "../../../docs/runbook.md"
    assert _runbook_href(runbook, str(tmp_path / "elsewhere")) == os.path.realpath(runbook)
