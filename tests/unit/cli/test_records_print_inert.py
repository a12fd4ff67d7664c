"""What a record held (a verdict's reason, a progress line, a folder name) reaches a terminal
inert: `status`'s lines, the restart's progress lines and summary, the supervisor's journal
lines (module_utils/records/inert_text.py): every control character escaped, one record
one line, so a reason holding "\\nok: [host] FORGED" forges no line and an ESC drives no
terminal."""
import os

from ansible_collections.sglang_ops.serving.plugins.action.sglang_restart import progress_printer
from ansible_collections.sglang_ops.serving.plugins.module_utils.records.inert_text import inert
from ansible_collections.sglang_ops.serving.plugins.module_utils.services.supervisor import Supervisor
from ansible_collections.sglang_ops.serving.plugins.module_utils.services.supervisor_settings import SupervisorSettings
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.restart.supervised_restart import start_summary

FORGING = "weights mismatch\nok: [gpu-a1] FORGED\x1b[2J\r\u2028done"


def _one_inert_line(text):
    assert "\n" not in text.rstrip("\n") and not any(c in text for c in "\x1b\r\u2028")
    assert "FORGED" in text   # what the record said is still there, to read


def test_inert_escapes_control_characters_and_keeps_the_text():
    assert inert("a\nb\x1b[31mc\x7f\u202e") == "a\\x0ab\\x1b[31mc\\x7f\\u202e"
    assert inert("a\n\tb\rc", lines=True) == "a\n\tb\\x0dc"
    assert inert("plain, ünïcode · text") == "plain, ünïcode · text"


def test_a_status_line_stays_one_line():
    line = start_summary({"dir": "/var/lib/sglang-ops/starts/20261130T110000Z-411", "verdict": "failed",
                          "phase": "weight_load", "reason_code": "fatal_error", "exit_code": 71, "reason": FORGING,
                          "started_at": 1796000000.0, "ended_at": 1796000100.0})
    _one_inert_line(line)


def test_a_progress_line_stays_one_line(capsys):
    progress_printer("gpu-a1")("start 1: failed in weight_load: fatal_error: %s" % FORGING)
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and out.startswith("gpu-a1 | start 1: failed")
    _one_inert_line(out)


def test_a_journal_line_of_the_supervisor_stays_one_line(tmp_path):
    settings = tmp_path / "settings.json"
    settings.write_text('{"unit": "sglang-test", "starts_dir": "%s"}' % (tmp_path / "starts"))
    read_end, write_end = os.pipe()
    sup = Supervisor(SupervisorSettings.load(str(settings)), ["/bin/true"], out_fd=write_end)
    sup.say("warning: %s" % FORGING)
    os.close(write_end)
    with os.fdopen(read_end, "rb") as fh:
        out = fh.read().decode("utf-8")
    assert out.startswith("sglang-supervisor: warning: weights mismatch\\x0aok: [gpu-a1] FORGED")
    _one_inert_line(out)


def test_the_restart_summary_stays_one_line(tmp_path):
    from ansible_collections.sglang_ops.serving.tests.unit.restart.restart_fakes import make_procedure
    proc = make_procedure(tmp_path, [[("stalled", "distributed_init", "stall_spin", FORGING)]])[0]
    res = proc.restart()
    assert res["outcome"] == "gave_up" and "weights mismatch" in res["msg"]
    _one_inert_line(res["msg"])
