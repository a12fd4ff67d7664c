"""Log records from a plain file (a process's redirected stderr) for hosts without a
journal, split the way journald splits a stream: a record ends at `\\n` (carriage
returns stay inside it) or after LINE_MAX bytes. The cursor is the byte offset."""
import os
import time

from ansible_collections.sglang_ops.serving.plugins.module_utils.host.journal_reader import (
    JournalBatch, LogRecord)

LINE_MAX = 48 * 1024
CURSOR_PREFIX = "offset:"


def split_records(data, line_max=LINE_MAX):
    """bytes -> [(text, line_break, end_offset)]. An unfinished last line is left out
    unless it has reached line_max."""
    out, pos = [], 0
    while pos < len(data):
        nl = data.find(b"\n", pos, pos + line_max + 1)
        if nl != -1:
            out.append((data[pos:nl].decode("utf-8", errors="replace"), None, nl + 1))
            pos = nl + 1
        elif len(data) - pos >= line_max:
            out.append((data[pos:pos + line_max].decode("utf-8", errors="replace"), "line-max",
                        pos + line_max))
            pos += line_max
        else:
            break
    return out


def parse_cursor(cursor):
    if cursor and str(cursor).startswith(CURSOR_PREFIX):
        try:
            return int(str(cursor)[len(CURSOR_PREFIX):])
        except ValueError:
            return 0
    return 0


def read_logfile(path, cursor=None, max_records=2000, max_bytes=4 * 1024 * 1024, now=None):
    """(JournalBatch, None) or (None, reason); records get the time they were read."""
    offset = parse_cursor(cursor)
    try:
        if os.path.getsize(path) < offset:
            offset = 0  # the file was replaced or truncated
        with open(path, "rb") as f:
            f.seek(offset)
            data = f.read(max_bytes)
    except OSError as e:
        return None, "log file unreadable: %s" % e
    ts = round(time.time() if now is None else now, 6)
    batch = JournalBatch()
    end = 0
    for text, line_break, end_offset in split_records(data):
        if len(batch.records) >= max_records:
            batch.truncated = True
            break
        batch.records.append(LogRecord(ts=ts, msg=text, line_break=line_break))
        end = end_offset
    batch.cursor = "%s%d" % (CURSOR_PREFIX, offset + end)
    return batch, None
