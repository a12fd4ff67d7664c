"""The incident as a report tells it: built from a trace, the detector's assessments and,
for a restart run, run.json and the captured diagnostics. Pure: no I/O, no rendering.

Markdown (report_markdown), JSON (Incident.to_dict) and the chart (timeline_svg) all
render this one model, so the three never disagree.
"""
import re
from dataclasses import asdict, dataclass, field

from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.failure_classes import FAILURE_CLASSES, FINAL_VERDICTS, UNDECIDED
from ansible_collections.sglang_ops.serving.plugins.module_utils.records.redaction import redact
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.shared import trace_signals
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.report.incident_evidence import (
    ERROR_LINE, evidence_lines, onset, short)
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.report.incident_timeline import (
    TimelineEntry, phase_spans, run_axis_offsets, shifted_entries, shifted_spans, timeline)
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.report.incident_words import (  # noqa: F401 (re-exported)
    OTHER_CODE_TITLES, fmt_duration, phase_words, fmt_t, observe_only_sentence, utc)

DIAGNOSTIC_EXCERPT_LINES = 40


@dataclass
class Excerpt:
    name: str
    text: str
    lines_total: int
    lines_shown: int


@dataclass
class NextSteps:
    anchor: str
    title: str
    confirm: str
    steps: str
    escalate: str
    runbook_link: str


@dataclass
class Attempt:
    n: int
    verdict: str
    phase: str
    reason_code: str
    reason: str
    t: float
    action: str
    started_epoch_s: object = None  # when the attempt's watch began (t = 0), if recorded
    offset_s: float = 0.0           # where its t = 0 lies on the run's axis (the chart, the timeline)
    restart_kind: str = ""          # warm | cold | cold_fallback beside the weight cache daemon, else ''
    restart_kind_reason: str = ""


@dataclass
class Incident:
    host: str
    unit: str
    source: str
    description: str
    verdict: str        # failed | stalled | ready | undecided
    reason_code: str
    reason: str
    class_title: str
    restart_helps: object  # True / False / None when the code is not a failure class
    restart_why: str
    phase: str
    decided_t: object      # seconds into the watch, or None when undecided
    onset_t: object        # when the failure began / progress stopped, or None
    onset_basis: str       # what onset_t was read from, in words
    started_utc: str
    outcome: str           # run.json outcome, or "replayed" for a bare trace
    gave_up_because: str
    summary: list = field(default_factory=list)     # exactly five lines
    evidence: list = field(default_factory=list)
    attempts: list = field(default_factory=list)
    automation: str = ""
    phases: list = field(default_factory=list)
    timeline: list = field(default_factory=list)
    key_log_lines: list = field(default_factory=list)
    diagnostics: list = field(default_factory=list)
    next_steps: object = None
    # the run gave up after restarting a class a restart can help: systemd's start limit,
    # the attempts used up or the same failure twice; then the next step is no restart
    restarts_used_up: bool = False
    start_limit: object = None          # NextSteps of the start-limit section when systemd's limit ended it
    series: object = None
    trace_files: list = field(default_factory=list)
    last_t: float = 0.0
    time_to_ready: dict = field(default_factory=dict)   # run.json's, against the host's earlier starts
    # phases, timeline and series tell every attempt on one axis: the last attempt's t = 0 is
    # this far into it (decided_t and onset_t stay the last attempt's own)
    run_offset_s: float = 0.0
    skipped: list = field(default_factory=list)     # "<path>: <why>" of each record file not read (record_files)

    def to_dict(self):
        d = asdict(self)
        d["phases"] = [dict(asdict(p), duration_s=p.duration_s) for p in self.phases]
        d["format"] = "sglang-incident/1"
        return d


def decision_of(assessments):
    """The first final assessment (what the watcher acted on), else the last one."""
    for a in assessments:
        if a.get("final") or a.get("verdict") in FINAL_VERDICTS:
            return a, True
    return (assessments[-1] if assessments else {}), False


def shows_tail(name):
    """A log (the journal, the supervisor's log tail) is read from its end."""
    return "journal" in name or "log-tail" in name


def excerpt(name, text, lines=DIAGNOSTIC_EXCERPT_LINES):
    """The part of one diagnostics file worth reading first: the tail of a journal, the
    head of anything else."""
    all_lines = redact(text).splitlines()
    pick = all_lines[-lines:] if shows_tail(name) else all_lines[:lines]
    return Excerpt(name=name, text="\n".join(pick), lines_total=len(all_lines), lines_shown=len(pick))


