"""A unit's journal records since a cursor (or since the unit started), bounded.

`journalctl -o json --all` prints one JSON object per record; MESSAGE is a string, or
an array of byte values when the record holds control characters (a tqdm bar's `\\r`
frames) or invalid UTF-8. Parsing is pure; `read_journal` is the IO edge.
"""
import json
import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field

from ansible_collections.sglang_ops.serving.plugins.module_utils.host.bounded_run import find_executable


@dataclass
class LogRecord:
    ts: float
    msg: str
    line_break: object = None

    def to_obs(self):
        d = {"ts": self.ts, "msg": self.msg}
        if self.line_break:
            d["line_break"] = self.line_break
        return d


@dataclass
class JournalBatch:
    records: list = field(default_factory=list)
    cursor: object = None
    truncated: bool = False  # more records were waiting than max_records


def decode_message(value):
    """MESSAGE as journald's JSON gives it -> text (UTF-8, bad bytes replaced)."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return bytes(b & 0xFF for b in value if isinstance(b, int)).decode("utf-8", errors="replace")
    return str(value)


def parse_entry(entry):
    """One decoded JSON object -> (LogRecord, cursor)."""
    try:
        ts = int(entry.get("__REALTIME_TIMESTAMP")) / 1e6
    except (TypeError, ValueError):
        ts = time.time()
    lb = entry.get("_LINE_BREAK")
    rec = LogRecord(ts=round(ts, 6), msg=decode_message(entry.get("MESSAGE")),
                    line_break=decode_message(lb) if lb else None)
    return rec, entry.get("__CURSOR")


def parse_lines(lines, max_records):
    """JSON lines -> JournalBatch; stops after max_records (truncated=True if more)."""
    batch = JournalBatch()
    for line in lines:
        line = line.strip()
        if not line:
            continue
        if len(batch.records) >= max_records:
            batch.truncated = True
            break
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        rec, cursor = parse_entry(entry)
        batch.records.append(rec)
        if cursor:
            batch.cursor = cursor
    return batch


def _kill_quietly(proc):
    # The whole process group: a child holding the pipe would keep the read blocked.
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except OSError:
        try:
            proc.kill()
        except OSError:
            pass


# What journalctl (systemd 252) prints on stderr when the caller may not read the system
# journal: the hint when some files were readable (the caller's own), the error when none
# were. Without -q, so the hint is not suppressed: an unreadable journal must not pass
# for a quiet one.
_NO_PERMISSION = ("insufficient permissions", "not seeing messages from other users and the system")


def permission_problem(stderr_text):
    """The line of journalctl's stderr saying the journal is not readable, or None."""
    for line in (stderr_text or "").splitlines():
        if any(words in line for words in _NO_PERMISSION):
            return line.strip()
    return None


def _who():
    uid = os.geteuid()
    try:
        import pwd
        return "%s (uid %d)" % (pwd.getpwuid(uid).pw_name, uid)
    except (ImportError, KeyError):
        return "uid %d" % uid


def journal_argv(exe, unit, cursor=None, since_epoch_s=None):
    argv = [exe, "-u", unit, "-o", "json", "--all", "--no-pager"]
    if cursor:
        argv.append("--after-cursor=%s" % cursor)
    elif since_epoch_s is not None:
        argv.append("--since=@%d" % int(since_epoch_s))
    return argv


def read_journal(unit, cursor=None, since_epoch_s=None, max_records=2000, timeout_s=5.0):
    """(JournalBatch, None) or (None, reason). Reads oldest first and stops after
    max_records, so the returned cursor never skips records; the rest come next call."""
    exe = find_executable("journalctl")
    if exe is None:
        return None, "journalctl not found (no systemd journal on this host)"
    try:
        proc = subprocess.Popen(journal_argv(exe, unit, cursor, since_epoch_s),
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True)
    except OSError as e:
        return None, "journalctl not runnable: %s" % e
    deadline = time.monotonic() + timeout_s
    lines, timed_out = [], False
    # A journalctl that blocks without printing is killed by the timer, which ends the read.
    timer = threading.Timer(timeout_s, _kill_quietly, (proc,))
    timer.daemon = True
    timer.start()
    try:
        for raw in proc.stdout:
            lines.append(raw.decode("utf-8", errors="replace"))
            if len(lines) > max_records:
                break
        timed_out = time.monotonic() > deadline
    finally:
        timer.cancel()
        if proc.poll() is None:
            _kill_quietly(proc)
        try:
            dummy_out, err = proc.communicate(timeout=1.0)
        except subprocess.TimeoutExpired:
            err = b""
    denied = permission_problem((err or b"").decode(errors="replace"))
    if denied:
        return None, ("journal not readable as %s: journalctl: %s (run the probe as root, or in group "
                      "systemd-journal or adm)" % (_who(), denied[:200]))
    batch = parse_lines(lines, max_records)
    if batch.cursor is None:
        batch.cursor = cursor  # nothing new: keep the old position
    if proc.returncode not in (0, None, -9) and not lines:
        return None, "journalctl exited %s: %s" % (proc.returncode, (err or b"").decode(errors="replace").strip()[:200])
    batch.truncated = batch.truncated or timed_out
    return batch, None
