"""`bin/sglang-ops report` on a start folder the service user can write: verdict.json, the
trace and every diagnostics file are read through safe_files (no link followed, the
folder's owner, bounded, no FIFO or device opened), the report says what it did not read
and why, and what the records held reaches report.md and the terminal inert (no control
character, one record one line)."""
import json
import os

import pytest

from sglang_ops_cli.cli import main

from ansible_collections.sglang_ops.serving.tests.unit.report.report_fixtures import CORPUS_TRACES

SEED = os.path.join(CORPUS_TRACES, "seed_packing_error.jsonl")
NAME = "20261130T110000Z-411"
SECRET = "root:$6$planted-secret-hash:19000:0:99999:7:::"
ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="chown needs root, as on-call has")


def _start(tmp_path, reason="error while repacking weights"):
    folder = tmp_path / "starts" / NAME
    (folder / "diagnostics").mkdir(parents=True)
    (folder / "verdict.json").write_text(json.dumps({
        "verdict": "failed", "unit": "sglang-k26-ddtree", "started_at": 1796000000.0, "phase": "post_load",
        "reason_code": "fatal_packing", "reason": reason, "exit_code": 72, "ended_at": 1796000590.0}))
    (folder / "trace.jsonl").write_text(open(SEED, encoding="utf-8").read())
    (folder / "diagnostics" / "log-tail.txt").write_text("the last lines\n")
    secret = tmp_path / "shadow"
    secret.write_text(SECRET + "\n")
    os.chmod(str(secret), 0o600)
    return folder, str(secret)


def _report(folder, tmp_path, capsys):
    out = tmp_path / "report"
    status = main(["report", str(folder), "-o", str(out)])
    printed = capsys.readouterr()
    return status, (out / "report.md").read_text() if (out / "report.md").exists() else "", printed


def test_a_linked_diagnostics_file_is_not_read_and_the_report_says_so(tmp_path, capsys):
    folder, secret = _start(tmp_path)
    planted = folder / "diagnostics" / "zz-shadow.txt"
    os.symlink(secret, str(planted))
    status, md, printed = _report(folder, tmp_path, capsys)
    assert status == 0 and SECRET not in md and "the last lines" in md
    not_read = md.split("## Not read", 1)[1]
    assert "- %s: a symbolic link where a regular file is expected" % planted in not_read
    assert "not read: %s: a symbolic link" % planted in printed.err


def test_a_fifo_among_the_diagnostics_is_named_not_opened(tmp_path, capsys):
    folder, dummy_secret = _start(tmp_path)
    os.mkfifo(str(folder / "diagnostics" / "stuck.txt"))
    status, md, dummy_printed = _report(folder, tmp_path, capsys)
    assert status == 0
    assert "- %s: a FIFO where a regular file is expected" % (folder / "diagnostics" / "stuck.txt") in md


def test_a_linked_trace_is_not_read_and_the_report_says_so(tmp_path, capsys):
    folder, dummy_secret = _start(tmp_path)
    elsewhere = tmp_path / "other-trace.jsonl"
    os.rename(str(folder / "trace.jsonl"), str(elsewhere))
    os.symlink(str(elsewhere), str(folder / "trace.jsonl"))
    status, md, dummy_printed = _report(folder, tmp_path, capsys)
    assert status == 0
    assert "- %s: a symbolic link where a regular file is expected" % (folder / "trace.jsonl") in md
    assert "Init torch distributed begin" not in md                  # no journal line of the other trace


def test_a_linked_verdict_is_not_read(tmp_path, capsys):
    folder, secret = _start(tmp_path)
    elsewhere = tmp_path / "verdict-elsewhere.json"
    elsewhere.write_text(json.dumps({"verdict": "failed", "reason": SECRET}))
    (folder / "verdict.json").unlink()
    os.symlink(str(elsewhere), str(folder / "verdict.json"))
    status, md, printed = _report(folder, tmp_path, capsys)
    assert status == 2 and SECRET not in md + printed.out + printed.err


@ROOT_ONLY
def test_a_diagnostics_file_of_another_owner_is_not_read(tmp_path, capsys):
    folder, dummy_secret = _start(tmp_path)
    other = folder / "diagnostics" / "zz-other.txt"
    other.write_text(SECRET + "\n")
    os.chown(str(other), 4711, 4711)
    status, md, dummy_printed = _report(folder, tmp_path, capsys)
    assert status == 0 and SECRET not in md
    assert "- %s: owned by uid 4711, expected uid 0" % other in md


def test_control_characters_and_newlines_of_a_record_reach_neither_report_nor_terminal(tmp_path, capsys):
    folder, dummy_secret = _start(tmp_path, reason="repack failed\nok: [host] FORGED\x1b[2J")
    (folder / "diagnostics" / "log-tail.txt").write_text("line one\n\x1b]0;title\x07line two\r\n")
    status, md, printed = _report(folder, tmp_path, capsys)
    assert status == 0
    for text in (md, printed.out, printed.err):
        assert "\x1b" not in text and "\r" not in text and "\x07" not in text
        assert not any(line.startswith("ok: [host] FORGED") for line in text.split("\n"))
    assert "repack failed\\x0aok: [host] FORGED\\x1b[2J" in md
    assert "line one\n\\x1b]0;title\\x07line two\n" in md      # a diagnostics file keeps its lines


def test_a_linked_diagnostics_folder_is_not_read_and_the_report_says_so(tmp_path, capsys):
    folder, dummy_secret = _start(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "ssh-key.txt").write_text(SECRET + "\n")
    for name in os.listdir(str(folder / "diagnostics")):
        os.unlink(str(folder / "diagnostics" / name))
    os.rmdir(str(folder / "diagnostics"))
    os.symlink(str(elsewhere), str(folder / "diagnostics"))
    status, md, dummy_printed = _report(folder, tmp_path, capsys)
    assert status == 0 and SECRET not in md
    assert "- %s: a symbolic link where a folder is expected" % (folder / "diagnostics") in md
