"""Render an Incident (incident_model) as the Markdown report on-call reads first.

Every string a record held reaches the report inert (module_utils/records/inert_text.py): a
field of one line stays one line, and no control character (an ESC, a CR) is written, the
fenced diagnostics included."""
from ansible_collections.sglang_ops.serving.plugins.module_utils.records.inert_text import inert
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.report.incident_model import shows_tail
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.report.incident_words import fmt_duration, fmt_t


def _fence(text):
    """A code fence longer than any backtick run inside the text."""
    longest, run = 0, 0
    for ch in text:
        run = run + 1 if ch == "`" else 0
        longest = max(longest, run)
    return "`" * max(3, longest + 1)


def _cell(text):
    return inert(text).replace("|", "\\|")


def _title(inc):
    return inert(_title_words(inc))


def _title_words(inc):
    where = " on %s" % inc.host if inc.host else ""
    if inc.verdict in ("failed", "stalled"):
        return "Incident: %s%s %s in %s (%s)" % (inc.unit, where, inc.verdict, inc.phase, inc.reason_code)
    if inc.verdict == "ready":
        return "Start report: %s%s came up ready" % (inc.unit, where)
    if inc.verdict == "preflight" or inc.outcome == "gave_up":
        return "Incident: %s%s not restarted, %s (%s)" % (inc.unit, where, inc.phase, inc.reason_code)
    return "Start report: %s%s, no verdict" % (inc.unit, where)


def _relink(text, runbook_href):
    """Point the runbook's own `](#anchor)` links at the runbook file from the report."""
    return text.replace("](#", "](%s#" % runbook_href)


def _time_to_ready(ttr):
    """The last attempt against the host's earlier ready starts (docs/metrics.md)."""
    if not ttr:
        return []
    out = ["", "### Time to ready", ""]
    took = ("ready after %s" % fmt_duration(ttr["ready_after_s"]) if ttr.get("ready_after_s") is not None
            else "not ready")
    if not ttr.get("history_starts"):
        return out + ["The last attempt was %s; no earlier ready start of this host to compare with." % took]
    out.append("The last attempt was %s; usual %s (median of %d earlier ready start%s of this host)." % (
        took, fmt_duration(ttr.get("usual_total_s")), ttr["history_starts"], "" if ttr["history_starts"] == 1 else "s"))
    for slow in ttr.get("slower_than_usual") or ():
        out.append("- slower than usual: %s took %s, usual %s (%.1f\u00d7)" % (
            slow["phase"], fmt_duration(slow["took_s"]), fmt_duration(slow["usual_s"]), slow["took_s"] / slow["usual_s"]))
    return out


def render_markdown(inc, chart_name="timeline.svg", trace_names=(), runbook_href="docs/runbook.md"):
    """The report, section by section: the headline and summary, what to do next, the
    evidence, what automation did, the timeline and the diagnostics."""
    out = _headline(inc, chart_name, trace_names)
    out += _what_to_do_next(inc, runbook_href)
    out += _evidence(inc)
    out += _what_automation_did(inc)
    out += _timeline(inc)
    out += _diagnostics(inc)
    out += _not_read(inc)
    return inert("\n".join(out).rstrip() + "\n", lines=True)


def _headline(inc, chart_name, trace_names):
    """The title, the five summary lines and the files the report links."""
    out = ["# " + _title(inc), ""]
    out += ["%d. %s" % (i, inert(line)) for i, line in enumerate(inc.summary, 1)]
    out.append("")
    files = [f for f in ["[chart](%s)" % chart_name if chart_name else ""] if f]
    files += ["[%s](%s)" % (name, name) for name in (trace_names or inc.trace_files)]
    out.append(inert("Source: %s. Files: %s." % (inc.source, ", ".join(files) if files else "—")))
    if inc.description:
        out.append("Trace description: %s" % inert(inc.description))
    out.append("")
    return out


