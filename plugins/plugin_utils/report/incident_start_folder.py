"""A start the unit's supervisor recorded on the host (module_utils/records/start_records.py:
<starts root>/<stamp>/ with verdict.json, trace.jsonl and diagnostics/) read as the run
record a report is built from: one attempt, decided by the supervisor, its time to ready
against the ready starts before it in the same root (their verdict.json).

    start_folder_run(start_dir, files=None) -> a run.json-shaped dict, or ValueError naming the problem

Its files are read through record_files.RecordFiles (safe_files: no link followed, owner
checked, bounded); `current` is the one link followed, to name the start.
"""
import os
import time

from ansible_collections.sglang_ops.serving.plugins.module_utils.records import start_records
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.failure_classes import FAILURE_CLASSES
from ansible_collections.sglang_ops.serving.plugins.module_utils.services.start_outlook import start_time_to_ready
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.report.record_files import RecordFiles, is_regular_file

MAX_VERDICT_BYTES = 4 * 2**20


def is_start_folder(path):
    """A supervisor's per-start folder: verdict.json (a file, not a link) and no run.json (a
    restart run's folder)."""
    return is_regular_file(os.path.join(path, start_records.VERDICT)) and not os.path.lexists(os.path.join(path, "run.json"))


def _iso(epoch_s):
    if not isinstance(epoch_s, (int, float)) or isinstance(epoch_s, bool):
        return None
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(epoch_s))


def _read_verdict(files):
    path = os.path.join(files.folder, start_records.VERDICT)
    try:
        record = files.json(start_records.VERDICT, MAX_VERDICT_BYTES, "start record")
    except OSError as exc:
        raise ValueError("cannot read %s: %s" % (path, exc.strerror or exc))
    if not isinstance(record, dict) or not isinstance(record.get("verdict"), str):
        raise ValueError("%s: not a start record (no verdict)" % path)
    return record


def _decided_t(files):
    """When the supervisor's watch decided the start (the first final assessment its trace
    stored), or None: the record's ended_at is later, after the diagnostics and the stop."""
    try:
        trace = files.trace(start_records.TRACE)
    except (OSError, ValueError):
        return None
    for obs in (trace or ({}, []))[1]:
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


def start_folder_run(start_dir, files=None):
    """The run record of one supervised start (see the module); files: the RecordFiles of
    its folder (what was skipped is kept there)."""
    folder = os.path.realpath(start_dir)          # `current` is a link to the start's folder
    root, name = os.path.dirname(folder), os.path.basename(folder)
    files = files or RecordFiles(folder)
    record = _read_verdict(files)
    record["dir"] = folder
    if record["verdict"] == "running" and start_records.current_name(root) != name:
        record.update(verdict="interrupted", reason="the supervisor ended without a verdict (killed)")
    earlier = [r for r in (start_records.read_record(root, n) for n in start_records.start_dirs(root) if n < name)
               if r is not None]
    outcome = _outcome(record)
    started, ended = record.get("started_at"), record.get("ended_at")
    elapsed = record.get("ready_after_s") if record["verdict"] == "ready" else _decided_t(files)
    if elapsed is None and record["verdict"] != "ready" and isinstance(started, (int, float)) and isinstance(ended, (int, float)):
        elapsed = ended - started
    # a link there too: reading it is refused, and the report says so
    has_diagnostics = os.path.lexists(os.path.join(folder, start_records.DIAGNOSTICS))
    needed = record.get("needed_human") or {}
    attempt = {"n": 1, "trace": start_records.TRACE if os.path.lexists(os.path.join(folder, start_records.TRACE)) else None,
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
