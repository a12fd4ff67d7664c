"""Write an observed start as a replayable trace (format sglang-trace/1): the restart
action on the controller and the unit's supervisor on the host write it the same way.

The probe reports wall-clock epoch seconds in `ts` (also in each log record); a trace
carries `t`, seconds since the watch began. relative_observation() does that conversion,
TraceWriter appends one JSON line per observation and flushes it, so a trace is complete
up to the last poll even when the controller is interrupted.
"""
import json
import os

from ansible_collections.sglang_ops.serving.plugins.module_utils import trace_format
from ansible_collections.sglang_ops.serving.plugins.module_utils.redaction import redact as redact_secrets

TRACE_FORMAT = trace_format.FORMAT


def trace_header(name, unit, poll_s, gpus, description=""):
    """The first line of a trace. No `expect`: a recorded start carries no label."""
    header = {"format": TRACE_FORMAT, "name": name, "unit": unit, "poll_s": float(poll_s)}
    if gpus:  # a host where nvidia-smi could not be read leaves the count out
        header["gpus"] = int(gpus)
    header["description"] = description
    return header


def _relative_t(ts, t0):
    return round(float(ts) - t0, 3)


def relative_observation(obs, t0):
    """A copy of a probe observation with `ts` (epoch seconds) turned into `t` (since t0).

    An observation that already has `t` keeps it. Log records get the same treatment and
    their text is passed through redact_secrets, so a key that slipped into a log line
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
            new["msg"] = redact_secrets(str(rec.get("msg", "")))
            records.append(new)
        out["log"] = records
    # `t` first, the order the format's examples use
    return {"t": out.pop("t"), **out}


class TraceWriter:
    """Append-only writer of one trace file: header on open, one line per observation."""

    def __init__(self, path, header):
        if header.get("format") != TRACE_FORMAT:
            raise ValueError("trace header must have format %r" % TRACE_FORMAT)
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

    def append(self, observation):
        if "t" not in observation:
            raise ValueError("trace observations need 't' (use relative_observation)")
        self._write(observation)
        self.count += 1

    def close(self):
        if not self._fh.closed:
            self._fh.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
        return False


def read_trace(path):
    """(header, observations) of a trace file; ValueError (TraceFormatError) names the bad
    line. The one reader of the format: module_utils/trace_format.py."""
    return trace_format.read_trace(path)