def next_steps_for(code, section):
    if section is None:
        return None
    return NextSteps(
        anchor=section.anchor,
        title=section.title,
        confirm=section.part("Confirm"),
        steps=section.part("Next steps"),
        escalate=section.part("Escalate"),
        runbook_link="docs/runbook.md#%s" % section.anchor,
    )


START_LIMIT_SECTION = "unit-start-limit"


def ended_on_start_limit(run):
    """Whether systemd's start limit ended the run: the supervised restart's hand-over
    (plugin_utils/restart/run_ending.py) or the OnFailure= handler's record (a start folder's needed_human)."""
    if (run or {}).get("needed_human_why") == "start_limit":
        return True
    return "start limit" in ((run or {}).get("gave_up_because") or "")


def _used_up_words(run):
    """restart_why of a run that gave up after restarting a class a restart can help."""
    return ("not again: the restarts already tried ended the same way (%s); starting it unchanged "
            "repeats the failure, so fix its cause first" % redact(run.get("gave_up_because") or "?"))


def _automation(run, attempts, fc, verdict):
    if run is None:
        if fc is None:
            return "Nothing: this report was rendered from a recorded trace; no restart was tried."
        return ("Nothing: this report was rendered from a recorded trace; no restart was tried. "
                "For this class the restart playbook %s (%s)." % (
                    "tries a restart" if fc.restart_helps else "hands over without restarting", fc.why))
    if not attempts:
        return ("No restart: the restart action checked the host first and handed over before "
                "stopping or starting anything (%s)." % redact(run.get("gave_up_because") or run.get("outcome", "?")))
    steps = ["attempt %d%s: %s in %s at %s (%s) → %s" % (
        a.n, " (%s: %s)" % (a.restart_kind, a.restart_kind_reason) if a.restart_kind else "",
        a.verdict, a.phase, fmt_t(a.t), a.reason_code, a.action or "?") for a in attempts]
    tail = run.get("outcome", "?")
    if run.get("gave_up_because"):
        tail += ": " + redact(run["gave_up_because"])
    held = redact(observe_only_sentence(run.get("attempts")))
    return ("; ".join(steps + ["outcome " + tail]) if steps else "outcome " + tail) + held


HAND_OVER_PHASES = ("preflight", "stopping", "unknown")


def run_hand_over(run):
    """(phase, reason code, reason) when the restart action handed over outside an attempt's
    watch (preflight, while stopping, a failed remote step), else None. Read from run.json's
    own phase/reason_code/reason when it has them, else from gave_up_because
    ("preflight: gpu_busy_foreign")."""
    if not run or run.get("outcome") != "gave_up":
        return None
    phase, code = run.get("phase"), run.get("reason_code")
    if phase in HAND_OVER_PHASES and code:
        return phase, code, run.get("reason") or run.get("gave_up_because") or ""
    because = run.get("gave_up_because") or ""
    m = re.match(r"^(preflight|stopping|unknown): ([a-z_]+)$", because.strip())
    if m:
        return m.group(1), m.group(2), run.get("reason") or because
    if not run.get("attempts") and because:
        return "preflight", "unknown", because
    return None


def _preflight_evidence(run):
    out = []
    pre = (run or {}).get("preflight") or {}
    for h in pre.get("gpu_holders") or []:
        out.append("GPU memory holder: PID %s (%s), %s MiB: %s" % (
            h.get("pid"), h.get("kind"), h.get("mem_mib"), redact(h.get("cmdline") or "")))
    for h in pre.get("orphans_killed") or []:
        out.append("Orphan killed before starting: %s" % redact(h if isinstance(h, str) else short(h)))
    if pre.get("nvidia_smi") is False:
        out.append("nvidia-smi could not be read: %s" % redact(pre.get("nvidia_smi_error") or "?"))
    return out


def _attempts(run):
    out = []
    for a in (run or {}).get("attempts") or []:
        out.append(Attempt(
            n=int(a.get("n", len(out) + 1)), verdict=a.get("verdict", "?"), phase=a.get("phase") or "?",
            reason_code=a.get("reason_code") or "?", reason=redact(a.get("reason") or ""),
            t=float(a["t"]) if isinstance(a.get("t"), (int, float)) else None,
            action=a.get("action") or "", restart_kind=a.get("restart_kind") or "",
            restart_kind_reason=a.get("restart_kind_reason") or "",
            started_epoch_s=a.get("started_epoch_s") if isinstance(a.get("started_epoch_s"), (int, float)) else None))
    return out


