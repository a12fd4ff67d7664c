"""Remove secrets (API keys, bearer tokens) from text before it is shown or stored.

Used on every log line, diagnostics excerpt and reason that goes into a report, and on
the copy of a trace written beside it. The patterns err on the side of hiding too much:
a redacted word in a report costs nothing, a leaked key costs a rotation.
"""
import re

REDACTED = "<redacted>"

# Each pattern keeps group 1 (the label) and replaces the rest of the match.
_PATTERNS = (
    # --api-key sk-xxx, --api-key=sk-xxx, --api_key 'x'
    re.compile(r"(--api[-_]key(?:=|\s+))(?:'[^']*'|\"[^\"]*\"|\S+)", re.IGNORECASE),
    # Authorization: Bearer xxx / "Bearer xxx" anywhere
    re.compile(r"(\bBearer\s+)[A-Za-z0-9._~+/=\-]+", re.IGNORECASE),
    # api_key='x' / "api_key": "x" / api_key=x / SGLANG_API_KEY=x / HF_TOKEN=x / password: x
    # (not a bare "token": SGLang logs "#new-token: 12" on every batch)
    re.compile(r"""((?:\b|_)(?:api[-_]?key|access[-_]?token|auth[-_]?token|hf[-_]?token|bearer[-_]?token|"""
               r"""secret|password)"""
               r"""['"]?\s*[:=]\s*)(?:'[^']*'|"[^"]*"|[^\s,)}\]]+)""", re.IGNORECASE),
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
