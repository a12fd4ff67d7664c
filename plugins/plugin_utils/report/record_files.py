"""The files a report reads (run.json or verdict.json, each attempt's trace, every file of
its diagnostics/) read through module_utils/records/safe_files.py, and what was skipped.

The report is what on-call runs, often as root, on a folder the service user can write
(a supervisor's start folder). Nothing in it is read through a link; a file must be a
regular file of the folder's owner, within its bound; a FIFO or device is never opened.
What is refused is not read, and the report says so: `skipped` holds one line per file,
its path and why.

    files = RecordFiles(folder)
    files.json("run.json", max_bytes, "run record")   -> the JSON value, ValueError naming the file
    files.trace("attempt-1/trace.jsonl")              -> (header, observations), or None (skipped)
    files.diagnostics("attempt-1/diagnostics")        -> {name: text}
    files.skipped                                     -> ["<path>: <why>", ...]
"""
import errno
import os

from ansible_collections.sglang_ops.serving.plugins.module_utils.records import safe_files, start_records, trace_format


def is_regular_file(path):
    """Whether path is a regular file itself (a link to one is not)."""
    try:
        return os.stat(path, follow_symlinks=False).st_mode & 0o170000 == 0o100000
    except OSError:
        return False


class RecordFiles:
    """The record files under one folder (a run's or a start's); see the module."""

    def __init__(self, folder):
        self.folder = folder
        self.skipped = []

    def _skip(self, exc):
        self.skipped.append("%s: %s" % (exc.path, exc.why))

    def _open(self, rel):
        """(the open folder holding rel's file, its name); OSError as safe_files raises it."""
        with safe_files.Folder.open(self.folder) as top:
            return top.walk(rel)

    def json(self, rel, max_bytes, kind):
        """The JSON value of the record file rel; ValueError naming the file when it is
        refused, over max_bytes, not UTF-8 or not JSON. OSError passes up (a missing file:
        what that means is the caller's to say)."""
        path = os.path.join(self.folder, rel)
        try:
            where, name = self._open(rel)
            with where:
                raw = where.read_bytes(name, max_bytes)
        except safe_files.UnsafeEntry as exc:
            self._skip(exc)
            raise ValueError("%s: not read as a %s (%s)" % (path, kind, exc.why))
        try:
            return trace_format.parse_json_line(raw.decode("utf-8"))
        except UnicodeDecodeError as exc:
            raise ValueError("%s: not UTF-8 text (byte 0x%02x at offset %d)" % (path, raw[exc.start], exc.start))
        except ValueError as exc:
            raise ValueError("%s: not JSON: %s" % (path, exc))

    def trace(self, rel, max_bytes=start_records.TRACE_MAX_BYTES):
        """(header, observations) of the trace rel; None when there is none or it is refused
        (then in skipped). TraceFormatError when it is malformed, OSError when unreadable."""
        try:
            where, name = self._open(rel)
            with where:
                with where.open_binary(name, max_bytes) as fh:
                    return trace_format.read_trace_file(fh, os.path.join(self.folder, rel))
        except safe_files.UnsafeEntry as exc:
            self._skip(exc)
        except OSError as exc:
            if exc.errno != errno.ENOENT:
                raise
        return None

    def diagnostics(self, rel):
        """{name: text} of the files of the diagnostics folder rel (the last
        start_records.DIAGNOSTIC_MAX_BYTES of each, the first DIAGNOSTICS_MAX_FILES files);
        what is refused is in skipped."""
        out = {}
        try:
            where, name = self._open(rel)
            with where:
                with where.folder(name) as diagnostics:
                    entries = diagnostics.entries()
                    for n, kind in entries[:start_records.DIAGNOSTICS_MAX_FILES]:
                        if kind == "dir":
                            continue
                        try:
                            out[n] = diagnostics.read_text(n, start_records.DIAGNOSTIC_MAX_BYTES, tail=True)
                        except safe_files.UnsafeEntry as exc:
                            self._skip(exc)
                        except OSError:
                            continue   # gone meanwhile
                    if len(entries) > start_records.DIAGNOSTICS_MAX_FILES:
                        self.skipped.append("%s: %d files, only the first %d read" % (
                            diagnostics.path, len(entries), start_records.DIAGNOSTICS_MAX_FILES))
        except safe_files.UnsafeEntry as exc:
            self._skip(exc)
        except OSError:
            pass
        return out
