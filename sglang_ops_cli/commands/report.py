"""`bin/sglang-ops report TRACE|RUN_DIR|START_DIR [-o DIR]`: render the incident report
(report.md, report.json, timeline.svg) of a restart run directory, of a start the unit's
supervisor recorded (/var/lib/sglang-ops/starts/<stamp>/, or .../starts/current), or of
any trace file.

A run directory gets its report inside it unless -o says otherwise; a supervisor's start
folder (the service's, not ours to write in) gets it in artifacts/reports/<stamp>/; a
trace gets it in artifacts/reports/<trace name>/ with a redacted copy of the trace beside it. Prints the
report's five-line summary and the paths written.

exit status: 0 written; 1 the report could not be written; 2 usage (no such path, not a
trace or run directory, malformed trace).
"""
import json
import os
import sys

HELP = "render the incident report of a trace file or a restart run directory"
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_REPORTS_DIR = os.path.join(ROOT, "artifacts", "reports")

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2


def _report_module():
    collections = os.path.join(ROOT, "collections")
    if collections not in sys.path:
        sys.path.insert(0, collections)
    from ansible_collections.sglang_ops.serving.plugins.plugin_utils.report import incident_report
    return incident_report


def add_arguments(parser):
    parser.add_argument("path", metavar="TRACE|RUN_DIR|START_DIR",
                        help="a trace file (sglang-trace/1), artifacts/<host>/<stamp>, or a start of the "
                             "unit's supervisor (/var/lib/sglang-ops/starts/<stamp> or .../current)")
    parser.add_argument("-o", "--output", metavar="DIR",
                        help="where to write the report (default: the run directory; "
                             "artifacts/reports/<stamp>/ for a start folder; "
                             "artifacts/reports/<trace name>/ for a trace)")
    parser.epilog = "exit status: 0 written, 1 could not write, 2 usage or unreadable input"


def default_output(path):
    stem = os.path.basename(os.path.normpath(path))
    if stem.endswith(".jsonl"):
        stem = stem[: -len(".jsonl")]
    if stem == "trace":  # attempt-N/trace.jsonl: name it after the attempt folder
        stem = os.path.basename(os.path.dirname(os.path.abspath(path))) or stem
    return os.path.join(DEFAULT_REPORTS_DIR, stem)


def run(args, out=None, err=None):
    out, err = out or sys.stdout, err or sys.stderr
    path = args.path
    if not os.path.exists(path):
        err.write("sglang-ops report: %s does not exist\n" % path)
        return EXIT_USAGE
    reports = _report_module()
    from ansible_collections.sglang_ops.serving.plugins.module_utils.records.inert_text import inert
    try:
        if os.path.isdir(path) and reports.incident_start_folder.is_start_folder(path):
            out_dir = args.output or os.path.join(DEFAULT_REPORTS_DIR, os.path.basename(os.path.realpath(path)))
            paths = reports.write_incident_report(path, out_dir=out_dir)
        elif os.path.isdir(path):
            paths = reports.write_incident_report(path, out_dir=args.output)
        else:
            paths = reports.write_trace_report(path, args.output or default_output(path))
    except reports.ReportInputError as exc:
        err.write("sglang-ops report: %s\n" % exc)
        return EXIT_USAGE
    except (OSError, ImportError) as exc:
        err.write("sglang-ops report: could not write the report: %s\n" % exc)
        return EXIT_FAILED
    except Exception as exc:  # input the checks above missed: still one line, never a traceback
        err.write("sglang-ops report: cannot build a report from %s: %s: %s\n" % (
            path, type(exc).__name__, str(exc).splitlines()[0][:200] if str(exc) else "malformed input"))
        return EXIT_USAGE
    with open(paths["json"], encoding="utf-8") as fh:
        written = json.load(fh)
    # what the records held is printed inert: one line each, no control character reaches the terminal
    for n, line in enumerate(written.get("summary") or [], 1):
        out.write("%d. %s\n" % (n, inert(line)))
    for line in written.get("skipped") or []:
        err.write("sglang-ops report: not read: %s\n" % inert(line))
    for kind in ("markdown", "json", "chart", "trace"):
        if kind in paths:
            out.write("%-8s %s\n" % (kind, paths[kind]))
    return EXIT_OK
