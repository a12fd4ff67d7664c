"""What stands between the SGLang server's output and journald.

- tqdm redraws its bars with \\r; journald stores a record only at \\n, so a running bar
  is invisible and a finished one arrives as one "[N blob data]" record. Every \\r
  becomes a line end, so each frame is its own record while the bar runs.
- SGLang prints its server_args, API key included, at start-up as a Python repr
  (`'api_key': 'k\\'ey'`). The key, read from the server's --config file, is replaced by
  <api-key> in every form it can be printed in: as is, Python-repr escaped in either
  quote style, JSON escaped, shell quoted.
- Each line is passed on as soon as its end arrives (no buffering), so a stuck server's
  last lines are never held back; a last line without an end is passed on at EOF.
- A line longer than journald's LineMax (LINE_MAX_BYTES, 48 KiB) is cut as journald
  cuts it: the record ends there and the rest continues as the next record; the cut
  never splits a form of the key, and the splitter never holds more than one record's
  bytes plus one read, whatever the server prints.

Used by the unit's supervisor (module_utils/services/supervisor.py) and by the standalone filter
of hosts without it (roles/sglang_service/files/sglang-log-filter).
"""
import json
import os
import re
import shlex

from ansible_collections.sglang_ops.serving.plugins.module_utils.host import api_key_config

MARK = b"<api-key>"
LINE_MAX_BYTES = 48 * 1024   # journald's LineMax default
_LINE_END = re.compile(b"[\r\n]")


def key_forms(key):
    """Every spelling of `key` a log line can carry, longest first."""
    single = key.replace("\\", "\\\\").replace("'", "\\'")
    double = key.replace("\\", "\\\\").replace('"', '\\"')
    forms = {key, repr(key)[1:-1], single, double, json.dumps(key)[1:-1], shlex.quote(key)}
    return sorted((f for f in forms if f), key=len, reverse=True)


class Blanker:
    """bytes -> bytes with every form of `key` replaced by <api-key> (no key: unchanged)."""

    def __init__(self, key=None):
        forms = [f.encode() for f in key_forms(key)] if key else []
        self.pattern = re.compile(b"|".join(re.escape(f) for f in forms)) if forms else None
        self.longest = max((len(f) for f in forms), default=0)

    def __call__(self, line):
        return self.pattern.sub(MARK, line) if self.pattern is not None else line

    def safe_cut(self, data, at):
        """A cut point at or before `at` that splits no form of the key in data[:at + longest]."""
        if self.pattern is not None:
            for m in self.pattern.finditer(data, max(0, at - self.longest), at + self.longest):
                if m.start() < at < m.end():
                    return m.start()
        return at


def blanker(key):
    return Blanker(key)


def read_key(path):
    """The key from the server's --config file; OSError/ValueError when it cannot be read
    (the caller fails closed)."""
    return api_key_config.parse(api_key_config.read_config_text(path))


class LineSplitter:
    """Bytes in as they arrive, finished records out: (line, cut) with the line blanked and
    without its end; cut is True for a record that ended at LINE_MAX_BYTES, not at a line
    end (journald's `line_break: line-max`)."""

    def __init__(self, blank=None, line_max=LINE_MAX_BYTES):
        self.blank = blank or Blanker()
        self.line_max = line_max
        self.pending = b""

    def feed(self, chunk):
        self.pending += chunk
        parts = _LINE_END.split(self.pending)
        self.pending = parts.pop()
        out = []
        for part in parts:
            out.extend(self._cut(part, final=True))
        out.extend(self._cut(self.pending, final=False))
        return out

    def _cut(self, data, final):
        """Records of LINE_MAX_BYTES cut off the front of data; the rest is the line's end
        (final) or stays pending until more arrives."""
        out = []
        while len(data) > self.line_max and (final or len(data) >= self.line_max + self.blank.longest):
            at = _char_boundary(data, self.blank.safe_cut(data, self.line_max) or self.line_max)
            out.append((self.blank(data[:at]), True))
            data = data[at:]
        if final:
            out.append((self.blank(data), False))
        else:
            self.pending = data
        return out

    def close(self):
        rest, self.pending = self.pending, b""
        return self._cut(rest, final=True) if rest else []


def _char_boundary(data, at):
    """`at` moved back to the first byte of the UTF-8 character it falls in."""
    for back in range(at, max(at - 3, 1) - 1, -1):
        if (data[back] & 0xC0) != 0x80:
            return back
    return at


def write_all(fd, data):
    while data:
        data = data[os.write(fd, data):]


def withheld_message(path, exc):
    return ("sglang-log-filter: cannot read the API key from %s (%s); the server's output is withheld\n"
            % (path, getattr(exc, "strerror", None) or type(exc).__name__)).encode()


def run_filter(argv, fd_in=0, fd_out=1):
    """`sglang-log-filter [CONFIG.yaml]`: stdin to stdout through the filter; exit status."""
    try:
        blank = blanker(read_key(argv[1]) if len(argv) > 1 else None)
    except (OSError, ValueError) as e:
        # Fail closed: without the key nothing the server prints may pass.
        write_all(fd_out, withheld_message(argv[1], e))
        while os.read(fd_in, 65536):
            pass
        return 1
    lines = LineSplitter(blank)
    while True:
        chunk = os.read(fd_in, 65536)
        if not chunk:
            break
        done = lines.feed(chunk)
        if done:
            write_all(fd_out, b"".join(line + b"\n" for line, dummy_cut in done))
    rest = lines.close()
    if rest:
        write_all(fd_out, b"".join(line + b"\n" for line, dummy_cut in rest))
    return 0
