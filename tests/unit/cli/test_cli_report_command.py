"""`bin/sglang-ops report TRACE|RUN_DIR [-o DIR]`: output and exit statuses."""
import json
import os
import subprocess
import sys

from sglang_ops_cli.cli import main

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SEED = os.path.join(ROOT, "tests", "traces", "corpus", "seed_packing_error.jsonl")


def test_report_of_a_trace_prints_the_summary_and_the_files(tmp_path, capsys):
    out = str(tmp_path / "r")
    assert main(["report", SEED, "-o", out]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith("1. sglang-k26-ddtree failed to start: error while repacking weights")
    assert printed[4].startswith("5. Automation tried:")
    assert sorted(os.listdir(out)) == ["report.json", "report.md", "timeline.svg", "trace.jsonl"]
    assert "markdown %s" % os.path.join(out, "report.md") in printed


def test_report_of_a_run_directory_writes_into_it(tmp_path, capsys):
    run = tmp_path / "run"
    (run / "attempt-1").mkdir(parents=True)
    (run / "attempt-1" / "trace.jsonl").write_text(open(SEED, encoding="utf-8").read())
    (run / "run.json").write_text(json.dumps({
        "host": "h", "unit": "sglang-k26-ddtree", "outcome": "gave_up", "gave_up_because": "restart did not help",
        "attempts": [{"n": 1, "trace": "attempt-1/trace.jsonl", "verdict": "failed", "phase": "post_load",
                      "reason_code": "fatal_packing", "reason": "r", "t": 590.0, "action": "handed_over"}]}))
    assert main(["report", str(run)]) == 0
    assert (run / "report.md").exists() and (run / "timeline.svg").exists()


def test_missing_path_is_a_usage_error(tmp_path, capsys):
    assert main(["report", str(tmp_path / "nope.jsonl")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_a_file_that_is_not_a_trace_is_a_usage_error_naming_the_line(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"format": "sglang-trace/1", "name": "x"}\nnot json\n')
    assert main(["report", str(bad), "-o", str(tmp_path / "o")]) == 2
    assert "bad.jsonl:2" in capsys.readouterr().err


def test_a_folder_without_run_json_is_a_usage_error(tmp_path, capsys):
    assert main(["report", str(tmp_path)]) == 2
    assert "not a run directory" in capsys.readouterr().err


def test_an_output_folder_that_cannot_be_written_fails_with_1(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("x")
    assert main(["report", SEED, "-o", str(blocker / "sub")]) == 1
    assert "could not write" in capsys.readouterr().err


def test_bin_sglang_ops_report_exits_0_and_2_from_the_shell(tmp_path):
    ok = subprocess.run([sys.executable, os.path.join(ROOT, "bin", "sglang-ops"), "report", SEED, "-o", str(tmp_path)],
                        capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    usage = subprocess.run([sys.executable, os.path.join(ROOT, "bin", "sglang-ops"), "report"],
                           capture_output=True, text=True)
    assert usage.returncode == 2 and "usage" in usage.stderr
