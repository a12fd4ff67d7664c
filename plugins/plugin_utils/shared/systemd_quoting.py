"""Values written into a systemd unit file, quoted for the setting that reads them.

systemd reads a unit line by line: a newline (or any control character) in a value
would start a directive of its own, and a value ending in a backslash would swallow
the next line. The Unicode line separators (U+0085, U+2028, U+2029) are harmless to
systemd but end a line for Python's `str.splitlines`, which readers of the unit's
values use (`systemctl show`, journal text); they are refused as well. Every function
here refuses such values (ValueError), so a value can only ever be the value it was
meant to be. Then, per context (systemd.unit(5),
systemd.exec(5), systemd.service(5)):

- `environment_assignment`: Environment=. Specifiers (%) are resolved first, then the
  line is split into words with C-style escapes inside double quotes; `$` means nothing
  there.
- `exec_argument`: one word of ExecStart=. As above, and systemd then expands `$NAME`
  and `${NAME}` from the environment unless the dollar is doubled.
- `directive_value`: any other setting (Description=, User=, WorkingDirectory=,
  DeviceAllow=, ...). No quoting is read there, so only the specifiers are escaped.
"""
import re

ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_PLAIN_WORD = re.compile(r"[A-Za-z0-9_./:,=+@-]+\Z")
# C0 controls, DEL, C1 controls (U+0085 among them) and the two Unicode line separators:
# every character str.splitlines() splits on, and every other control character.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def control_character(value):
    """The first control character or line separator of `value` (newline, tab, escape,
    DEL, U+0085, U+2028...), or None."""
    found = _CONTROL.search(str(value))
    return found.group(0) if found else None


def check_line_safe(value, what="value"):
    """`value` as str; ValueError when it could end or continue a line of the unit."""
    text = str(value)
    bad = control_character(text)
    if bad is not None:
        kind = "line separator" if bad in "\u2028\u2029" else "control character"
        raise ValueError("%s holds the %s %r (U+%04X); a unit file value cannot" % (what, kind, bad, ord(bad)))
    if text.endswith("\\"):
        raise ValueError("%s ends with a backslash, which would join the next line of the unit" % what)
    return text


def escape_specifiers(text):
    """`%` doubled, so systemd does not read `%n`, `%h`... as specifiers."""
    return text.replace("%", "%%")


def _c_quote(text, quote):
    return quote + text.replace("\\", "\\\\").replace(quote, "\\" + quote) + quote


def directive_value(value, what="value"):
    """A value for a setting that takes it verbatim (Description=, User=, paths...)."""
    return escape_specifiers(check_line_safe(value, what))


def environment_assignment(name, value, what="environment variable"):
    """`"NAME=value"` for Environment=, read back by systemd as exactly NAME=value."""
    name = check_line_safe(name, what)
    if not ENV_NAME.match(name):
        raise ValueError("%s name %r is not a valid variable name ([A-Za-z_][A-Za-z0-9_]*)" % (what, name))
    text = check_line_safe(value, "%s %s" % (what, name))
    return escape_specifiers(_c_quote("%s=%s" % (name, text), '"'))


def exec_argument(value, what="ExecStart argument"):
    """One ExecStart= word, handed to the program exactly as `value` is."""
    text = check_line_safe(value, what)
    if not _PLAIN_WORD.match(text):
        text = _c_quote(text, "'")
    return escape_specifiers(text).replace("$", "$$")
