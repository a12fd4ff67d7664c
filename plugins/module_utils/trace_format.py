"""Read and check `sglang-trace/1` files (../shared/traces/FORMAT.md) at the edge.

Every problem raises TraceFormatError naming the file and line, so the CLI can print
one clear line. Observations are returned as the dicts the detector consumes.
"""
import json

FORMAT = "sglang-trace/1"
_OUTCOMES = ("ready", "stalled", "failed")
_NUM = (int, float)


class TraceFormatError(ValueError):
    def __init__(self, path, line_no, problem):
        self.path, self.line_no, self.problem = path, line_no, problem
        super().__init__("%s:%d: %s" % (path, line_no, problem))


def _expect(cond, path, line_no, problem):
    if not cond:
        raise TraceFormatError(path, line_no, problem)


def check_header(header, path="<trace>", line_no=1):
    _expect(isinstance(header, dict), path, line_no, "header must be a JSON object")
    _expect(header.get("format") == FORMAT, path, line_no,
            "not a %s trace (format is %r)" % (FORMAT, header.get("format")))
    poll = header.get("poll_s", 10.0)
    _expect(isinstance(poll, _NUM) and not isinstance(poll, bool) and poll > 0, path, line_no, "poll_s must be a positive number")
    gpus = header.get("gpus")
    _expect(gpus is None or (isinstance(gpus, int) and not isinstance(gpus, bool) and gpus > 0), path, line_no,
            "gpus must be a positive integer")
    exp = header.get("expect")
    if exp is not None:
        _expect(isinstance(exp, dict) and exp.get("outcome") in _OUTCOMES, path, line_no,
                "expect.outcome must be one of %s" % ", ".join(_OUTCOMES))
        if exp["outcome"] != "ready":
            _expect(isinstance(exp.get("onset_t"), _NUM), path, line_no, "expect.onset_t must be a number")
    return header


def check_observation(obs, prev_t, path="<trace>", line_no=0):
    _expect(isinstance(obs, dict), path, line_no, "observation must be a JSON object")
    t = obs.get("t")
    _expect(isinstance(t, _NUM) and not isinstance(t, bool), path, line_no, "observation needs a numeric t")
    _expect(prev_t is None or t >= prev_t, path, line_no, "t goes backwards (%s after %s)" % (t, prev_t))
    typed = (("unit", dict), ("procs", dict), ("gpus", list), ("gpu_procs", list), ("log", list),
             ("http", dict), ("stacks", list), ("missing", dict))
    for key, kind in typed:
        if key in obs and obs[key] is not None:
            _expect(isinstance(obs[key], kind), path, line_no, "%s must be a %s" % (key, "list" if kind is list else "JSON object"))
    for rec in obs.get("log") or ():
        _expect(isinstance(rec, dict) and isinstance(rec.get("msg"), str), path, line_no, "every log record needs a text msg")
    for g in obs.get("gpus") or ():
        _expect(isinstance(g, dict), path, line_no, "every gpus entry must be a JSON object")
        for k in ("mem_used_mib", "mem_total_mib", "util_pct"):
            _expect(g.get(k) is None or isinstance(g.get(k), _NUM), path, line_no, "gpus[].%s must be a number" % k)
    procs = obs.get("procs")
    if isinstance(procs, dict):
        for k in ("count", "cpu_s", "read_bytes", "write_bytes"):
            _expect(procs.get(k) is None or isinstance(procs.get(k), _NUM), path, line_no, "procs.%s must be a number" % k)
    for s in obs.get("stacks") or ():
        _expect(isinstance(s, dict) and isinstance(s.get("frames"), list), path, line_no, "every stacks entry needs a frames list")
    return obs


def read_trace(path):
    """(header, observations) of a trace file; TraceFormatError on anything malformed."""
    try:
        f = open(path, encoding="utf-8")
    except OSError as e:
        raise TraceFormatError(path, 0, "cannot open: %s" % e.strerror)
    header, observations, prev_t = None, [], None
    with f:
        for line_no, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                item = json.loads(line)
            except ValueError as e:
                raise TraceFormatError(path, line_no, "not valid JSON (%s)" % e)
            if header is None:
                header = check_header(item, path, line_no)
                continue
            check_observation(item, prev_t, path, line_no)
            prev_t = item["t"]
            observations.append(item)
    if header is None:
        raise TraceFormatError(path, 1, "empty file: no %s header" % FORMAT)
    return header, observations
