"""The per-start folders the unit's supervisor writes on the host (docs/architecture.md):

<root>/                         /var/lib/sglang-ops/starts by default
  <stamp>/                      one start: UTC yyyymmddTHHMMSSZ-<supervisor PID>
    trace.jsonl                 the start as sglang-trace/1, one observation per poll
    verdict.json                the start's record, rewritten whole (atomically) as it goes
    diagnostics/<name>.txt      written before a failed start's server is stopped
  current -> <stamp>            the start in progress, or the last one

verdict.json: verdict (running | ready | stalled | failed | stopped; readers call a
"running" start that is not the current one "interrupted": its supervisor was killed), phase, reason_code,
reason, exit_code, started_at / ended_at (epoch s; ended_at null while running),
ready_after_s, phase_durations {phase: s}, polls, restarts (systemd's NRestarts when
known), unit, progress (the last progress line). Only the last `keep` folders stay.
Read by `bin/sglang-ops status`, the incident report, the restart action and metrics.

Written so that nothing the service user planted is written through (safe_files): the start's
folder is made by mkdir (one already there is taken only when it is ours and private), the
trace created with O_EXCL|O_NOFOLLOW in it, verdict.json and each diagnostic replaced whole
by a file from mkstemp renamed over it. Old folders are pruned after the server is launched,
PRUNE_SLICE per poll; an entry named like a start that is not a folder (a planted link) is
removed then (the link, never its target), with one warning.

The records are for people and tools reading the start, never a condition of it: a write
that fails (a full disk, a read-only or unwritable folder) is one warning naming the
file (WriteGuard: once per file), and the start goes on without that file.
"""
import errno
import json
import os
import re
import time

from ansible_collections.sglang_ops.serving.plugins.module_utils.records import safe_files
from ansible_collections.sglang_ops.serving.plugins.module_utils.records.redaction import redact
from ansible_collections.sglang_ops.serving.plugins.module_utils.records.trace_format import TraceWriter

DEFAULT_ROOT = "/var/lib/sglang-ops/starts"
CURRENT = "current"
VERDICT = "verdict.json"
TRACE = "trace.jsonl"
DIAGNOSTICS = "diagnostics"
# fullmatch only: `$` would also match before a trailing newline
_STAMP = re.compile(r"\d{8}T\d{6}Z-\d+")
FINAL = ("ready", "stalled", "failed", "stopped")
_KINDS = {"file": "a file", "link": "a symbolic link", "other": "not a folder (a FIFO, device or socket)"}
# What a reader takes of a start's files (safe_files): verdict.json is rewritten whole by
# the supervisor and stays small; a trace over TRACE_MAX_BYTES is not copied (a cut trace
# would not replay); a diagnostic is its last DIAGNOSTIC_MAX_BYTES.
VERDICT_MAX_BYTES = 1 << 20
TRACE_MAX_BYTES = 64 << 20
DIAGNOSTIC_MAX_BYTES = 4 << 20
DIAGNOSTICS_MAX_FILES = 64
# Old start folders removed per poll, after the server is launched: a starts folder filled
# with thousands of them never holds a launch back, and each poll's share stays small.
PRUNE_SLICE = 200


def is_stamp(name):
    """Whether name is a start folder's name: <UTC stamp>-<pid>, all of it."""
    return isinstance(name, str) and _STAMP.fullmatch(name) is not None


def stamp(epoch_s, pid):
    return "%s-%d" % (time.strftime("%Y%m%dT%H%M%SZ", time.gmtime(epoch_s)), pid)


class WriteGuard:
    """Runs the writes of a start's files; an OSError is one warning per file through
    warn(text) (the journal), and the caller goes on."""

    def __init__(self, warn=None):
        self.warn = warn
        self.failed = set()        # paths already warned about

    def attempt(self, path, write):
        """write() -> its result, or None when it raised OSError."""
        try:
            return write()
        except OSError as e:
            if path not in self.failed:
                self.failed.add(path)
                if self.warn is not None:
                    self.warn("warning: cannot write %s (%s); the start goes on without it"
                              % (path, e.strerror or errno.errorcode.get(e.errno, e)))
            return None


