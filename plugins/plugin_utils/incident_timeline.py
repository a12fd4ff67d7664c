"""The start's story in time order: phase spans from the assessments, and the timeline of
phase changes, watcher states, journal lines and the decision. Pure functions."""
from dataclasses import dataclass

from ansible_collections.sglang_ops.serving.plugins.module_utils.redaction import redact
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.incident_words import PHASE_WORDS

MAX_TIMELINE_LOG_LINES = 60


@dataclass
class PhaseSpan:
    phase: str
    start_t: float
    end_t: float

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


def timeline(assessments, spans, lines, decision, decided_t, verdict):
    entries = [TimelineEntry(p.start_t, "phase", "phase %s (%s)" % (p.phase, PHASE_WORDS.get(p.phase, p.phase)))
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
