"""The one reader and writer of `sglang-trace/1` files (docs/trace-format.md).

Reading checks at the edge: every problem raises TraceFormatError naming the file and
line, so the CLI can print one clear line. Observations are returned as the dicts the
detector consumes.

Writing: the probe reports wall-clock epoch seconds in `ts` (also in each log record); a
trace carries `t`, seconds since the watch began. relative_observation() does that
conversion, TraceWriter appends one JSON line per observation and flushes it, so a trace
is complete up to the last poll even when the watcher is interrupted.

Beyond FORMAT.md, an observation this project writes carries `assessment`: what the
watcher made of it (Assessment.to_dict(): t, phase, verdict, reason_code, reason,
evidence, progress, want_stacks, final), the decision it acted on included. The field is
optional: replay ignores it, and reports read decisions from it (docs/architecture.md).
Its `eta` is the time-to-ready estimate the watch showed (eta.Estimate.to_dict()), and the
header's `load_conditions` what that estimate started from (eta.LoadConditions.to_dict():
page-cache residency, weight cache, restart kind, compile caches); a line carries its own
`load_conditions` where they changed during the start. `replay --eta` estimates with them.
"""
import json
import math
import os

from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.server_layout import layout_from_dict, layout_of
from ansible_collections.sglang_ops.serving.plugins.module_utils.records.eta import LoadConditions
from ansible_collections.sglang_ops.serving.plugins.module_utils.records.redaction import redact

FORMAT = "sglang-trace/1"
# The nominal poll of a trace whose header does not say it.
UNSTATED_POLL_S = 10.0
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
    poll = header.get("poll_s", UNSTATED_POLL_S)
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
    _expect(header.get("settings") is None or isinstance(header["settings"], dict), path, line_no,
            "settings must be a JSON object (the detector settings that decided)")
    _expect(header.get("server") is None or layout_from_dict(header["server"]) is not None, path, line_no,
            "server must be a JSON object with an integer nnodes")
    argv = header.get("argv")
    _expect(argv is None or (isinstance(argv, list) and all(isinstance(a, str) for a in argv)), path, line_no,
            "argv must be a list of strings (the server's command line)")
    _check_conditions(header.get("load_conditions"), path, line_no)
    return header


def trace_layout(header):
    """The ServerLayout of the server a trace recorded: its header's `server`, else its `argv`;
    None without either."""
    recorded = layout_from_dict(header.get("server"))
    if recorded is not None:
        return recorded
    argv = header.get("argv")
    return layout_of(argv) if argv else None


def _check_conditions(recorded, path, line_no):
    if recorded is None:
        return
    try:
        LoadConditions.from_dict(recorded)
    except ValueError as e:
        raise TraceFormatError(path, line_no, str(e))


def recorded_conditions(item):
    """The LoadConditions a trace header or line records (`load_conditions`), or None."""
    recorded = item.get("load_conditions")
    return None if recorded is None else LoadConditions.from_dict(recorded)


def _number_or_none(value):
    return value is None or (isinstance(value, _NUM) and not isinstance(value, bool))


def check_observation(obs, prev_t, path="<trace>", line_no=0):
    _expect(isinstance(obs, dict), path, line_no, "observation must be a JSON object")
    t = obs.get("t")
    _expect(isinstance(t, _NUM) and not isinstance(t, bool), path, line_no, "observation needs a numeric t")
    _expect(prev_t is None or t >= prev_t, path, line_no, "t goes backwards (%s after %s)" % (t, prev_t))
    typed = (("unit", dict), ("procs", dict), ("gpus", list), ("gpu_procs", list), ("log", list),
             ("http", dict), ("stacks", list), ("missing", dict), ("assessment", dict),
             ("weight_cache", dict), ("load_conditions", dict), ("eta", dict),
             ("peers", dict))
    for key, kind in typed:
        if key in obs and obs[key] is not None:
            _expect(isinstance(obs[key], kind), path, line_no, "%s must be a %s" % (key, "list" if kind is list else "JSON object"))
    _check_conditions(obs.get("load_conditions"), path, line_no)
    for rec in obs.get("log") or ():
        _expect(isinstance(rec, dict) and isinstance(rec.get("msg"), str), path, line_no, "every log record needs a text msg")
        _expect("t" not in rec or (_number_or_none(rec["t"]) and rec["t"] is not None), path, line_no,
                "log[].t must be a number")
    unit = obs.get("unit")
    if isinstance(unit, dict):
        for k in ("main_pid", "restarts"):
            _expect(_number_or_none(unit.get(k)), path, line_no, "unit.%s must be a number" % k)
        for k in ("active", "sub"):
            _expect(unit.get(k) is None or isinstance(unit.get(k), str), path, line_no, "unit.%s must be text" % k)
    for g in obs.get("gpus") or ():
        _expect(isinstance(g, dict), path, line_no, "every gpus entry must be a JSON object")
        for k in ("index", "mem_used_mib", "mem_total_mib", "util_pct"):
            _expect(_number_or_none(g.get(k)), path, line_no, "gpus[].%s must be a number" % k)
    procs = obs.get("procs")
    if isinstance(procs, dict):
        for k in ("count", "cpu_s", "read_bytes", "write_bytes"):
            _expect(procs.get(k) is None or isinstance(procs.get(k), _NUM), path, line_no, "procs.%s must be a number" % k)
        tree = procs.get("tree")
        _expect(tree is None or (isinstance(tree, list) and all(isinstance(p, dict) and isinstance(p.get("pid"), int) for p in tree)),
                path, line_no, "procs.tree must be a list of {pid, ppid, name}")
    for s in obs.get("stacks") or ():
        _expect(isinstance(s, dict) and isinstance(s.get("frames"), list), path, line_no, "every stacks entry needs a frames list")
        _expect(s.get("rank") is None or isinstance(s.get("rank"), (int, str)), path, line_no,
                "stacks[].rank must be a number or a name")
    return obs