class _GuardedTraceFile:
    """The file object under a TraceWriter: each line (the writer writes one, then
    flushes) goes to disk whole or not at all. A line that cannot be written is dropped
    and the file cut back to the last whole line, so the trace stays readable; later
    lines are tried again (a disk that filled may free up)."""

    def __init__(self, path, guard, create):
        self.path, self.guard = path, guard
        self.buffer = []
        self.size = 0
        self.fd = guard.attempt(path, create)
        self.closed = False

    def write(self, text):
        self.buffer.append(text)

    def flush(self):
        data, self.buffer = "".join(self.buffer).encode("utf-8"), []
        if self.fd is None or not data:
            return
        if self.guard.attempt(self.path, lambda: self._write_whole(data)) is None:
            try:
                os.ftruncate(self.fd, self.size)
                os.lseek(self.fd, self.size, os.SEEK_SET)
            except OSError:
                pass

    def _write_whole(self, data):
        view = memoryview(data)
        while view:
            view = view[os.write(self.fd, view):]
        self.size += len(data)
        return True

    def close(self):
        if not self.closed and self.fd is not None:
            try:
                os.close(self.fd)
            except OSError:
                pass
        self.closed = True


class StartTrace(TraceWriter):
    """trace_format's TraceWriter (its lines, its header) over a _GuardedTraceFile: a
    trace that cannot be written costs a warning, never the start."""

    def __init__(self, path, header, guard, create):   # pylint: disable=super-init-not-called
        self.path, self.count = path, 0
        self._fh = _GuardedTraceFile(path, guard, create)
        self._write(header)


def _not_a_start(folder, name, kind):
    return safe_files.UnsafeEntry(os.path.join(folder.path, name), "%s where a start's folder is expected" % _KINDS[kind])


def _start_entries(folder):
    """(names of the start folders, [(name, kind)] of the entries named like a start that
    are not folders: a link, a file, a FIFO planted there) in the open starts folder, oldest
    first."""
    starts, planted = [], []
    for name, kind in folder.entries():
        if is_stamp(name):
            (starts.append(name) if kind == "dir" else planted.append((name, kind)))
    return starts, planted


def _start_names(folder, warn=None):
    """Names of the start folders in the open starts folder, oldest first; an entry named
    like a start that is not a folder (a link planted there) is named through warn, and
    left alone (the supervisor's pruning removes it)."""
    starts, planted = _start_entries(folder)
    for name, kind in planted:
        if warn is not None:
            warn("warning: %s; it is not a start's folder and is left as it is" % _not_a_start(folder, name, kind))
    return starts


def _open_root(root):
    """The starts folder, opened without following a link (safe_files.Folder); None when it
    cannot be."""
    try:
        return safe_files.Folder.open(root)
    except OSError:
        return None


def start_dirs(root, warn=None):
    """Names of the start folders under root (folders, never links), oldest first."""
    folder = _open_root(root)
    if folder is None:
        return []
    with folder:
        return _start_names(folder, warn)