# What the run's record says was done after an attempt, as the headline tells it.
_ACTION_WORDS = {"restarted": "the restart action restarted it", "restarted by systemd": "systemd restarted it",
                 "restarted cold": "the restart action restarted it cold, the weight cache daemon too",
                 "handed_over": "handed over", "interrupted": "interrupted"}


def _failed_before(attempts):
    return len(attempts) > 1 and any(a.verdict != "ready" for a in attempts[:-1])


def _attempt_story(a):
    """"attempt 1 stalled in weight_load (`stall_idle`), systemd restarted it"."""
    kind = " (%s start)" % a.restart_kind if a.restart_kind else ""
    story = "attempt %d%s %s in %s (`%s`)" % (a.n, kind, a.verdict, a.phase, a.reason_code)
    words = _ACTION_WORDS.get(a.action, a.action)
    return story + (", " + words if words else "")


def _summary(inc, fc, lines, spans):
    if inc.verdict in ("failed", "stalled"):
        what = "%s %s: %s (`%s`)." % (inc.unit, "failed to start" if inc.verdict == "failed"
                                      else "stalled while starting", inc.class_title, inc.reason_code)
    elif inc.verdict == "preflight":
        what = "%s was not (re)started: %s (`%s`), found %s." % (
            inc.unit, inc.class_title, inc.reason_code,
            "while stopping it" if inc.phase == "stopping" else "before starting")
    elif inc.verdict == "ready" and _failed_before(inc.attempts):
        what = "Healed: %s; attempt %d came up ready." % (
            "; ".join(_attempt_story(a) for a in inc.attempts[:-1]), inc.attempts[-1].n)
    elif inc.verdict == "ready":
        what = "Nothing failed: %s came up ready." % inc.unit
    elif inc.outcome == "gave_up":
        what = "Automation gave up on %s: %s." % (inc.unit, inc.gave_up_because or inc.reason or "no reason recorded")
    else:
        what = "No verdict: the watch of %s ended before the detector decided (%s)." % (
            inc.unit, inc.reason or "no reason given")
    phase = "Phase: %s — %s." % (inc.phase, phase_words(inc.phase, inc.attempts[-1].restart_kind if inc.attempts else ""))
    spans = [p for p in spans if inc.decided_t is None or p.start_t <= inc.decided_t]
    if spans and inc.verdict != "ready":
        current = spans[-1]
        earlier = ", ".join("%s %s" % (p.phase, fmt_duration(p.duration_s)) for p in spans[:-1])
        phase = phase + " Entered at %s%s." % (fmt_t(current.start_t), "; before it: " + earlier if earlier else "")
    elif spans:
        longest = max(spans, key=lambda p: p.duration_s)
        phase = phase + " Longest phase: %s, %s." % (longest.phase, fmt_duration(longest.duration_s))
    if inc.verdict in ("failed", "stalled"):
        stamp = [ln.stamp for ln in lines if ln.t == inc.onset_t and ln.stamp][:1]
        t0 = inc.attempts[-1].started_epoch_s if inc.attempts else None
        basis = inc.onset_basis
        if t0 is not None and inc.onset_t is not None:
            basis += "; %s" % utc(t0 + inc.onset_t)
        elif stamp:
            basis += "; server log clock %s" % stamp[0]
        decided = fmt_t(inc.decided_t)
        if t0 is not None and inc.decided_t is not None:
            decided += " (%s)" % utc(t0 + inc.decided_t)
        since = "Since: %s into the start (%s); the watcher decided at %s." % (fmt_t(inc.onset_t), basis, decided)
    elif inc.verdict == "ready":
        since = "Ready at %s into the start." % fmt_t(inc.decided_t)
    elif inc.decided_t is None and inc.outcome == "gave_up":
        since = "Since: the %s step of the restart; no start was watched after it." % inc.phase
    else:
        since = "Watched for %s; last journal line at %s." % (
            fmt_duration(inc.last_t), fmt_t(lines[-1].t) if lines else "—")
    if inc.started_utc:
        since += " Run started %s." % inc.started_utc
    first = "Journal at" if inc.verdict == "failed" else "Detector:"
    ev = [e for e in inc.evidence if e.startswith(first)][:1] + \
         [e for e in inc.evidence if e.startswith("GPU memory")][:1]
    if not ev:
        ev = inc.evidence[:2]
    ev = [e[len("Detector: "):] if e.startswith("Detector: ") else e for e in ev]
    evidence = "Evidence: " + ("; ".join(ev) if ev else "none recorded") + "."
    tried = "Automation tried: " + inc.automation
    return [what, phase, since, evidence, tried]