# One observation with every signal, 2000 log records and eight ranks' stacks is well
# under a megabyte; a longer line is not a trace, and is not read into memory whole.
MAX_LINE_BYTES = 16 * 2**20


def _no_constant(name):
    raise ValueError("%s is not a JSON number" % name)


def _lines(path, fh, max_line_bytes=MAX_LINE_BYTES):
    """(line number, text) of each line, read in bounded memory; TraceFormatError for a
    line that is too long, binary data or text that is not UTF-8."""
    line_no = 0
    while True:
        raw = fh.readline(max_line_bytes + 1)
        if not raw:
            return
        line_no += 1
        if len(raw) > max_line_bytes:
            raise TraceFormatError(path, line_no, "line longer than %d MiB: not a trace" % max(1, max_line_bytes // 2**20))
        if b"\0" in raw:
            raise TraceFormatError(path, line_no, "binary data (NUL bytes): not a JSON Lines text file")
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise TraceFormatError(path, line_no, "not UTF-8 text (byte 0x%02x at column %d)" % (
                raw[e.start], e.start + 1))
        yield line_no, text


def _finite_float(text):
    value = float(text)
    if not math.isfinite(value):
        raise ValueError("%s is out of range for a number" % text[:40])
    return value


def parse_json_line(text):
    """One JSON value of a line: NaN, Infinity and overflowing numbers refused, nesting
    bounded; ValueError."""
    try:
        return json.loads(text, parse_constant=_no_constant, parse_float=_finite_float)
    except RecursionError:
        raise ValueError("nested too deeply")


def iter_trace(fh, path="<trace>", max_line_bytes=MAX_LINE_BYTES):
    """The header, then each observation, of the trace open in fh (binary), checked one line
    at a time: a reader that consumes them as they come holds one line in memory, whatever
    the trace's size. TraceFormatError on anything malformed, where it is met."""
    header, prev_t = None, None
    for line_no, line in _lines(path, fh, max_line_bytes):
        if not line.strip():
            continue
        try:
            item = parse_json_line(line)
        except ValueError as e:
            raise TraceFormatError(path, line_no, "not valid JSON (%s)" % e)
        if header is None:
            header = check_header(item, path, line_no)
            yield header
            continue
        check_observation(item, prev_t, path, line_no)
        prev_t = item["t"]
        yield item
    if header is None:
        raise TraceFormatError(path, 1, "empty file: no %s header" % FORMAT)


def read_trace_file(fh, path="<trace>"):
    """(header, observations) of the trace open in fh (binary); TraceFormatError on anything malformed."""
    items = iter_trace(fh, path)
    header = next(items)
    return header, list(items)


def read_trace(path):
    """(header, observations) of a trace file; TraceFormatError on anything malformed."""
    try:
        f = open(path, "rb")
    except OSError as e:
        raise TraceFormatError(path, 0, "cannot open: %s" % e.strerror)
    with f:
        return read_trace_file(f, path)


def trace_header(name, unit, poll_s, gpus, description="", settings=None, load_conditions=None, layout=None):
    """The first line of a trace. No `expect`: a recorded start carries no label.

    settings: the DetectorSettings that decide this start; recorded as `settings` (every
    field) with `code` (code_version()), so `replay` decides the trace as it was decided.
    load_conditions: the LoadConditions (or their dict) the start's ETA estimates with, so
    `replay --eta` estimates as the start did.
    layout: the server's ServerLayout (its nodes, from its command line), recorded as `server` so
    `replay` knows them as the watch did (the command line itself may hold a key).
    """
    header = {"format": FORMAT, "name": name, "unit": unit, "poll_s": float(poll_s)}
    if gpus:  # a host where nvidia-smi could not be read leaves the count out
        header["gpus"] = int(gpus)
    header["description"] = description
    if settings is not None:
        header["settings"] = settings.to_dict()
        header["code"] = code_version()
    if load_conditions is not None:
        header["load_conditions"] = _conditions_dict(load_conditions)
    if layout is not None:
        header["server"] = layout.to_dict()
    return header


def _conditions_dict(conditions):
    return conditions.to_dict() if hasattr(conditions, "to_dict") else dict(conditions)


_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def _collection_version(root):
    """`version` of the collection whose root is root: galaxy.yml (a checkout) or
    MANIFEST.json (an installed collection); None when neither is there (the copy of
    module_utils the service role installs on a host)."""
    try:
        with open(os.path.join(root, "MANIFEST.json"), encoding="utf-8") as fh:
            return str(json.load(fh)["collection_info"]["version"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    try:
        with open(os.path.join(root, "galaxy.yml"), encoding="utf-8") as fh:
            for line in fh:
                key, sep, value = line.partition(":")
                if sep and key.strip() == "version" and not line[0].isspace():
                    return value.split("#", 1)[0].strip().strip("'\"") or None
    except OSError:
        pass
    return None


def _git_commit(root):
    """The commit checked out at root (read from .git, no git command), or None."""
    git = os.path.join(root, ".git")
    try:
        if os.path.isfile(git):   # a worktree or submodule: "gitdir: PATH"
            with open(git, encoding="utf-8") as fh:
                git = os.path.join(root, fh.read().split(":", 1)[1].strip())
        with open(os.path.join(git, "HEAD"), encoding="utf-8") as fh:
            head = fh.read().strip()
        if not head.startswith("ref:"):
            return head or None
        ref = head[4:].strip()
        common = git
        if os.path.isfile(os.path.join(git, "commondir")):
            with open(os.path.join(git, "commondir"), encoding="utf-8") as fh:
                common = os.path.join(git, fh.read().strip())
        for base in (git, common):
            try:
                with open(os.path.join(base, ref), encoding="utf-8") as fh:
                    return fh.read().strip() or None
            except OSError:
                pass
        with open(os.path.join(common, "packed-refs"), encoding="utf-8") as fh:
            for line in fh:
                sha, dummy_sep, name = line.strip().partition(" ")
                if name == ref:
                    return sha
    except (OSError, IndexError):
        pass
    return None


def code_version(root=_ROOT):
    """{"collection": galaxy.yml's version, "commit": the git commit}: the code that
    decided; either is None where it cannot be read."""
    return {"collection": _collection_version(root), "commit": _git_commit(root)}


def header_settings(header):
    """The detector settings a trace's header records (a dict of overrides), or None for a
    trace recorded without them (the corpus, older traces)."""
    settings = header.get("settings")
    return settings if isinstance(settings, dict) else None


def _relative_t(ts, t0):
    return round(float(ts) - t0, 3)


def relative_observation(obs, t0):
    """A copy of a probe observation with `ts` (epoch seconds) turned into `t` (since t0).

    An observation that already has `t` keeps it. Log records get the same treatment and
    their text is passed through redact, so a key that slipped into a log line
    never reaches a trace.
    """
    out = {k: v for k, v in obs.items() if k != "ts"}
    if "t" not in out:
        if "ts" not in obs:
            raise ValueError("observation has neither 't' nor 'ts'")
        out["t"] = _relative_t(obs["ts"], t0)
    if "log" in obs:
        records = []
        for rec in obs["log"] or []:
            new = {k: v for k, v in rec.items() if k != "ts"}
            if "t" not in new:
                new["t"] = _relative_t(rec.get("ts", obs.get("ts", t0)), t0)
            new["msg"] = redact(str(rec.get("msg", "")))
            records.append(new)
        out["log"] = records
    # `t` first, the order the format's examples use
    return {"t": out.pop("t"), **out}


class TraceWriter:
    """Append-only writer of one trace file: header on open, one line per observation."""

    def __init__(self, path, header):
        if header.get("format") != FORMAT:
            raise ValueError("trace header must have format %r" % FORMAT)
        parent = os.path.dirname(path)
        if parent:
            os.makedirs(parent, exist_ok=True)
        self.path = path
        self.count = 0
        self._fh = open(path, "w", encoding="utf-8")
        self._write(header)

    def _write(self, obj):
        self._fh.write(json.dumps(obj, ensure_ascii=False, sort_keys=False) + "\n")
        self._fh.flush()

    def append(self, observation, assessment=None, load_conditions=None, eta=None):
        """One observation; with the watcher's assessment of it (an Assessment or its
        dict) under `assessment`, the optional field replay ignores; the ETA's conditions
        where they changed since the header or the last line that had them, and the
        estimate shown (an Estimate or its dict)."""
        if "t" not in observation:
            raise ValueError("trace observations need 't' (use relative_observation)")
        line = dict(observation)
        if assessment is not None:
            line["assessment"] = assessment.to_dict() if hasattr(assessment, "to_dict") else dict(assessment)
        if load_conditions is not None:
            line["load_conditions"] = _conditions_dict(load_conditions)
        if eta is not None:
            line["eta"] = eta.to_dict() if hasattr(eta, "to_dict") else dict(eta)
        self._write(line)
        self.count += 1

    def close(self):
        if not self._fh.closed:
            self._fh.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False
