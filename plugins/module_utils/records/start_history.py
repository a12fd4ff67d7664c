"""The history of a host's starts: how long each phase took and how much it read.

A start record is built from the trace the project already writes for every start (the
detector replayed over it, so the phases are the ones the live watch saw):

    {"host", "model", "unit", "source", "outcome": "ready|stalled|failed|undecided",
     "ready_after_s": seconds or None,
     "phases": [{"phase", "started_s", "duration_s", "read_bytes",   # in the order entered
                 "gpu_mem_mib"}, ...]   # GPU memory used (all GPUs) when the phase ended, or None
     "shards_total": int or None}

Two layouts are read:
  artifacts/<host>/<stamp>/attempt-<n>/trace.jsonl   (the restart action, controller side)
  /var/lib/sglang-ops/starts/<stamp>/trace.jsonl     (a host supervising its own starts,
                                                      with verdict.json beside it)
Only ready starts make the history that ETAs are estimated from (load_history). Standard
library only: this runs on the host too.
"""
import glob
import os

from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.detector import Detector
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.detector_settings import DetectorSettings, from_overrides
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.phases import phase_rank
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.sglang_dialect import model_path_of
from ansible_collections.sglang_ops.serving.plugins.module_utils.records import safe_files, start_records
from ansible_collections.sglang_ops.serving.plugins.module_utils.records.trace_format import TraceFormatError, iter_trace

HISTORY_LIMIT = 5          # the most recent ready starts that make "usual"
SUPERVISOR_STARTS_DIR = start_records.DEFAULT_ROOT
# The supervisor reads its earlier starts when a start begins: a trace larger than this
# (hours of polls, or a file put there) counts by its verdict.json alone, whose phase
# durations are what the ETA needs, so a start never waits on replaying it.
HISTORY_TRACE_MAX_BYTES = 4 << 20
# A trace is replayed one line at a time (never read whole); a line of the history longer
# than this is not an observation this project wrote (one with every signal is well under).
HISTORY_LINE_MAX_BYTES = 2 << 20


def model_of(observations):
    """The model path SGLang printed in its server_args line, or None."""
    for obs in observations:
        for rec in obs.get("log") or ():
            model = model_path_of(rec.get("msg"))
            if model:
                return model
    return None


def _read_bytes(obs):
    procs = obs.get("procs") or {}
    value = procs.get("read_bytes")
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def record_from_trace(header, observations, host=None, source=None, settings=None):
    """The start record of one trace: the detector replayed, phase by phase. observations:
    any iterable, consumed once (a trace streamed by iter_trace)."""
    det = Detector(settings or DetectorSettings())
    phases, last, shards_total, model = [], None, None, None
    first_read = last_read = mem = None
    for obs in observations:
        model = model or model_of([obs])
        a = det.observe(obs)
        last = a
        read = _read_bytes(obs)
        if read is not None:
            first_read = read if first_read is None else first_read
            last_read = read
        if (a.progress or {}).get("gpu_mem_used_mib") is not None:
            mem = a.progress["gpu_mem_used_mib"]
        if not phases or phases[-1]["phase"] != a.phase:
            began = 0.0 if not phases else a.t
            if phases:
                phases[-1]["duration_s"] = round(began - phases[-1]["started_s"], 3)
                phases[-1]["read_bytes"] = max(0, (last_read or 0) - phases[-1].pop("_read_at"))
                phases[-1]["gpu_mem_mib"] = mem
            phases.append({"phase": a.phase, "started_s": began, "duration_s": 0.0,
                           "_read_at": last_read if last_read is not None else 0})
        total = (a.progress or {}).get("shards_total")
        shards_total = total or shards_total
        if a.final:
            break
    if phases:
        end = phases[-1]
        end["duration_s"] = round((last.t if last else 0.0) - end["started_s"], 3)
        end["read_bytes"] = max(0, (last_read or 0) - end.pop("_read_at"))
        end["gpu_mem_mib"] = mem
    outcome = last.verdict if last is not None and last.final else "undecided"
    return {"host": host, "model": model or header.get("unit"), "unit": header.get("unit"),
            "source": source, "outcome": outcome,
            "ready_after_s": last.t if outcome == "ready" else None,
            "phases": phases, "shards_total": shards_total,
            "read_bytes": max(0, (last_read or 0) - (first_read or 0)) if last_read is not None else None}


def record_from_verdict(verdict, host=None, source=None):
    """A start record from a supervisor's verdict.json alone (its trace is gone)."""
    durations = verdict.get("phase_durations") or {}
    phases, began = [], 0.0
    for phase in sorted(durations, key=phase_rank):   # verdict.json keeps its keys sorted by name
        seconds = durations[phase]
        phases.append({"phase": phase, "started_s": began, "duration_s": float(seconds), "read_bytes": None})
        began += float(seconds)
    return {"host": host, "model": verdict.get("model") or verdict.get("unit"), "unit": verdict.get("unit"),
            "source": source, "outcome": verdict.get("verdict", "undecided"),
            "ready_after_s": verdict.get("ready_after_s"), "phases": phases, "shards_total": None,
            "read_bytes": None}