def build_incident(header, observations, assessments, run=None, diagnostics=None,
                   runbook=None, host="", trace_files=(), earlier_attempts=(), daemon_starts=()):
    """The Incident for one watched start.

    header/observations: the trace (observations with `t`); assessments: the detector's
    to_dict() per observation (same order); run: run.json as a dict, or None for a bare
    trace; diagnostics: {file name: text}; runbook: {anchor: RunbookSection};
    earlier_attempts: (observations, assessments) of each attempt before the last, in
    order, as its trace has them ((), () for one without a trace): the chart and the
    timeline then show every attempt, the earliest first; daemon_starts: (n, observations)
    of the weight cache daemon's start the run followed before attempt n (a cold restart):
    the chart draws it between the attempts.
    """
    run_attempts = _attempts(run)
    hand_over = run_hand_over(run)
    if hand_over:  # handed over before or between attempts: no trace decided it
        observations, assessments = [], []
    decided = _decision(assessments, run_attempts[-1] if run_attempts else None, hand_over)
    last_t = float(observations[-1]["t"]) if observations else 0.0
    lines = trace_signals.log_lines(observations)
    onset_t, basis = onset(decided.verdict, decided.t, decided.assessment, observations, lines)
    spans = phase_spans(assessments, decided.t if decided.t is not None else last_t)
    inc = Incident(**_told_by_the_run(header or {}, run, host), **_told_by_the_decision(decided, runbook),
                   onset_t=onset_t, onset_basis=basis, attempts=run_attempts, phases=spans,
                   series=trace_signals.build_series(observations), trace_files=list(trace_files), last_t=last_t)
    fc = FAILURE_CLASSES.get(decided.reason_code)
    if fc is not None and fc.restart_helps and run_attempts and not hand_over and inc.outcome == "gave_up":
        inc.restarts_used_up, inc.restart_helps = True, False
        inc.restart_why = _used_up_words(run)
        if ended_on_start_limit(run):
            inc.start_limit = next_steps_for(START_LIMIT_SECTION, (runbook or {}).get(START_LIMIT_SECTION))
    if hand_over:
        inc.evidence = ["Restart action: %s" % inc.reason] + _preflight_evidence(run)
    else:
        inc.evidence = evidence_lines(inc.verdict, decided.assessment, decided.t, inc.series, observations, lines, onset_t)
    inc.automation = _automation(run, run_attempts, fc, inc.verdict)
    inc.timeline = timeline(assessments, spans, lines, decided.assessment, decided.t, inc.verdict,
                            run_attempts[-1].restart_kind if run_attempts else "")
    inc.key_log_lines = [ln.render() for ln in lines if ERROR_LINE.search(ln.text)][:20]
    inc.diagnostics = [excerpt(name, text) for name, text in sorted((diagnostics or {}).items(), key=_diag_order)]
    inc.summary = _summary(inc, fc, lines, spans)
    inc.evidence = [redact(e) for e in inc.evidence]
    if earlier_attempts and not hand_over and len(earlier_attempts) == len(run_attempts) - 1:
        _tell_every_attempt(inc, list(earlier_attempts), observations, spans, daemon_starts)
    return inc


@dataclass
class _Decision:
    """The verdict the report tells and the assessment its evidence is read from."""
    verdict: str
    reason_code: str
    reason: str
    phase: str
    t: object           # seconds into the watch, or None when undecided or handed over outside a watch
    assessment: dict


def _decision(assessments, last_attempt, hand_over):
    """The restart action's hand-over outside a watch; else what run.json's last attempt says
    the restart action acted on; else, for a bare trace, the detector's first final assessment."""
    if hand_over:
        phase, code, reason = hand_over
        fc = FAILURE_CLASSES.get(code)
        return _Decision(fc.verdict if fc else "failed", code, reason, phase, None, {})
    decision, decided = decision_of(assessments)
    if last_attempt:
        verdict, code, t = last_attempt.verdict, last_attempt.reason_code, last_attempt.t
        reason, phase = last_attempt.reason or decision.get("reason", ""), last_attempt.phase
        if (decision.get("verdict"), decision.get("reason_code")) != (verdict, code):
            # the replay disagrees (other settings, another release): keep only what was acted on
            decision = {"t": t, "phase": phase, "verdict": verdict, "reason_code": code, "reason": reason}
        return _Decision(verdict, code, reason, phase, t, decision)
    verdict = decision.get("verdict") if decided else UNDECIDED
    return _Decision(verdict, decision.get("reason_code") or verdict, decision.get("reason") or "",
                     decision.get("phase") or "starting", float(decision["t"]) if decided else None, decision)


