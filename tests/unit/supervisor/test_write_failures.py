"""A start's files that cannot be written (a full disk, an unwritable folder) are one
warning per file, and the start goes on."""
import errno
import json
import os

import pytest

from ansible_collections.sglang_ops.serving.plugins.module_utils.records import start_records as sr
from ansible_collections.sglang_ops.serving.plugins.module_utils.records.start_metrics import write_textfile
from ansible_collections.sglang_ops.serving.plugins.module_utils.records.trace_format import read_trace, trace_header

HEADER = trace_header("start-x", "sglang-test", 1.0, 2)


def test_a_folder_that_cannot_be_made_is_one_warning_per_file_and_nothing_raises(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    warnings = []
    rec = sr.StartRecord(str(blocker / "starts"), 1796000000, 1, warn=warnings.append)
    for poll in range(3):
        rec.update(polls=poll)
        assert rec.write_diagnostic("log-tail", "x\n") is None
    trace = rec.open_trace(rec.trace_path, HEADER)
    trace.append({"t": 1.0})
    trace.close()
    named = [w for w in warnings if "cannot write" in w]
    assert len(named) == len(set(named)) == 4, warnings     # the folder, verdict.json, log-tail.txt, trace.jsonl
    assert any(os.path.join(rec.path, "verdict.json") in w and "Not a directory" in w for w in named), named


def test_a_full_disk_under_the_trace_is_one_warning_and_the_start_goes_on(tmp_path, monkeypatch):
    warnings = []
    rec = sr.StartRecord(str(tmp_path), 1796000000, 1, warn=warnings.append)

    def no_space(*dummy_args):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    monkeypatch.setattr(sr.os, "write", no_space)     # every write of the trace fails with ENOSPC
    trace = rec.open_trace(rec.trace_path, HEADER)
    for t in range(5):
        trace.append({"t": float(t)})
    trace.close()
    assert warnings == ["warning: cannot write %s (No space left on device); the start goes on without it"
                        % rec.trace_path]


def test_a_trace_line_that_did_not_fit_is_dropped_whole_and_the_trace_stays_readable(tmp_path, monkeypatch):
    warnings = []
    rec = sr.StartRecord(str(tmp_path), 1796000000, 1, warn=warnings.append)
    trace = rec.open_trace(rec.trace_path, HEADER)
    trace.append({"t": 1.0})
    real_write, calls = os.write, []

    def full_after_half(fd, data):
        """The disk fills in the middle of the next line: half of it lands, then ENOSPC."""
        calls.append(len(data))
        if len(calls) == 1:
            return real_write(fd, bytes(data[:len(data) // 2]))
        if len(calls) == 2:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        return real_write(fd, data)
    monkeypatch.setattr(sr.os, "write", full_after_half)
    trace.append({"t": 2.0, "log": [{"t": 2.0, "msg": "y" * 1000}]})
    trace.append({"t": 3.0})                          # space again
    trace.close()
    dummy_header, observations = read_trace(rec.trace_path)
    assert [o["t"] for o in observations] == [1.0, 3.0]
    assert len(warnings) == 1 and rec.trace_path in warnings[0]


def test_a_verdict_that_cannot_be_written_leaves_no_temporary_file(tmp_path, monkeypatch):
    warnings = []
    rec = sr.StartRecord(str(tmp_path), 1796000000, 1, warn=warnings.append)
    rec.update(polls=1)

    def no_space(*dummy_args, **dummy_kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    monkeypatch.setattr(sr.os, "replace", no_space)
    rec.update(polls=2)
    rec.update(polls=3)
    assert sorted(os.listdir(rec.path)) == ["verdict.json"]
    assert json.loads((tmp_path / rec.name / "verdict.json").read_text())["polls"] == 1
    assert len(warnings) == 1


def test_a_metrics_file_that_cannot_be_written_is_named_in_the_error(tmp_path):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    with pytest.raises(OSError) as err:
        write_textfile(str(blocker), "sglang_ops_u.prom", "x 1\n")
    assert err.value.filename == str(blocker / "sglang_ops_u.prom")
    assert err.value.strerror == "a regular file where a folder is expected"
