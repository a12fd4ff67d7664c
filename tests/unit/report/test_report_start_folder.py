"""`bin/sglang-ops report` on a start the unit's supervisor recorded on the host
(/var/lib/sglang-ops/starts/<stamp>/: verdict.json, trace.jsonl, diagnostics/)."""
import json
import os

from sglang_ops_cli.cli import main
from sglang_ops_cli.commands import report as report_command

from ansible_collections.sglang_ops.serving.tests.unit.report.report_fixtures import CORPUS_TRACES

SEED = os.path.join(CORPUS_TRACES, "seed_packing_error.jsonl")
FAILED = "20261130T110000Z-411"


def _start(root, name, verdict, trace=None, diagnostics=None, **fields):
    folder = root / name
    folder.mkdir(parents=True)
    record = dict({"verdict": verdict, "unit": "sglang-k26-ddtree", "started_at": 1796000000.0}, **fields)
    (folder / "verdict.json").write_text(json.dumps(record))
    if trace:
        (folder / "trace.jsonl").write_text(open(trace, encoding="utf-8").read())
    for name_, text in (diagnostics or {}).items():
        (folder / "diagnostics").mkdir(exist_ok=True)
        (folder / "diagnostics" / name_).write_text(text)
    return folder


def _starts(tmp_path):
    root = tmp_path / "starts"
    for name in ("20261129T090000Z-101", "20261129T100000Z-102"):
        _start(root, name, "ready", phase="ready", reason_code="ready", ready_after_s=300.0,
               phase_durations={"starting": 5.0, "weight_load": 100.0, "post_load": 195.0})
    _start(root, FAILED, "failed", trace=SEED, phase="post_load", reason_code="fatal_packing",
           reason="error while repacking weights", exit_code=72, ended_at=1796000590.0,
           phase_durations={"starting": 5.0, "weight_load": 400.0, "post_load": 185.0},
           diagnostics={"log-tail.txt": "".join("log record %d\n" % i for i in range(100)),
                        "py-spy.txt": "Thread 7 (active): repack_weights\n"})
    os.symlink(FAILED, str(root / "current"))
    return root


def test_a_start_folder_is_reported_with_its_diagnostics_and_time_against_earlier_starts(tmp_path, capsys):
    root = _starts(tmp_path)
    out = tmp_path / "report"
    assert main(["report", str(root / FAILED), "-o", str(out)]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("1. sglang-k26-ddtree failed to start: error while repacking weights")
    md = (out / "report.md").read_text()
    assert "Source: start %s recorded by the unit's supervisor" % FAILED in md
    assert "| 1 | failed | post_load |" in md
    assert "usual 5m00s (median of 2 earlier ready starts of this host)" in md
    assert "- slower than usual: weight_load took 6m40s, usual 1m40s (4.0\u00d7)" in md
    diag = md.split("## Diagnostics", 1)[1]
    assert "### log-tail.txt (last 40 of 100 lines)" in diag and "log record 99" in diag
    assert "repack_weights" in diag
    assert not (root / FAILED / "report.md").exists()   # the service's folder is left as it was


def test_the_current_link_is_followed_and_the_report_goes_under_artifacts_reports(tmp_path, monkeypatch, capsys):
    root = _starts(tmp_path)
    monkeypatch.setattr(report_command, "DEFAULT_REPORTS_DIR", str(tmp_path / "reports"))
    assert main(["report", str(root / "current")]) == 0
    assert (tmp_path / "reports" / FAILED / "report.md").exists()
    assert "markdown %s" % (tmp_path / "reports" / FAILED / "report.md") in capsys.readouterr().out


def test_a_start_folder_whose_verdict_is_not_a_record_is_a_usage_error(tmp_path, capsys):
    folder = tmp_path / "starts" / FAILED
    folder.mkdir(parents=True)
    (folder / "verdict.json").write_text("[1, 2]")
    assert main(["report", str(folder), "-o", str(tmp_path / "r")]) == 2
    assert "not a start record" in capsys.readouterr().err


def test_a_ready_start_says_its_time_to_ready_against_the_usual(tmp_path, capsys):
    root = tmp_path / "starts"
    _start(root, "20261129T090000Z-101", "ready", phase="ready", reason_code="ready", ready_after_s=300.0,
           phase_durations={"starting": 5.0, "weight_load": 100.0, "post_load": 195.0})
    _start(root, "20261129T100000Z-102", "ready", phase="ready", reason_code="ready", ready_after_s=500.0,
           ended_at=1796000500.0, phase_durations={"starting": 5.0, "weight_load": 300.0, "post_load": 195.0})
    assert main(["report", str(root / "20261129T100000Z-102"), "-o", str(tmp_path / "r")]) == 0
    md = (tmp_path / "r" / "report.md").read_text()
    assert md.startswith("# Start report: sglang-k26-ddtree came up ready")
    assert "The last attempt was ready after 8m20s; usual 5m00s (median of 1 earlier ready start of this host)." in md
    assert "- slower than usual: weight_load took 5m00s, usual 1m40s (3.0\u00d7)" in md


def test_the_decision_time_is_the_watchs_own_not_the_records_end(tmp_path):
    """The supervisor's trace stores the assessment that decided; verdict.json's ended_at
    comes later (diagnostics, the stop), and the report tells the watch's time."""
    from ansible_collections.sglang_ops.serving.plugins.plugin_utils.report.incident_start_folder import start_folder_run
    from ansible_collections.sglang_ops.serving.tests.unit.report.report_fixtures import HEADER, assessment, obs, write_trace
    folder = _start(tmp_path / "starts", FAILED, "failed", phase="distributed_init", reason_code="process_exited",
                    reason="server process exited", exit_code=1, ended_at=1796000050.3)
    write_trace(str(folder / "trace.jsonl"), HEADER, [obs(0), obs(2.1)],
                [assessment(0, "starting", "progressing", "progressing"),
                 assessment(2.1, "distributed_init", "failed", "process_exited")])
    assert start_folder_run(str(folder))["attempts"][0]["t"] == 2.1
    (folder / "trace.jsonl").unlink()   # no trace: the record's own span
    assert start_folder_run(str(folder))["attempts"][0]["t"] == 50.3