class StartRecord:
    """The folder of one start; created, pointed at by `current`; older ones pruned a slice
    at a time (prune_step, once the server runs). Every write is relative to the start's
    folder, opened when it is made (safe_files: made by mkdir in a starts folder of this user
    or root, not writable by everyone); its writes go through a WriteGuard (warn: where the
    warnings go)."""

    def __init__(self, root, started_at, pid, keep=20, warn=None):
        self.root = root
        self.name = stamp(started_at, pid)
        self.path = os.path.join(root, self.name)
        self.keep = max(1, int(keep))
        self.guard = WriteGuard(warn)
        self.folder, self._folder_error = None, None
        self.folder = self.guard.attempt(self.path, self._make_folder)
        self._point_current()
        self._prune_queue = None   # [(name, kind)] still to remove, oldest first; None: not listed yet
        self.record = {"verdict": "running", "phase": "starting", "reason_code": "starting", "reason": "",
                       "exit_code": None, "started_at": round(started_at, 3), "ended_at": None,
                       "ready_after_s": None, "phase_durations": {}, "polls": 0, "restarts": None,
                       "progress": "", "unit": None}

    @property
    def trace_path(self):
        return os.path.join(self.path, TRACE)

    def _make_folder(self):
        try:
            os.makedirs(self.root, 0o750, exist_ok=True)   # the starts folder, then checked as it is
            with safe_files.Folder.open_writable(self.root) as top:
                return top.make_folder(self.name)
        except OSError as e:
            self._folder_error = e
            raise

    def _start_folder(self):
        """The start's open folder; the OSError that kept it from being made, else."""
        if self.folder is None:
            raise self._folder_error or OSError(errno.ENOENT, "the start's folder was not made", self.path)
        return self.folder

    def _point_current(self):
        if self.folder is None:
            return
        tmp = ".%s.%d.tmp" % (CURRENT, os.getpid())
        try:
            with safe_files.Folder.open_writable(self.root) as top:
                os.symlink(self.name, tmp, dir_fd=top.fd)
                os.replace(tmp, CURRENT, src_dir_fd=top.fd, dst_dir_fd=top.fd)
        except OSError:
            pass   # readers fall back to the newest folder

    def prune_step(self, most=PRUNE_SLICE):
        """Removes up to `most` of what the starts folder holds beyond the last `keep` starts:
        old start folders (safe_files.Folder.remove_tree) and entries named like a start
        that are not folders (a planted link: the link, never its target), each of these
        named in one warning. The folder is listed once, at the first call; True while
        something is left for the next call."""
        return bool(self.guard.attempt(self.root, lambda: self._prune_slice(most)))

    def _prune_slice(self, most):
        with safe_files.Folder.open_writable(self.root) as folder:
            if self._prune_queue is None:
                starts, planted = _start_entries(folder)
                old = [(n, "dir") for n in starts[:-self.keep] if n != self.name]
                self._prune_queue = sorted(old + planted)
            batch, self._prune_queue = self._prune_queue[:most], self._prune_queue[most:]
            for name, kind in batch:
                self._remove(folder, name, kind)
        return len(self._prune_queue)

    def _remove(self, folder, name, kind):
        warn = self.guard.warn or (lambda text: None)
        try:
            if kind == "dir":
                folder.remove_tree(name)
                return
            folder.unlink(name)
            warn("warning: removed %s: %s where a start's folder is expected%s" % (
                os.path.join(folder.path, name), _KINDS[kind], " (the link; its target is left as it was)"
                if kind == "link" else ""))
        except FileNotFoundError:
            pass
        except safe_files.UnsafeEntry as e:
            warn("warning: not pruned: %s" % e)

    def open_trace(self, path, header):
        """The trace writer of this start (start_watch.TraceTarget's open_writer): trace.jsonl
        created in the start's folder (O_EXCL, O_NOFOLLOW: nothing there is written through)."""
        return StartTrace(path, header, self.guard, lambda: self._start_folder().create(os.path.basename(path)))

    def update(self, **fields):
        self.record.update(fields)
        path = os.path.join(self.path, VERDICT)
        data = (json.dumps(self.record, indent=1, sort_keys=True) + "\n").encode("utf-8")
        self.guard.attempt(path, lambda: self._start_folder().replace_with(VERDICT, data))

    def write_diagnostic(self, name, text):
        """The path written, or None when it could not be (warned)."""
        path = os.path.join(self.path, DIAGNOSTICS, name + ".txt")

        def write():
            with self._start_folder().make_folder(DIAGNOSTICS) as folder:
                folder.replace_with(name + ".txt", redact(text).encode("utf-8"))
            return path
        return self.guard.attempt(path, write)


def write_verdict(root, name, record):
    """verdict.json of the start `name` under root replaced by record (the OnFailure handler's
    mark), the same way the supervisor writes it; OSError (an UnsafeEntry for a folder that is
    not ours) when it cannot be."""
    data = (json.dumps(record, indent=1, sort_keys=True) + "\n").encode("utf-8")
    with safe_files.Folder.open_writable(root) as top:
        with top.folder(name) as start:
            start.replace_with(VERDICT, data)


