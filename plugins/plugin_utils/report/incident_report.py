"""Write the incident report of a restart run or of a bare trace (controller side).

    write_incident_report(run_dir)          -> {"markdown": path, "json": path, "chart": path}
    write_trace_report(trace_path, out_dir) -> the same, plus "trace": the copy beside it

A run directory is laid out as docs/architecture.md says (run.json, attempt-N/trace.jsonl,
attempt-N/diagnostics/*.txt); a supervisor's per-start folder (verdict.json, trace.jsonl,
diagnostics/) is read as a run of one attempt (incident_start_folder.py). Every
attempt's diagnostics are in the report, not only the last one's. Phases, evidence and the decision come from the trace
itself: the watch writes its assessment beside each observation, the one it acted on
included, so the report tells what was decided. A trace without them (recorded by an
older release, or the shared corpus) is replayed through the detector instead. run.json,
when there is one, says what was done. Next steps come from docs/runbook.md, the
section of the failure class.

Every record is read through record_files.RecordFiles (safe_files: no link followed, the
folder's owner, bounded, no FIFO or device opened); what was refused is listed in the
report ("Not read") with why.
"""
import json
import os

from ansible_collections.sglang_ops.serving.plugins.module_utils.records.redaction import redact_tree
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.report import incident_start_folder
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.report import runbook as runbook_mod
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.report.incident_model import build_incident
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.report.record_files import RecordFiles
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.report.report_markdown import render_markdown
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.report.timeline_svg import render_svg
from ansible_collections.sglang_ops.serving.plugins.module_utils.records import safe_files, start_records
from ansible_collections.sglang_ops.serving.plugins.module_utils.records.trace_format import read_trace_file
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.shared import replay

REPORT_MD = "report.md"
REPORT_JSON = "report.json"
CHART_SVG = "timeline.svg"
TRACE_COPY = "trace.jsonl"


class ReportInputError(ValueError):
    """The input is not a trace or run directory the report can be built from."""


def _stored_assessments(observations):
    """Assessments the watcher stored in the trace itself (key `assessment`), if all have one."""
    found = [obs.get("assessment") for obs in observations]
    return found if found and all(isinstance(a, dict) for a in found) else None


def _load_trace(files, rel):
    """(header, observations) of the trace rel of files (a RecordFiles); None when it is
    refused (files.skipped says why) or not there."""
    path = os.path.join(files.folder, rel)
    try:
        return files.trace(rel)
    except OSError as exc:
        raise ReportInputError("cannot read trace %s: %s" % (path, exc.strerror or exc))
    except ValueError as exc:
        raise ReportInputError(str(exc))


def every_attempts_diagnostics(files, attempts):
    """{name: text} of the diagnostics of every attempt, oldest first: each attempt's files
    as "attempt-<n>/<file>" when several attempts captured some, the bare file names when
    one did (a run whose last start captured nothing still shows what the earlier ones did)."""
    found = []
    for i, attempt in enumerate(attempts, 1):
        found_here = files.diagnostics(attempt["diagnostics"]) if attempt.get("diagnostics") else {}
        if found_here:
            found.append((attempt.get("n") or i, found_here))
    if len(found) == 1:
        return found[0][1]
    return {"attempt-%s/%s" % (n, name): text for n, found_here in found for name, text in found_here.items()}


def _write(out_dir, incident, trace_names, runbook_path):
    os.makedirs(out_dir, exist_ok=True)
    paths = {
        "markdown": os.path.join(out_dir, REPORT_MD),
        "json": os.path.join(out_dir, REPORT_JSON),
        "chart": os.path.join(out_dir, CHART_SVG),
    }
    data = redact_tree(incident.to_dict())
    data["files"] = {"markdown": REPORT_MD, "json": REPORT_JSON, "chart": CHART_SVG, "traces": list(trace_names)}
    href = _runbook_href(runbook_path, out_dir)
    _atomic_write(paths["markdown"], render_markdown(incident, chart_name=CHART_SVG, trace_names=trace_names,
                                                     runbook_href=href))
    _atomic_write(paths["json"], json.dumps(data, indent=2, ensure_ascii=False) + "\n")
    _atomic_write(paths["chart"], render_svg(incident))
    return paths