def read_start(trace_path, host=None, max_trace_bytes=None):
    """The record of the start whose trace is trace_path (verdict.json beside it is used
    when the trace cannot be read or is over max_trace_bytes); None when neither can. Both
    are opened without following a link (safe_files) and read within their bounds. The
    default bound: HISTORY_TRACE_MAX_BYTES for a supervisor's start (a verdict.json beside
    its trace), start_records.TRACE_MAX_BYTES for a trace alone (the controller's artifacts)."""
    folder_path, name = os.path.split(trace_path)
    try:
        folder = safe_files.Folder.open(folder_path or ".", owned_alike=False)
    except OSError:
        return None
    with folder:
        if max_trace_bytes is None:
            beside = start_records.VERDICT in dict(folder.entries())
            max_trace_bytes = HISTORY_TRACE_MAX_BYTES if beside else start_records.TRACE_MAX_BYTES
        try:
            with folder.open_binary(name, max_trace_bytes) as fh:
                items = iter_trace(fh, trace_path, HISTORY_LINE_MAX_BYTES)
                return record_from_trace(next(items), items, host=host, source=trace_path)
        except (TraceFormatError, OSError):
            pass
        try:
            verdict = folder.read_json(start_records.VERDICT, start_records.VERDICT_MAX_BYTES)
            return record_from_verdict(verdict, host=host, source=os.path.join(folder_path, start_records.VERDICT))
        except (OSError, ValueError, AttributeError):
            return None


def _attempt_key(path):
    stamp_dir = os.path.dirname(os.path.dirname(path))
    attempt = os.path.basename(os.path.dirname(path)).rpartition("-")[2]
    return (os.path.basename(stamp_dir), int(attempt) if attempt.isdigit() else 0)


def artifact_traces(artifacts_root, host):
    """Trace paths of every attempt the restart action recorded for host, oldest first."""
    pattern = os.path.join(artifacts_root, host, "*", "attempt-*", "trace.jsonl")
    return sorted(glob.glob(pattern), key=_attempt_key)


def supervisor_traces(starts_dir=SUPERVISOR_STARTS_DIR):
    """Trace paths (or where they would be, beside verdict.json) of every start a host
    supervisor recorded, oldest first: its start folders (never links, start_records)."""
    return [os.path.join(starts_dir, name, start_records.TRACE) for name in start_records.start_dirs(starts_dir)]


def history_traces(paths):
    """Trace files named by paths: a file itself, a folder every *.jsonl under it (oldest
    start first within a folder of start folders); ValueError for a path that is neither."""
    out = []
    for path in paths:
        if os.path.isfile(path):
            out.append(path)
        elif os.path.isdir(path):
            found = glob.glob(os.path.join(path, "**", "*.jsonl"), recursive=True)
            out.extend(sorted(found, key=lambda p: os.path.relpath(p, path)))
        else:
            raise ValueError("--history %s: no such file or folder" % path)
    return out


def with_phase_history(settings, history):
    """`settings` with blind_wait_history_s taken from `history` (ready start records): each
    phase's longest duration among them, what rule 5 weighs a wait without a power reading
    against. Unchanged without history, or where the settings already name one (an
    operator's override, or a trace's recorded settings)."""
    longest = {}
    for rec in history or ():
        for p in rec.get("phases") or ():
            seconds = p.get("duration_s")
            if isinstance(seconds, (int, float)) and seconds > 0:
                longest[p["phase"]] = max(longest.get(p["phase"], 0.0), float(seconds))
    if not longest or settings.blind_wait_history_s:
        return settings
    return from_overrides({"blind_wait_history_s": ["%s=%g" % (phase, round(seconds, 1))
                                                    for phase, seconds in sorted(longest.items())]}, base=settings)


def load_history(trace_paths, host=None, model=None, limit=HISTORY_LIMIT, exclude=(), max_trace_bytes=None):
    """The `limit` most recent ready starts among trace_paths (oldest first), of `model`
    when given; paths in `exclude` (the start being watched) are left out; a trace over
    max_trace_bytes counts by its verdict.json (read_start)."""
    records = []
    skip = set(os.path.abspath(p) for p in exclude)
    for path in reversed(list(trace_paths)):
        if os.path.abspath(path) in skip:
            continue
        rec = read_start(path, host=host, max_trace_bytes=max_trace_bytes)
        if rec is None or rec["outcome"] != "ready":
            continue
        if model is not None and rec["model"] not in (model, None):
            continue
        records.append(rec)
        if len(records) >= limit:
            break
    return list(reversed(records))
