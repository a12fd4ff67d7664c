"""The server's output inside the unit's supervisor (module_utils/services/supervisor.py): read from
the child's pipe, passed through the log filter to the journal as it arrives, and kept
for the detector (the records since the last poll) and the diagnostics (the log's tail),
both in bounded memory whatever the server prints:

- a record is at most log_filter.LINE_MAX_BYTES (longer lines are cut as journald cuts
  them, marked `line_break: line-max` as in sglang-trace/1);
- the records waiting for the next poll are at most PENDING_BYTES / PENDING_RECORDS: the
  first half and the newest half are kept, those between are dropped and counted;
- the tail kept for the diagnostics is at most TAIL_BYTES / TAIL_RECORDS.

Nothing the server prints is held back from the journal: only the copies kept for the
detector are bounded. A journal that cannot be written (stdout gone) drops the output
and the pump goes on reading, so the server never blocks on a full pipe.
"""
import collections
import os
import threading

from ansible_collections.sglang_ops.serving.plugins.module_utils.services import log_filter

PENDING_BYTES = 512 * 2**10
PENDING_RECORDS = 5000
TAIL_BYTES = 256 * 2**10
TAIL_RECORDS = 400
READ_BYTES = 65536


class RecentRecords:
    """The newest records within a bound of records and bytes (a record's size is its
    text's length); the oldest go first."""

    def __init__(self, max_records, max_bytes):
        self.max_records, self.max_bytes = max_records, max_bytes
        self.items = collections.deque()
        self.bytes = 0
        self.evicted = 0

    def add(self, item, size):
        self.items.append((item, size))
        self.bytes += size
        while len(self.items) > self.max_records or (self.bytes > self.max_bytes and len(self.items) > 1):
            dummy_item, gone = self.items.popleft()
            self.bytes -= gone
            self.evicted += 1

    def values(self):
        return [item for item, dummy_size in self.items]


class PollRecords:
    """The records of one poll: the first half of the bound as they came, then the newest
    in the other half; `dropped` counts the ones between that were let go."""

    def __init__(self, max_records=PENDING_RECORDS, max_bytes=PENDING_BYTES):
        self.max_records, self.max_bytes = max_records, max_bytes
        self.reset()

    def reset(self):
        self.head, self.head_bytes = [], 0
        self.tail = RecentRecords(self.max_records - self.max_records // 2, self.max_bytes - self.max_bytes // 2)

    def add(self, record, size):
        if len(self.head) < self.max_records // 2 and self.head_bytes + size <= self.max_bytes // 2:
            self.head.append(record)
            self.head_bytes += size
        else:
            self.tail.add(record, size)

    def take(self):
        """(records in order, how many were dropped) and a fresh start for the next poll."""
        out, dropped = self.head + self.tail.values(), self.tail.evicted
        self.reset()
        return out, dropped


class LogPump(threading.Thread):
    """Reads fd to its end; clock() stamps each record (`ts`, epoch seconds)."""

    def __init__(self, fd, blank, out_fd=1, clock=None, warn=None):
        super().__init__(name="log-pump", daemon=True)
        self.fd, self.out_fd, self.clock, self.warn = fd, out_fd, clock, warn
        self.splitter = log_filter.LineSplitter(blank)
        self.lock = threading.Lock()
        self.pending = PollRecords()
        self.tail = RecentRecords(TAIL_RECORDS, TAIL_BYTES)
        self.journal_failed = False
        self.failure = None          # what ended the pump early, in words

    def _take(self, records):
        if not records:
            return
        self._to_journal(b"".join(line + b"\n" for line, dummy_cut in records))
        now = round(self.clock(), 3)
        with self.lock:
            for raw, cut in records:
                text = raw.decode("utf-8", "replace")
                record = {"ts": now, "msg": text}
                if cut:
                    record["line_break"] = "line-max"
                self.pending.add(record, len(text))
                self.tail.add(text, len(text))

    def _to_journal(self, data):
        if self.journal_failed:
            return
        try:
            log_filter.write_all(self.out_fd, data)
        except OSError as e:
            self.journal_failed = True
            self._warn("the server's output cannot be written to the journal (%s); it is dropped from now on"
                       % e.strerror)

    def _warn(self, text):
        if self.warn is not None:
            try:
                self.warn(text)
            except OSError:
                pass

    def run(self):
        try:
            while True:
                try:
                    chunk = os.read(self.fd, READ_BYTES)
                except OSError:
                    chunk = b""
                if not chunk:
                    break
                self._take(self.splitter.feed(chunk))
            self._take(self.splitter.close())
        except Exception as exc:  # the server must never block on a pipe nobody reads
            self.failure = "%s: %s" % (type(exc).__name__, exc)
            self._warn("the log pump failed (%s); the server's output is discarded from now on" % self.failure)
            while True:
                try:
                    if not os.read(self.fd, READ_BYTES):
                        break
                except OSError:
                    break

    def drain(self):
        """(the records since the last call, how many of them were dropped)."""
        with self.lock:
            return self.pending.take()

    def tail_lines(self):
        """The server's most recent lines (bounded), oldest first."""
        with self.lock:
            return list(self.tail.values())

    def tail_text(self):
        return "\n".join(self.tail_lines()) + "\n"