def _told_by_the_run(header, run, host):
    """The Incident's fields read from run.json, or from the trace's header for a bare trace."""
    record = run or {}
    return dict(
        host=host or record.get("host", ""),
        unit=record.get("unit") or header.get("unit") or "the service",
        source=record.get("source") or ("restart run" if run is not None else "recorded trace %s" % header.get("name", "?")),
        description=redact(header.get("description", "")),
        started_utc=record.get("started", ""), outcome=record.get("outcome", "replayed"),
        gave_up_because=redact(record.get("gave_up_because", "")),
        time_to_ready=dict(record.get("time_to_ready") or {}),
    )


def _told_by_the_decision(decided, runbook):
    """The Incident's fields read from the decision: the verdict, its failure class and the runbook's next steps."""
    code = decided.reason_code
    fc = FAILURE_CLASSES.get(code)
    return dict(
        verdict=decided.verdict, reason_code=code, reason=redact(decided.reason),
        class_title=fc.title if fc else OTHER_CODE_TITLES.get(code, code),
        restart_helps=fc.restart_helps if fc else None, restart_why=fc.why if fc else "",
        phase=decided.phase, decided_t=decided.t,
        next_steps=next_steps_for(code, (runbook or {}).get(code)),
    )


def _tell_every_attempt(inc, earlier, observations, spans, daemon_starts=()):
    """Phases, timeline and series of every attempt on the run's axis, the earliest first;
    a daemon's start between two attempts ends where the later attempt begins (the engine
    starts once the daemon is ready), and begins no earlier than the earlier one ended."""
    lengths = [max([a.t or 0.0] + [float(o["t"]) for o in obs[-1:]]) for a, (obs, dummy) in zip(inc.attempts, earlier)]
    offsets = run_axis_offsets([a.started_epoch_s for a in inc.attempts], lengths + [0.0])
    all_phases, all_entries, all_obs = [], [], []
    for i, (obs, assessed) in enumerate(earlier):
        a, offset = inc.attempts[i], offsets[i]
        a.offset_s = offset
        own = phase_spans(assessed, a.t if a.t is not None else lengths[i])
        entries = timeline(assessed, own, trace_signals.log_lines(obs), {"reason": a.reason}, a.t, a.verdict,
                           a.restart_kind)
        all_phases += shifted_spans(own, offset, a.n)
        all_entries += [TimelineEntry(offset, "phase", "attempt %d began" % a.n)] + shifted_entries(entries, offset, a.n)
        all_obs += [dict(o, t=float(o["t"]) + offset) for o in obs]
    last = inc.attempts[-1]
    last.offset_s = inc.run_offset_s = offsets[-1]
    all_phases += shifted_spans(spans, last.offset_s, last.n)
    all_entries += [TimelineEntry(last.offset_s, "phase", "attempt %d began (%s)" % (
        last.n, _ACTION_WORDS.get(inc.attempts[-2].action, inc.attempts[-2].action)))]
    all_entries += shifted_entries(inc.timeline, last.offset_s, last.n)
    all_obs += [dict(o, t=float(o["t"]) + last.offset_s) for o in observations]
    for n, obs in daemon_starts:
        i = next((k for k, a in enumerate(inc.attempts) if a.n == n), None)
        if not i or not obs:
            continue
        begin = max(offsets[i - 1] + lengths[i - 1], offsets[i] - float(obs[-1]["t"]))
        all_obs += [dict(o, t=float(o["t"]) + begin) for o in obs if float(o["t"]) + begin < offsets[i]]
    all_obs.sort(key=lambda o: o["t"])
    inc.phases, inc.timeline = all_phases, all_entries
    inc.series = trace_signals.build_series(all_obs)


_DIAG_ORDER = ("unit-status", "journal", "log-tail", "nvidia-smi", "py-spy", "ports")


def _diag_order(item):
    """Attempt by attempt ("attempt-<n>/<file>", in number order), the files of each in
    the order worth reading."""
    folder, dummy, name = item[0].rpartition("/")
    attempt = folder.rpartition("-")[2]
    key = (int(attempt) if attempt.isdigit() else 0, folder)
    for i, prefix in enumerate(_DIAG_ORDER):
        if name.startswith(prefix):
            return key + (i, name)
    return key + (len(_DIAG_ORDER), name)
