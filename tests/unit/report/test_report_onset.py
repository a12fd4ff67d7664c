"""When the report says the failure began: from the detector's own evidence first."""
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.report.incident_evidence import onset
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.shared.trace_signals import LogLine

RUNNING = {"active": "active", "sub": "running", "main_pid": 100}
GONE = {"active": "activating", "sub": "auto-restart", "main_pid": None}


def test_an_exited_process_dates_from_when_it_was_gone_not_from_systemd_stop_chatter():
    observations = [{"t": 0.0, "unit": RUNNING}, {"t": 2.0, "unit": RUNNING}, {"t": 4.0, "unit": GONE}]
    lines = [LogLine(0.0, "", "sglang-k26-ddtree.service: State 'stop-sigterm' timed out. Killing.")]
    t, basis = onset("failed", 4.0, {"reason_code": "process_exited", "evidence": {}}, observations, lines)
    assert (t, basis) == (4.0, "main process gone")


def test_a_named_fatal_line_is_the_onset_even_after_other_error_words():
    lines = [LogLine(10.0, "TP0", "Retrying after timeout on a warmup request"),
             LogLine(20.0, "TP1", "Unexpected error during packing of layer 3")]
    decision = {"reason_code": "fatal_packing",
                "evidence": {"fatal_lines": ["[2026-05-30 20:27:43 TP1] Unexpected error during packing of layer 3"]}}
    t, basis = onset("failed", 25.0, decision, [{"t": 0.0}, {"t": 25.0}], lines)
    assert (t, basis) == (20.0, "first fatal line in the journal")


def test_an_exited_process_dates_from_systemds_exit_record_when_the_journal_has_it():
    stop_chatter = "sglang-k26-ddtree.service: State 'stop-sigterm' timed out. Killing."
    exited = "sglang-k26-ddtree.service: Main process exited, code=exited, status=1/FAILURE"
    # the exit record's own time (3.6) is a little after the poll that delivered it (3.5):
    # the onset is never after the decision
    observations = [{"t": 0.6, "unit": RUNNING, "log": [{"t": 0.6, "msg": stop_chatter}]},
                    {"t": 3.5, "unit": RUNNING, "log": [{"t": 3.6, "msg": exited}]}]
    lines = [LogLine(0.6, "", stop_chatter), LogLine(3.6, "", exited)]
    t, basis = onset("failed", 3.5, {"reason_code": "process_exited", "evidence": {}}, observations, lines)
    assert (t, basis) == (3.5, "systemd saw the main process exit")