def _runbook_href(runbook_path, out_dir):
    """A relative link when the report sits in the same checkout as the runbook (artifacts/),
    else the runbook's absolute path."""
    runbook_real, out_real = os.path.realpath(runbook_path), os.path.realpath(out_dir)
    root = os.path.dirname(os.path.dirname(runbook_real))  # <root>/docs/runbook.md
    if out_real == root or out_real.startswith(root + os.sep):
        return os.path.relpath(runbook_real, out_real).replace(os.sep, "/")
    return runbook_real


def _atomic_write(path, text):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.replace(tmp, path)


def _runbook(path):
    try:
        return runbook_mod.load_runbook(path)
    except OSError:
        return {}


# The fields of run.json the report reads, and what each must be (None always allowed).
_RUN_TEXT = ("host", "unit", "started", "finished", "outcome", "gave_up_because", "phase", "reason_code", "reason",
             "source")
_ATTEMPT_TEXT = ("verdict", "phase", "reason_code", "reason", "action", "trace", "diagnostics", "started")
_ATTEMPT_NUMBERS = ("n", "t", "started_epoch_s")
MAX_RUN_JSON_BYTES = 64 * 2**20


def _expect(cond, run_path, where, what, value):
    if not cond:
        raise ReportInputError("%s: %s must be %s, got %s" % (run_path, where, what, json.dumps(value)[:80]))


def check_run(run, run_path):
    """ReportInputError naming the field when run.json is not what the restart writes."""
    _expect(isinstance(run, dict), run_path, "the file", "a JSON object", run)
    for key in _RUN_TEXT:
        _expect(run.get(key) is None or isinstance(run[key], str), run_path, key, "text", run.get(key))
    for key in ("settings", "preflight", "options"):
        _expect(run.get(key) is None or isinstance(run[key], dict), run_path, key, "a JSON object", run.get(key))
    pre = run.get("preflight") or {}
    for key in ("gpu_holders", "orphans_killed"):
        _expect(pre.get(key) is None or isinstance(pre[key], list), run_path, "preflight." + key, "a list", pre.get(key))
    for n, holder in enumerate(pre.get("gpu_holders") or []):
        _expect(isinstance(holder, dict), run_path, "preflight.gpu_holders[%d]" % n, "a JSON object", holder)
    attempts = run.get("attempts")
    _expect(attempts is None or isinstance(attempts, list), run_path, "attempts", "a list", attempts)
    for n, attempt in enumerate(attempts or []):
        where = "attempts[%d]" % n
        _expect(isinstance(attempt, dict), run_path, where, "a JSON object", attempt)
        for key in _ATTEMPT_TEXT:
            _expect(attempt.get(key) is None or isinstance(attempt[key], str), run_path, where + "." + key, "text",
                    attempt.get(key))
        for key in _ATTEMPT_NUMBERS:
            value = attempt.get(key)
            _expect(value is None or (isinstance(value, (int, float)) and not isinstance(value, bool)), run_path,
                    where + "." + key, "a number", value)
        for key in ("trace", "diagnostics"):
            rel = attempt.get(key)
            _expect(not rel or (not os.path.isabs(rel) and ".." not in rel.split("/")), run_path, where + "." + key,
                    "a path inside the run folder", rel)
    return run


def _read_run(files):
    run_dir = files.folder
    run_path = os.path.join(run_dir, "run.json")
    try:
        run = files.json("run.json", MAX_RUN_JSON_BYTES, "run record")
    except OSError as exc:
        raise ReportInputError("%s is not a run directory (no readable run.json: %s)" % (run_dir, exc.strerror or exc))
    except ValueError as exc:
        raise ReportInputError(str(exc))
    return check_run(run, run_path)