def _what_to_do_next(inc, runbook_href):
    """The runbook section of the reason code, after the start limit's when systemd's limit ended the run."""
    out = ["## What to do next", ""]
    ns = inc.next_steps
    if ns is None:
        if inc.verdict == "ready":
            out.append("Nothing: the service came up. Keep this report if the start was slower than usual.")
        else:
            out.append("No runbook section for `%s`; start with [reading a report](%s#reading-a-report)." % (
                inert(inc.reason_code).replace("`", "'"), runbook_href))
    else:
        out += _start_limit(inc, runbook_href)
        out.append("From the runbook, [%s](%s#%s) (`%s`)." % (ns.title, runbook_href, ns.anchor, ns.anchor))
        if inc.restart_helps is not None:
            out.append("")
            out.append("Does a restart help? %s — %s." % ("yes" if inc.restart_helps else "no", inc.restart_why))
        for heading, text in (("Confirm", ns.confirm), ("Next steps", ns.steps), ("When to escalate", ns.escalate)):
            if text:
                out += ["", "### " + heading, "", _relink(text, runbook_href)]
    out.append("")
    return out


def _start_limit(inc, runbook_href):
    """How to clear systemd's start limit, when it ended the run; else nothing."""
    ns, limit = inc.next_steps, inc.start_limit
    if limit is None:
        return []
    return ["systemd's start limit stopped the restarts: the unit stays down, a reboot's start "
            "included, until the limit is cleared. First find and fix the cause (below, from "
            "[%s](%s#%s)); then clear the limit as [%s](%s#%s) says:" % (
                ns.title, runbook_href, ns.anchor, limit.title, runbook_href, limit.anchor),
            "", _relink(limit.steps, runbook_href), ""]


def _evidence(inc):
    out = ["## Evidence", ""]
    out += ["- " + inert(e) for e in inc.evidence] or ["- none recorded"]
    out.append("")
    return out


def _what_automation_did(inc):
    """The automation's story and, for a restart run, a table of its attempts."""
    out = ["## What automation did", "", inert(inc.automation), ""]
    if inc.attempts:
        out += ["| attempt | verdict | phase | at | reason code | action | reason |",
                "| --- | --- | --- | --- | --- | --- | --- |"]
        for a in inc.attempts:
            out.append("| %d | %s | %s | %s | `%s` | %s | %s |" % (
                a.n, _cell(a.verdict), _cell(a.phase), fmt_t(a.t), _cell(a.reason_code).replace("`", "'"), _cell(a.action),
                _cell(a.reason)))
        out.append("")
    return out


def _timeline(inc):
    """The phases' table, the time to ready, then the events and journal lines."""
    out = ["## Timeline", "", "### Phases", "",
           "| phase | from | to | duration |", "| --- | --- | --- | --- |"]
    for p in inc.phases:
        out.append("| %s | %s | %s | %s |" % (_cell(p.phase), fmt_t(p.start_t), fmt_t(p.end_t), fmt_duration(p.duration_s)))
    out += _time_to_ready(inc.time_to_ready)
    out += ["", "### Events and journal lines", "",
            "Times are seconds into the %s; lines printed by several ranks at once are folded into one." % (
                "run (t+0 = when attempt 1's watch began)" if inc.run_offset_s else
                "watch (t+0 = when the watch began)"), "",
            "| at | event |", "| --- | --- |"]
    out += ["| %s | %s |" % (fmt_t(e.t), _event_cell(e)) for e in inc.timeline]
    out.append("")
    return out


def _event_cell(entry):
    """One timeline entry's text as its table cell: a journal line as code, a phase or the decision in bold."""
    text = _cell(entry.text)
    if entry.kind == "log":
        text = "`%s`" % text.replace("`", "'")
        if entry.note:
            text += " — " + _cell(entry.note)
    elif entry.kind in ("phase", "decision"):
        text = "**%s**" % text
    return text


def _diagnostics(inc):
    """An excerpt of each captured diagnostics file, fenced."""
    out = ["## Diagnostics", ""]
    if not inc.diagnostics:
        out.append("None captured (a bare trace carries none; the restart playbook captures them "
                   "before restarting or handing over).")
    for ex in inc.diagnostics:
        which = "last" if shows_tail(ex.name) else "first"
        note = "" if ex.lines_shown == ex.lines_total else " (%s %d of %d lines)" % (which, ex.lines_shown, ex.lines_total)
        fence = _fence(ex.text)
        out += ["### %s%s" % (inert(ex.name), note), "", fence, inert(ex.text, lines=True), fence, ""]
    return out


def _not_read(inc):
    """The record files left unread (a link, a FIFO, another owner's file, one over its
    bound), each with why; nothing when every file was read."""
    if not inc.skipped:
        return []
    out = ["## Not read", "", "These files of the record were not read (never through a link, only regular "
           "files of the folder's owner, within their bound):", ""]
    return out + ["- %s" % inert(line) for line in inc.skipped] + [""]
