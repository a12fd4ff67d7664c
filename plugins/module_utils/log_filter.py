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

Used by the unit's supervisor (module_utils/supervisor.py) and by the standalone filter
of hosts without it (roles/sglang_service/files/sglang-log-filter).
"""
import json
import os
import re
import shlex

from ansible_collections.sglang_ops.serving.plugins.module_utils import api_key_config

MARK = b"<api-key>"
_LINE_END = re.compile(b"[\r\n]")


def key_forms(key):
    """Every spelling of `key` a log line can carry, longest first."""
    single = key.replace("\\", "\\\\").replace("'", "\\'")
    double = key.replace("\\", "\\\\").replace('"', '\\"')
    forms = {key, repr(key)[1:-1], single, double, json.dumps(key)[1:-1], shlex.quote(key)}
    return sorted((f for f in forms if f), key=len, reverse=True)


def blanker(key):
    """bytes -> bytes with every form of `key` replaced by <api-key>."""
    if not key:
        return lambda line: line
    pattern = re.compile(b"|".join(re.escape(f.encode()) for f in key_forms(key)))
    return lambda line: pattern.sub(MARK, line)


def read_key(path):
    """The key from the server's --config file; OSError/ValueError when it cannot be read
    (the caller fails closed)."""
    with open(path, encoding="utf-8") as fh:
        return api_key_config.parse(fh.read())


class LineSplitter:
    """Bytes in as they arrive, finished lines (blanked, without their end) out."""

    def __init__(self, blank=None):
        self.blank = blank or (lambda line: line)
        self.pending = b""

    def feed(self, chunk):
        self.pending += chunk
        parts = _LINE_END.split(self.pending)
        self.pending = parts.pop()
        return [self.blank(p) for p in parts]

    def close(self):
        rest, self.pending = self.pending, b""
        return [self.blank(rest)] if rest else []


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
            write_all(fd_out, b"".join(p + b"\n" for p in done))
    rest = lines.close()
    if rest:
        write_all(fd_out, rest[0] + b"\n")
    return 0
