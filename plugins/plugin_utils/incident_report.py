"""Write the incident report of a restart run or of a bare trace (controller side).

    write_incident_report(run_dir)          -> {"markdown": path, "json": path, "chart": path}
    write_trace_report(trace_path, out_dir) -> the same, plus "trace": the copy beside it

A run directory is laid out as docs/architecture.md says (run.json, attempt-N/trace.jsonl,
attempt-N/diagnostics/*.txt). The trace is replayed through the same detector the restart
playbook uses to get phases and evidence; run.json, when there is one, says what was
decided and done. Next steps come from docs/runbook.md, the section of the failure class.
"""
import json
import os

from ansible_collections.sglang_ops.serving.plugins.module_utils.redaction import redact_tree
from ansible_collections.sglang_ops.serving.plugins.plugin_utils import runbook as runbook_mod
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.incident_model import build_incident
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.report_markdown import render_markdown
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.timeline_svg import render_svg
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.trace_writer import read_trace

REPORT_MD = "report.md"
REPORT_JSON = "report.json"
CHART_SVG = "timeline.svg"
TRACE_COPY = "trace.jsonl"


class ReportInputError(ValueError):
    """The input is not a trace or run directory the report can be built from."""


def replay(header, observations, settings=None):
    """The detector's assessment (as a dict) for every observation, in order."""
    from ansible_collections.sglang_ops.serving.plugins.module_utils.detector import Detector
    from ansible_collections.sglang_ops.serving.plugins.module_utils.detector_settings import DetectorSettings

    base = DetectorSettings()
    if settings:
        try:
            base = base.with_overrides(settings)
        except (ValueError, TypeError):
            # settings from a newer or older release: replay with today's defaults
            base = DetectorSettings()
    det = Detector(base, gpus=int(header.get("gpus") or 1), poll_s=float(header.get("poll_s") or 5.0))
    return [det.observe(obs).to_dict() for obs in observations]


def _stored_assessments(observations):
    """Assessments the watcher stored in the trace itself (key `assessment`), if all have one."""
    found = [obs.get("assessment") for obs in observations]
    return found if found and all(isinstance(a, dict) for a in found) else None


def _load_trace(path):
    try:
        return read_trace(path)
    except OSError as exc:
        raise ReportInputError("cannot read trace %s: %s" % (path, exc.strerror or exc))
    except ValueError as exc:
        raise ReportInputError(str(exc))


def _read_diagnostics(folder):
    out = {}
    if not folder or not os.path.isdir(folder):
        return out
    for name in sorted(os.listdir(folder)):
        path = os.path.join(folder, name)
        if os.path.isfile(path):
            with open(path, encoding="utf-8", errors="replace") as fh:
                out[name] = fh.read()
    return out


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


def write_incident_report(run_dir, runbook_path=None, out_dir=None):
    """Build report.md, report.json and timeline.svg inside a restart run directory
    (or in out_dir, with links back to the run's traces)."""
    run_path = os.path.join(run_dir, "run.json")
    try:
        with open(run_path, encoding="utf-8") as fh:
            run = json.load(fh)
    except OSError as exc:
        raise ReportInputError("%s is not a run directory (no readable run.json: %s)" % (run_dir, exc.strerror or exc))
    except ValueError as exc:
        raise ReportInputError("%s: not JSON: %s" % (run_path, exc))
    attempts = run.get("attempts") or []
    trace_names = [a["trace"] for a in attempts if a.get("trace")]
    header, observations, assessments = {}, [], []
    last = attempts[-1] if attempts else {}
    if last.get("trace") and os.path.exists(os.path.join(run_dir, last["trace"])):
        header, observations = _load_trace(os.path.join(run_dir, last["trace"]))
        assessments = _stored_assessments(observations) or replay(header, observations, run.get("settings"))
    diagnostics = _read_diagnostics(os.path.join(run_dir, last["diagnostics"]) if last.get("diagnostics") else None)
    runbook_path = runbook_path or runbook_mod.default_runbook_path()
    incident = build_incident(header, observations, assessments, run=run, diagnostics=diagnostics,
                              runbook=_runbook(runbook_path), host=run.get("host", ""), trace_files=trace_names)
    out_dir = out_dir or run_dir
    links = [os.path.relpath(os.path.join(run_dir, n), os.path.abspath(out_dir)).replace(os.sep, "/")
             for n in trace_names]
    return _write(out_dir, incident, links, runbook_path)


# The name the restart action calls on give-up.
write_run_report = write_incident_report


def write_trace_report(trace_path, out_dir, runbook_path=None):
    """Build the report of a bare trace into out_dir, with a redacted copy of the trace."""
    header, observations = _load_trace(trace_path)
    assessments = _stored_assessments(observations) or replay(header, observations)
    runbook_path = runbook_path or runbook_mod.default_runbook_path()
    incident = build_incident(header, observations, assessments, run=None,
                              runbook=_runbook(runbook_path), trace_files=[TRACE_COPY])
    paths = _write(out_dir, incident, [TRACE_COPY], runbook_path)
    paths["trace"] = os.path.join(out_dir, TRACE_COPY)
    with open(paths["trace"], "w", encoding="utf-8") as fh:
        for obj in [header] + observations:
            fh.write(json.dumps(redact_tree(obj), ensure_ascii=False) + "\n")
    return paths
