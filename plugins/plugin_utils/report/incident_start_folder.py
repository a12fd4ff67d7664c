"""A start the unit's supervisor recorded on the host (module_utils/records/start_records.py:
<starts root>/<stamp>/ with verdict.json, trace.jsonl and diagnostics/) read as the run
record a report is built from: one attempt, decided by the supervisor, its time to ready
against the ready starts before it in the same root (their verdict.json).

    start_folder_run(start_dir) -> a run.json-shaped dict, or ValueError naming the problem
"""
import os
import time

from ansible_collections.sglang_ops.serving.plugins.module_utils.records import start_records, trace_format
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.failure_classes import FAILURE_CLASSES
from ansible_collections.sglang_ops.serving.plugins.module_utils.services.start_outlook import start_time_to_ready

MAX_VERDICT_BYTES = 4 * 2**20


def is_start_folder(path):
    """A supervisor's per-start folder: verdict.json and no run.json (a restart run's folder)."""
    return os.path.isfile(os.path.join(path, start_records.VERDICT)) and not os.path.exists(os.path.join(path, "run.json"))


def _iso(epoch_s):
    if not isinstance(epoch_s, (int, float)) or isinstance(epoch_s, bool):
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch_s))


def read_json_record(path, max_bytes, kind):
    """The JSON value of a record file (a run.json, a verdict.json) of at most max_bytes;
    ValueError naming the file when it is larger, not UTF-8 or not JSON. OSError passes up:
    what an unreadable file means is the caller's to say."""
    with open(path, "rb") as fh:
        raw = fh.read(max_bytes + 1)
    if len(raw) > max_bytes:
        raise ValueError("%s: larger than %d MiB: not a %s" % (path, max_bytes // 2**20, kind))
    try:
        return trace_format.parse_json_line(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ValueError("%s: not UTF-8 text (byte 0x%02x at offset %d)" % (path, raw[exc.start], exc.start))
    except ValueError as exc:
        raise ValueError("%s: not JSON: %s" % (path, exc))


def _read_verdict(folder):
    path = os.path.join(folder, start_records.VERDICT)
    try:
        record = read_json_record(path, MAX_VERDICT_BYTES, "start record")
    except OSError as exc:
        raise ValueError("cannot read %s: %s" % (path, exc.strerror or exc))
    if not isinstance(record, dict) or not isinstance(record.get("verdict"), str):
        raise ValueError("%s: not a start record (no verdict)" % path)
    return record


def _decided_t(folder):
    """When the supervisor's watch decided the start (the first final assessment its trace
    stored), or None: the record's ended_at is later, after the diagnostics and the stop."""
    path = os.path.join(folder, start_records.TRACE)
    try:
        if os.path.getsize(path) > start_records.TRACE_MAX_BYTES:
            return None
        dummy_header, observations = trace_format.read_trace(path)
    except (OSError, ValueError):
        return None
    for obs in observations:
        assessment = obs.get("assessment")
        if isinstance(assessment, dict) and assessment.get("final") and isinstance(assessment.get("t"), (int, float)):
            return assessment["t"]
    return None


def _outcome(record):
    """ready, gave_up (a restart cannot help, or systemd's start limit stopped the restarts),
    interrupted (stopped, or the supervisor was killed) or restarted (systemd restarts a
    failure a restart can help)."""
    verdict = record.get("verdict")
    if verdict == "ready" and record.get("reason_code") in (None, "ready"):
        return "ready"
    if record.get("needed_human"):
        return "gave_up"
    if verdict in ("stopped", "running", "interrupted"):
        return "interrupted"
    fc = FAILURE_CLASSES.get(record.get("reason_code"))
    return "gave_up" if fc is not None and not fc.restart_helps else "restarted"


def start_folder_run(start_dir):
    """The run record of one supervised start (see the module)."""
    folder = os.path.realpath(start_dir)          # `current` is a link to the start's folder
    root, name = os.path.dirname(folder), os.path.basename(folder)
    record = _read_verdict(folder)
    record["dir"] = folder
    if record["verdict"] == "running" and start_records.current_name(root) != name:
        record.update(verdict="interrupted", reason="the supervisor ended without a verdict (killed)")
    earlier = [r for r in (start_records.read_record(root, n) for n in start_records.start_dirs(root) if n < name)
               if r is not None]
    outcome = _outcome(record)
    started, ended = record.get("started_at"), record.get("ended_at")
    elapsed = record.get("ready_after_s") if record["verdict"] == "ready" else _decided_t(folder)
    if elapsed is None and record["verdict"] != "ready" and isinstance(started, (int, float)) and isinstance(ended, (int, float)):
        elapsed = ended - started
    has_diagnostics = os.path.isdir(os.path.join(folder, start_records.DIAGNOSTICS))
    needed = record.get("needed_human") or {}
    attempt = {"n": 1, "trace": start_records.TRACE if os.path.isfile(os.path.join(folder, start_records.TRACE)) else None,
               "verdict": record["verdict"], "phase": record.get("phase"), "reason_code": record.get("reason_code"),
               "reason": record.get("reason") or "", "t": round(elapsed, 3) if elapsed is not None else None,
               "started_epoch_s": started if isinstance(started, (int, float)) else None,
               "exit_code": record.get("exit_code"), "decided_by": "supervisor",
               "action": {"ready": "ready", "gave_up": "handed_over", "restarted": "restarted by systemd",
                          "interrupted": "interrupted"}[outcome],
               "diagnostics": start_records.DIAGNOSTICS if has_diagnostics else None}
    return {"host": record.get("host") or "", "unit": record.get("unit"), "started": _iso(started),
            "finished": _iso(ended), "outcome": outcome, "decided_by": "supervisor",
            "gave_up_because": needed.get("words") if needed else None,
            "needed_human_why": needed.get("why") if needed else None,
            "source": "start %s recorded by the unit's supervisor (%s)" % (name, folder),
            "attempts": [attempt], "time_to_ready": start_time_to_ready(record, earlier)}
