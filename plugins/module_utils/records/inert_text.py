"""Text read from a record (a start's folder name, a verdict's reason, a trace's log line,
a diagnostics file) made inert before it reaches a terminal, a report or a progress line.

The service user writes the records; a newline in a reason would forge a line of Ansible's
output or of the journal, an ESC would drive on-call's terminal. inert() escapes every
control character (C0, DEL, C1) and the Unicode line and paragraph separators and
direction overrides as \\xNN / \\uNNNN, so one record stays one line and prints as the
characters it holds; lines=True keeps newlines and tabs (a diagnostics file shown whole in a
fenced block). Standard library only: this runs on the host too.
"""
import re

# C0 and DEL, C1, NEL/LS/PS, and the bidirectional controls that reorder what a terminal shows
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
_UNSAFE_IN_LINES = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _escape(match):
    code = ord(match.group(0))
    return "\\x%02x" % code if code < 0x100 else "\\u%04x" % code


def inert(text, lines=False):
    """text (any value: str() of it) with its control characters escaped; one line unless
    lines=True, which keeps \\n and \\t (a CR is escaped either way: it rewrites a line)."""
    return (_UNSAFE_IN_LINES if lines else _UNSAFE).sub(_escape, "" if text is None else str(text))
