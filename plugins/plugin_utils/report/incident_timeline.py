"""The start's story in time order: phase spans from the assessments, and the timeline of
phase changes, watcher states, journal lines and the decision. Pure functions.

A run of several attempts is told on one axis (run_axis_offsets): t = 0 when the first
attempt's watch began, each attempt's own times shifted by when its watch began."""
from dataclasses import dataclass, replace

from ansible_collections.sglang_ops.serving.plugins.module_utils.records.redaction import redact
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.report.incident_words import phase_words

MAX_TIMELINE_LOG_LINES = 60


@dataclass
class PhaseSpan:
    phase: str
    start_t: float
    end_t: float
    attempt: object = None   # the attempt's number when the report tells several

    @property
    def duration_s(self):
        return self.end_t - self.start_t


@dataclass
class TimelineEntry:
    t: float
    kind: str   # phase | log | verdict | decision
    text: str
    note: str = ""


def phase_spans(assessments, end_t):
    """Consecutive assessments in one phase make a span; the first starts at t=0 and the
    last runs to end_t (the decision, or the end of the trace)."""
    spans = []
    for a in assessments:
        phase, t = a.get("phase") or "starting", float(a.get("t", 0.0))
        if spans and spans[-1].phase == phase:
            spans[-1].end_t = t
            continue
        if spans:
            spans[-1].end_t = t
        spans.append(PhaseSpan(phase=phase, start_t=t, end_t=t))
    if spans:
        spans[0].start_t = 0.0
        spans[-1].end_t = max(spans[-1].end_t, end_t)
    return spans


def timeline(assessments, spans, lines, decision, decided_t, verdict, restart_kind=""):
    entries = [TimelineEntry(p.start_t, "phase", "phase %s (%s)" % (p.phase, phase_words(p.phase, restart_kind)))
               for p in spans]
    prev = None
    for a in assessments:
        v = a.get("verdict")
        if v != prev and v in ("quiet", "suspect") and (decided_t is None or a["t"] <= decided_t):
            entries.append(TimelineEntry(float(a["t"]), "verdict", "watcher: %s — %s" % (v, redact(a.get("reason") or ""))))
        prev = v
    shown = lines
    if len(lines) > MAX_TIMELINE_LOG_LINES:
        head = MAX_TIMELINE_LOG_LINES // 3
        tail = MAX_TIMELINE_LOG_LINES - head
        omitted = len(lines) - head - tail
        shown = lines[:head] + lines[-tail:]
        entries.append(TimelineEntry(lines[head].t, "log", "… %d journal lines omitted …" % omitted))
    entries.extend(TimelineEntry(ln.t, "log", ln.render(), ln.note) for ln in shown)
    if decided_t is not None:
        entries.append(TimelineEntry(decided_t, "decision", "decision: %s — %s" % (
            verdict, redact(decision.get("reason") or ""))))
    order = {"phase": 0, "verdict": 1, "log": 2, "decision": 3}
    return sorted(entries, key=lambda e: (e.t, order[e.kind]))


def run_axis_offsets(started_epoch_s, lengths_s):
    """Where each attempt's t = 0 lies on the run's axis (t = 0: the first attempt's watch
    began): from when each watch began when every attempt recorded it, else one attempt
    after the other, each as long as lengths_s says."""
    if started_epoch_s and all(isinstance(s, (int, float)) for s in started_epoch_s):
        return [round(s - started_epoch_s[0], 3) for s in started_epoch_s]
    offsets, at = [], 0.0
    for length in lengths_s:
        offsets.append(round(at, 3))
        at += max(float(length or 0.0), 0.0)
    return offsets


def shifted_spans(spans, offset_s, attempt):
    return [PhaseSpan(p.phase, p.start_t + offset_s, p.end_t + offset_s, attempt) for p in spans]


def shifted_entries(entries, offset_s, attempt):
    """The timeline of one attempt on the run's axis, each entry naming its attempt."""
    return [replace(e, t=e.t + offset_s, text="attempt %s: %s" % (attempt, e.text) if e.kind != "log" else e.text)
            for e in entries]
