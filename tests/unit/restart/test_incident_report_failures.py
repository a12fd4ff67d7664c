"""A hand-over whose incident report cannot be written says so, in the run's output and
the result, whether the report writer fails to import or to render."""
import importlib
import sys

from ansible_collections.sglang_ops.serving.tests.unit.restart.restart_fakes import make_procedure, stalled

PLUGIN_UTILS = "ansible_collections.sglang_ops.serving.plugins.plugin_utils"
WRITER = PLUGIN_UTILS + ".report.incident_report"


def hand_over(tmp_path):
    proc, dummy_host, dummy_probe, dummy_clock, lines, dummy_left = make_procedure(tmp_path, [[stalled("stall_spin", "distributed_init")]])
    return proc.restart(), lines


def break_import(monkeypatch, module):
    """The report writer imported afresh, with `module` (a link of its import chain) broken."""
    monkeypatch.delitem(sys.modules, WRITER, raising=False)
    monkeypatch.delattr(importlib.import_module(PLUGIN_UTILS + ".report"), "incident_report", raising=False)
    monkeypatch.setitem(sys.modules, module, None)


def test_a_broken_import_in_the_report_chain_is_named_in_the_output_and_the_result(tmp_path, monkeypatch):
    break_import(monkeypatch, PLUGIN_UTILS + ".report.timeline_svg")
    res, lines = hand_over(tmp_path)
    assert res["outcome"] == "gave_up" and res["report"] is None
    assert res["report_error"].startswith("incident report could not be written: ModuleNotFoundError: ")
    assert "timeline_svg" in res["report_error"]
    assert res["report_error"] in lines and res["report_error"] in res["msg"]


def test_a_report_that_fails_to_render_is_named_too(tmp_path, monkeypatch):
    writer = importlib.import_module(WRITER)

    def fail(run_dir):
        raise OSError("No space left on device")
    monkeypatch.setattr(writer, "write_run_report", fail)
    res, lines = hand_over(tmp_path)
    assert res["report"] is None
    assert res["report_error"] == "incident report could not be written: OSError: No space left on device"
    assert res["report_error"] in lines


def test_a_written_report_has_no_error(tmp_path):
    res, dummy_lines = hand_over(tmp_path)
    assert res["report"]["markdown"].endswith("report.md") and "report_error" not in res
