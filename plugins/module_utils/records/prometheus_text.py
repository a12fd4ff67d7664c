"""Samples of the Prometheus text exposition format (what SGLang's /metrics serves):
`name{label="value",...} value [timestamp]`, comments and blank lines skipped."""


def _name_and_rest(line):
    """('sglang:num_running_reqs', '1.0') of a sample line; labels (quoted values may hold
    spaces, braces and escaped quotes) skipped; None for a line that is no sample."""
    brace = line.find("{")
    space = line.find(" ")
    if brace != -1 and (space == -1 or brace < space):
        name, i, quoted = line[:brace], brace + 1, False
        while i < len(line):
            ch = line[i]
            if quoted and ch == "\\":
                i += 1
            elif ch == '"':
                quoted = not quoted
            elif ch == "}" and not quoted:
                return name, line[i + 1:].strip()
            i += 1
        return None
    if space == -1:
        return None
    return line[:space], line[space + 1:].strip()


def sample_sum(text, name):
    """The sum of metric `name`'s samples over every label set; None when it has none."""
    total, found = 0.0, False
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        parsed = _name_and_rest(line)
        if parsed is None or parsed[0] != name:
            continue
        try:
            total += float(parsed[1].split()[0])
        except (IndexError, ValueError):
            continue
        found = True
    return total if found else None