def _read_verdict(folder, name):
    """verdict.json of the start `name` in the open starts folder, with `dir` added; None
    when absent, unreadable or refused (safe_files)."""
    try:
        with folder.folder(name) as start:
            record = start.read_json(VERDICT, VERDICT_MAX_BYTES)
    except (OSError, ValueError):
        return None
    if not isinstance(record, dict):
        return None
    record["dir"] = os.path.join(folder.path, name)
    return record


def read_record(root, name):
    """verdict.json of one start with `dir` added; None when absent or unreadable."""
    folder = _open_root(root)
    if folder is None:
        return None
    with folder:
        return _read_verdict(folder, name)


def recent_starts(root=DEFAULT_ROOT, limit=5, warn=None):
    """The last `limit` starts' records, newest first. A start still "running" that is not
    the current one ended without a verdict: its supervisor was killed."""
    folder = _open_root(root)
    if folder is None:
        return []
    out = []
    with folder:
        current = _current_of(folder, warn)
        for name in reversed(_start_names(folder, warn)):
            record = _read_verdict(folder, name)
            if record is not None and record.get("verdict") == "running" and name != current:
                record.update(verdict="interrupted", reason="the supervisor ended without a verdict (killed)")
            if record is not None:
                out.append(record)
            if len(out) >= limit:
                break
    return out


def starts_of(root=DEFAULT_ROOT, limit=5, warn=None):
    """{"current": the current start's folder name, "starts": its last `limit` records}."""
    return {"current": current_name(root), "starts": recent_starts(root, limit, warn)}


def read_files(root, name, warn=None):
    """The files of one start, relative path -> text (None when unreadable or refused):
    trace.jsonl, verdict.json and diagnostics/*, each a regular file of the folder's owner
    read without following a link (safe_files; what is refused is named through warn).
    ValueError for a name that is not a start's folder."""
    if not is_stamp(name):
        raise ValueError("%r is not the folder of a start (<UTC stamp>-<pid>)" % name)
    folder = _open_root(root)
    if folder is None:
        return {TRACE: None, VERDICT: None}
    files = {}

    def read(where, rel, max_bytes, tail=False):
        try:
            files[rel] = where.read_text(os.path.basename(rel), max_bytes, tail)
        except safe_files.UnsafeEntry as e:
            files[rel] = None
            if warn is not None:
                warn("%s; not copied" % e)
        except OSError:
            files[rel] = None
    with folder:
        try:
            start = folder.folder(name)
        except OSError as e:
            if isinstance(e, safe_files.UnsafeEntry) and warn is not None:
                warn("%s; nothing of it is read" % e)
            return {TRACE: None, VERDICT: None}
        with start:
            read(start, TRACE, TRACE_MAX_BYTES)
            read(start, VERDICT, VERDICT_MAX_BYTES)
            try:
                diagnostics = start.folder(DIAGNOSTICS)
            except OSError as e:
                if isinstance(e, safe_files.UnsafeEntry) and warn is not None:
                    warn("%s; no diagnostics are read" % e)
                return files
            with diagnostics:
                for n, kind in diagnostics.entries()[:DIAGNOSTICS_MAX_FILES]:
                    if kind == "dir":
                        continue
                    read(diagnostics, DIAGNOSTICS + "/" + n, DIAGNOSTIC_MAX_BYTES, tail=True)
    return files


def _current_of(folder, warn=None):
    try:
        name = folder.readlink(CURRENT)
    except OSError:
        names = _start_names(folder)
        return names[-1] if names else None
    return os.path.basename(name) if is_stamp(os.path.basename(name)) else None


def current_name(root=DEFAULT_ROOT):
    """The folder name `current` points at (the newest folder when the link is missing);
    only the link's text is read, never what it points at."""
    folder = _open_root(root)
    if folder is None:
        return None
    with folder:
        return _current_of(folder)


def time_in_phases(phase_entries, end_t):
    """{phase: seconds} from [(phase, entered_t)] in order, the last one up to end_t;
    ready is where the start ends, not a phase of it."""
    out = {}
    for i, (phase, t) in enumerate(phase_entries):
        if phase == "ready":
            continue
        nxt = phase_entries[i + 1][1] if i + 1 < len(phase_entries) else end_t
        out[phase] = round(out.get(phase, 0.0) + max(0.0, nxt - t), 1)
    return out
