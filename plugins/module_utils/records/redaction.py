"""Remove secrets (API keys, bearer tokens) from text before it is shown or stored.

Used on every log line, diagnostics excerpt and reason that goes into a report, and on
the copy of a trace written beside it. The patterns err on the side of hiding too much:
a redacted word in a report costs nothing, a leaked key costs a rotation.
"""
import re

REDACTED = "<redacted>"

# A quoted value as Python's repr or JSON prints it: either quote, backslash escapes inside.
_QUOTED = r"""'(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*\""""

# Each pattern keeps group 1 (the label) and replaces the rest of the match. An unquoted
# value runs on past spaces (a key may hold them) up to the next flag or the line end.
_PATTERNS = (
    # --api-key sk-xxx, --api-key=sk-xxx, --api_key 'x y', --api-key my key --port 1
    re.compile(r"(--api[-_]key(?:=|[ \t]+))(?:%s|[^\n]*?(?=[ \t]+--|$))" % _QUOTED, re.IGNORECASE | re.MULTILINE),
    # Authorization: Bearer xxx / "Bearer xxx" anywhere: the key may hold quotes and spaces,
    # so everything to the line end goes
    re.compile(r"(\bBearer[ \t]+)[^\n]+", re.IGNORECASE),
    # api_key='x' / 'api_key': "it's" / "api_key": "x" / api_key=x / SGLANG_API_KEY=x / HF_TOKEN=x / password: x
    # (not a bare "token": SGLang logs "#new-token: 12" on every batch)
    re.compile(r"""((?:\b|_)(?:api[-_]?key|access[-_]?token|auth[-_]?token|hf[-_]?token|bearer[-_]?token|"""
               r"""secret|password)"""
               r"""['"]?[ \t]*[:=][ \t]*)(?:%s|[^\n,)}\]]+)""" % _QUOTED, re.IGNORECASE),
    # bare OpenAI-style keys
    re.compile(r"(\b)sk-[A-Za-z0-9_\-]{8,}"),
)


def redact(text):
    """`text` with every secret-looking value replaced by <redacted>; None stays None."""
    if text is None:
        return None
    if not isinstance(text, str):
        text = str(text)
    for pattern in _PATTERNS:
        text = pattern.sub(lambda m: m.group(1) + REDACTED, text)
    return text


def redact_tree(value):
    """A copy of a JSON-like value with every string redacted (dict keys are kept)."""
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, dict):
        return {k: redact_tree(v) for k, v in value.items()}
    if isinstance(value, list):
        return [redact_tree(v) for v in value]
    return value
