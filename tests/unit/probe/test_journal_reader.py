"""journalctl -o json --all output captured from a real systemd (Debian 12 container):
a tqdm bar stored as one record with `\\r` frames arrives as a byte-array MESSAGE."""
import json
import os

from ansible_collections.sglang_ops.serving.plugins.module_utils.host import journal_reader, logfile_reader
from ansible_collections.sglang_ops.serving.tests.unit.probe.conftest import data

LINES = data("journalctl-json-tqdm-blob.jsonl").splitlines()


def test_blob_record_decodes_to_frames_separated_by_carriage_returns():
    batch = journal_reader.parse_lines(LINES, max_records=100)
    bar_records = [r.msg for r in batch.records if "Loading safetensors" in r.msg]
    assert len(bar_records) == 1
    frames = bar_records[0].split("\r")
    assert frames[0] == "" and len(frames) == 6
    assert frames[-1].startswith("Loading safetensors checkpoint shards: 100% Completed | 4/4")


def test_invalid_utf8_is_replaced_not_dropped():
    batch = journal_reader.parse_lines(LINES, max_records=100)
    assert "bytes that are not utf-8: \ufffd\ufffd end" in [r.msg for r in batch.records]


def test_realtime_timestamp_becomes_epoch_seconds_and_cursor_is_the_last_read():
    batch = journal_reader.parse_lines(LINES, max_records=100)
    first = json.loads(LINES[0])
    assert batch.records[0].ts == int(first["__REALTIME_TIMESTAMP"]) / 1e6
    assert batch.cursor == json.loads(LINES[-1])["__CURSOR"]
    assert "Main process exited, code=killed, status=9/KILL" in batch.records[-2].msg


def test_bounded_read_stops_early_and_keeps_the_cursor_of_the_last_record_returned():
    batch = journal_reader.parse_lines(LINES, max_records=3)
    assert len(batch.records) == 3 and batch.truncated
    assert batch.cursor == json.loads(LINES[2])["__CURSOR"]


def test_line_break_field_is_carried():
    entry = {"MESSAGE": "x" * 10, "__REALTIME_TIMESTAMP": "1795986169165782", "_LINE_BREAK": "line-max",
             "__CURSOR": "c1"}
    rec, cursor = journal_reader.parse_entry(entry)
    assert rec.to_obs() == {"ts": 1795986169.165782, "msg": "x" * 10, "line_break": "line-max"}
    assert cursor == "c1"


def test_argv_uses_cursor_before_since():
    assert journal_reader.journal_argv("journalctl", "u", cursor="C", since_epoch_s=5)[-1] == "--after-cursor=C"
    assert journal_reader.journal_argv("journalctl", "u", since_epoch_s=1795986168.9)[-1] == "--since=@1795986168"
    assert "--all" in journal_reader.journal_argv("journalctl", "u")


def test_reader_runs_journalctl_and_returns_its_records(monkeypatch, script_dir):
    path = os.path.join(os.path.dirname(__file__), "data", "journalctl-json-tqdm-blob.jsonl")
    fake = script_dir("journalctl", "/bin/cat '%s'\n" % path)
    monkeypatch.setenv("PATH", os.path.dirname(fake))
    batch, why = journal_reader.read_journal("probe-demo", max_records=5)
    assert why is None and len(batch.records) == 5 and batch.truncated


def test_reader_without_journalctl_names_the_reason(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    batch, why = journal_reader.read_journal("probe-demo")
    assert batch is None and "journalctl not found" in why


def test_hanging_journalctl_is_cut_off(monkeypatch, script_dir):
    fake = script_dir("journalctl", "/bin/sleep 30\n")
    monkeypatch.setenv("PATH", os.path.dirname(fake))
    batch, why = journal_reader.read_journal("probe-demo", cursor="old", timeout_s=0.5)
    assert batch is not None and batch.records == [] and batch.cursor == "old"


def test_log_file_records_end_at_newline_and_keep_carriage_returns(tmp_path):
    log = tmp_path / "stderr.log"
    log.write_bytes(b"first line\n\rbar 1/2\rbar 2/2\nunfinished")
    batch, why = logfile_reader.read_logfile(str(log), now=100.0)
    assert why is None
    assert [r.msg for r in batch.records] == ["first line", "\rbar 1/2\rbar 2/2"]
    with open(log, "ab") as f:
        f.write(b" now done\n")
    batch2, dummy_reason = logfile_reader.read_logfile(str(log), cursor=batch.cursor, now=101.0)
    assert [(r.msg, r.ts) for r in batch2.records] == [("unfinished now done", 101.0)]


def test_log_file_cuts_an_endless_line_at_line_max(tmp_path):
    log = tmp_path / "stderr.log"
    log.write_bytes(b"y" * (logfile_reader.LINE_MAX + 10))
    batch, dummy_reason = logfile_reader.read_logfile(str(log))
    assert [(len(r.msg), r.line_break) for r in batch.records] == [(logfile_reader.LINE_MAX, "line-max")]


# journalctl's own words (systemd 252, src/journal/journalctl.c access_check()).
HINT = ("Hint: You are currently not seeing messages from other users and the system.\n"
        "      Users in groups 'adm', 'systemd-journal' can see all messages.\n"
        "      Pass -q to turn off this notice.\n")
NO_FILES = "No journal files were opened due to insufficient permissions.\n"


def test_a_journal_the_caller_may_not_read_is_missing_not_quiet(monkeypatch, script_dir):
    # Some files readable (the caller's own), the unit's not: exit 0, no records, the hint.
    fake = script_dir("journalctl", "printf '%%s' '%s' >&2\nexit 0\n" % HINT.replace("'", "'\\''"))
    monkeypatch.setenv("PATH", os.path.dirname(fake))
    batch, why = journal_reader.read_journal("sglang-k26-ddtree", cursor="c-before")
    assert batch is None
    assert why.startswith("journal not readable as ") and "uid %d" % os.geteuid() in why
    assert "not seeing messages from other users and the system" in why and "systemd-journal" in why


def test_no_readable_journal_file_is_missing_too(monkeypatch, script_dir):
    fake = script_dir("journalctl", "printf '%s' >&2\nexit 1\n" % NO_FILES)
    monkeypatch.setenv("PATH", os.path.dirname(fake))
    batch, why = journal_reader.read_journal("sglang-k26-ddtree")
    assert batch is None and "insufficient permissions" in why and why.startswith("journal not readable as ")


def test_hint_is_not_turned_off(monkeypatch):
    assert "-q" not in journal_reader.journal_argv("journalctl", "u")
    assert journal_reader.permission_problem("-- No entries --\n") is None


def test_the_probe_names_the_unreadable_journal_in_missing(monkeypatch, script_dir):
    from ansible_collections.sglang_ops.serving.plugins.module_utils.host import probe as probe_mod
    fake = script_dir("journalctl", "printf '%%s' '%s' >&2\nexit 0\n" % HINT.replace("'", "'\\''"))
    monkeypatch.setenv("PATH", os.path.dirname(fake))
    monkeypatch.setattr(probe_mod.systemd_unit, "read_unit", lambda unit, timeout_s: (None, "no systemd here"))
    result = probe_mod.probe(probe_mod.ProbeRequest(unit="sglang-k26-ddtree", since_epoch_s=0))
    assert "log" not in result["observation"]
    assert result["missing"]["log"].startswith("journal not readable as ")