def _attempt_trace(files, attempt, settings):
    """(header, observations, assessments) of one attempt's trace; empty when it has none
    (or it was refused)."""
    trace = _load_trace(files, attempt["trace"]) if attempt.get("trace") else None
    if trace is None:
        return {}, [], []
    header, observations = trace
    return header, observations, _stored_assessments(observations) or replay.assessments(observations, replay.settings_or_defaults(settings), header)


def daemon_start_traces(files, run):
    """[(n, observations)] of the weight cache daemon's start the run followed before attempt
    n (run.json weight_cache.cold_restarts; its last start's trace in the folder)."""
    out = []
    for cold in ((run.get("weight_cache") or {}).get("cold_restarts") or []):
        starts = cold.get("daemon_starts") or []
        folder = cold.get("folder")
        if not starts or not isinstance(folder, str) or not isinstance(cold.get("before_attempt"), int):
            continue
        rel = "%s/attempt-%d/trace.jsonl" % (folder, len(starts))
        try:
            trace = _load_trace(files, rel)
        except (ReportInputError, ValueError):
            continue   # the daemon's trace is context only: the report goes on without it
        if trace is not None:
            out.append((cold["before_attempt"], trace[1]))
    return out


def write_incident_report(run_dir, runbook_path=None, out_dir=None):
    """Build report.md, report.json and timeline.svg inside a restart run directory
    (or in out_dir, with links back to the run's traces)."""
    if incident_start_folder.is_start_folder(run_dir):
        run_dir = os.path.realpath(run_dir)
        files = RecordFiles(run_dir)
        try:
            run = check_run(incident_start_folder.start_folder_run(run_dir, files), os.path.join(run_dir, "verdict.json"))
        except ValueError as exc:
            raise ReportInputError(str(exc))
    else:
        files = RecordFiles(run_dir)
        run = _read_run(files)
    attempts = run.get("attempts") or []
    trace_names = [a["trace"] for a in attempts if a.get("trace")]
    traces = [_attempt_trace(files, a, run.get("settings")) for a in attempts] or [({}, [], [])]
    header, observations, assessments = traces[-1]
    diagnostics = every_attempts_diagnostics(files, attempts)
    runbook_path = runbook_path or runbook_mod.default_runbook_path()
    incident = build_incident(header, observations, assessments, run=run, diagnostics=diagnostics,
                              runbook=_runbook(runbook_path), host=run.get("host", ""), trace_files=trace_names,
                              earlier_attempts=[(obs, assessed) for dummy, obs, assessed in traces[:-1]],
                              daemon_starts=daemon_start_traces(files, run))
    incident.skipped = list(files.skipped)
    out_dir = out_dir or run_dir
    links = [os.path.relpath(os.path.join(run_dir, n), os.path.abspath(out_dir)).replace(os.sep, "/")
             for n in trace_names]
    return _write(out_dir, incident, links, runbook_path)


# The name the restart action calls on give-up.
write_run_report = write_incident_report


def write_trace_report(trace_path, out_dir, runbook_path=None):
    """Build the report of a bare trace into out_dir, with a redacted copy of the trace. The
    trace is opened as safe_files opens a file named by its path (not a link, a regular
    file, any owner)."""
    try:
        with safe_files.open_binary(trace_path, start_records.TRACE_MAX_BYTES) as fh:
            header, observations = read_trace_file(fh, trace_path)
    except OSError as exc:
        raise ReportInputError("cannot read trace %s: %s" % (trace_path, exc.strerror or exc))
    except ValueError as exc:
        raise ReportInputError(str(exc))
    assessments = _stored_assessments(observations) or replay.assessments(observations, replay.settings_or_defaults(None), header)
    runbook_path = runbook_path or runbook_mod.default_runbook_path()
    incident = build_incident(header, observations, assessments, run=None,
                              runbook=_runbook(runbook_path), trace_files=[TRACE_COPY])
    paths = _write(out_dir, incident, [TRACE_COPY], runbook_path)
    paths["trace"] = os.path.join(out_dir, TRACE_COPY)
    with open(paths["trace"], "w", encoding="utf-8") as fh:
        for obj in [header] + observations:
            fh.write(json.dumps(redact_tree(obj), ensure_ascii=False) + "\n")
    return paths
