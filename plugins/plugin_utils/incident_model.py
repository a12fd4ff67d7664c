"""The incident as a report tells it: built from a trace, the detector's assessments and,
for a restart run, run.json and the captured diagnostics. Pure: no I/O, no rendering.

Markdown (report_markdown), JSON (Incident.to_dict) and the chart (timeline_svg) all
render this one model, so the three never disagree.
"""
import re
from dataclasses import asdict, dataclass, field

from ansible_collections.sglang_ops.serving.plugins.module_utils.failure_classes import FAILURE_CLASSES
from ansible_collections.sglang_ops.serving.plugins.module_utils.redaction import redact, redact_tree
from ansible_collections.sglang_ops.serving.plugins.plugin_utils import trace_signals

FINAL_VERDICTS = ("ready", "stalled", "failed")
EVIDENCE_WINDOW_S = 60.0
MAX_TIMELINE_LOG_LINES = 60
DIAGNOSTIC_EXCERPT_LINES = 40

PHASE_WORDS = {
    "starting": "process start and argument parsing",
    "distributed_init": "distributed (NCCL) initialisation",
    "weight_load": "loading the weight shards from disk",
    "post_load": "after the shards were read: repacking / post-processing weights",
    "kv_cache": "allocating the KV cache",
    "jit_compile": "JIT compilation (DeepGEMM / Triton)",
    "cuda_graph": "CUDA graph capture",
    "http_server": "starting the HTTP server",
    "warmup": "the warmup request",
    "ready": "serving",
}

# Words that make a log line worth quoting as the evidence of a failure.
_ERROR_LINE = re.compile(
    r"error|exception|traceback|out of memory|failed|fatal|timeout|timed out|"
    r"address already in use|unbalanced|killed|abort", re.IGNORECASE)


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
    series: object = None
    trace_files: list = field(default_factory=list)
    last_t: float = 0.0

    def to_dict(self):
        d = asdict(self)
        d["phases"] = [dict(asdict(p), duration_s=p.duration_s) for p in self.phases]
        d["format"] = "sglang-incident/1"
        return d


def fmt_duration(seconds):
    """'9m43s', '1h02m', '45s'; '?' for None."""
    if seconds is None:
        return "?"
    s = int(round(seconds))
    if s < 60:
        return "%ds" % s
    if s < 3600:
        return "%dm%02ds" % divmod(s, 60)
    h, rem = divmod(s, 3600)
    return "%dh%02dm" % (h, rem // 60)


def fmt_t(t):
    return "t+%s" % fmt_duration(t) if t is not None else "t+?"


def phase_spans(assessments, end_t):
    spans = []
    for a in assessments:
        phase, t = a.get("phase") or "starting", float(a.get("t", 0.0))
        if spans and spans[-1].phase == phase:
            spans[-1].end_t = t
            continue
        if spans:
            spans[-1].end_t = t
        spans.append(PhaseSpan(phase=phase, start_t=t if not spans else t, end_t=t))
    if spans:
        spans[0].start_t = 0.0
        spans[-1].end_t = max(spans[-1].end_t, end_t)
    return spans


def decision_of(assessments):
    """The first final assessment (what the watcher acted on), else the last one."""
    for a in assessments:
        if a.get("final") or a.get("verdict") in FINAL_VERDICTS:
            return a, True
    return (assessments[-1] if assessments else {}), False


def _numeric_last_moved(evidence):
    last = (evidence or {}).get("last_moved") or {}
    return {k: float(v) for k, v in last.items() if isinstance(v, (int, float))}


def onset(verdict, decided_t, decision, observations, lines):
    """(t, basis): when the failure began or progress stopped."""
    if decided_t is None:
        return None, "no verdict"
    if verdict == "failed":
        for line in lines:
            if line.t <= decided_t and line.t >= decided_t - 120 and _ERROR_LINE.search(line.text):
                return line.t, "first error line in the journal"
        for prev, obs in zip(observations, observations[1:]):
            unit = obs.get("unit") or {}
            was = (prev.get("unit") or {}).get("main_pid")
            if obs["t"] <= decided_t and (unit.get("active") in ("failed", "inactive")
                                          or (was and unit.get("main_pid") not in (None, was))):
                return float(obs["t"]), "main process gone"
        return decided_t, "detector decision"
    if verdict == "stalled":
        last = _numeric_last_moved(decision.get("evidence"))
        if last:
            return max(last.values()), "when the last channel moved: %s" % max(last, key=last.get)
        quiet = [ln.t for ln in lines if ln.t <= decided_t]
        if quiet:
            return max(quiet), "last journal line"
    return decided_t, "detector decision"


def _fatal_log_lines(decision, lines, onset_t, decided_t):
    """The journal lines that made the verdict: the detector's fatal_lines when it named
    them, else error-looking lines between onset and decision."""
    named = [trace_signals.split_prefix(redact(str(x)))[2] for x in (decision.get("evidence") or {}).get("fatal_lines") or []]
    window = [ln for ln in lines if onset_t is not None and onset_t <= ln.t <= (decided_t if decided_t is not None else onset_t)]
    if named:
        picked = [ln for ln in window if ln.text in named] or [ln for ln in lines if ln.text in named]
        if picked:
            return picked
    return [ln for ln in window if _ERROR_LINE.search(ln.text)]


def _ranges(numbers):
    nums = sorted(set(int(n) for n in numbers))
    if len(nums) > 2 and nums == list(range(nums[0], nums[-1] + 1)):
        return "%d-%d" % (nums[0], nums[-1])
    return ", ".join(map(str, nums))


def _detector_evidence(ev):
    """Words for the detector's evidence keys; unknown keys are shown as they are."""
    out = []
    moved = ev.get("moved")
    if isinstance(moved, (list, tuple)):
        out.append("Moving at the decision: %s" % (", ".join(map(str, moved)) or "nothing"))
    last = _numeric_last_moved(ev)
    if last:
        out.append("Last movement per channel: " + ", ".join(
            "%s at %s" % (k, fmt_t(v)) for k, v in sorted(last.items(), key=lambda kv: kv[1])))
    if isinstance(ev.get("no_progress_s"), (int, float)):
        out.append("Nothing moved for %s" % fmt_duration(ev["no_progress_s"]))
    if ev.get("signature"):
        out.append("Waiting signature: %s" % ev["signature"])
    if ev.get("spin_gpus"):
        out.append("GPUs spinning (util ~100 %%, memory flat): %s" % _ranges(ev["spin_gpus"]))
    if isinstance(ev.get("cpu_pct"), (int, float)):
        out.append("CPU of the unit's processes: %.0f %% of one core" % ev["cpu_pct"])
    stacks = ev.get("stacks")
    if isinstance(stacks, dict) and stacks:
        frames = " < ".join(map(str, (stacks.get("frames") or [])[:4]))
        out.append("py-spy: %s ranks show the same stack on samples %ss apart, parked in %s (%s)%s" % (
            stacks.get("ranks", "?"), stacks.get("gap_s", "?"), stacks.get("wait_frame", "?"), frames,
            "; CPU idle" if stacks.get("cpu_idle") else ""))
    handled = {"moved", "last_moved", "no_progress_s", "signature", "spin_gpus", "cpu_pct", "stacks",
               "fatal_lines", "fatal_phase", "unit"}
    for key, value in sorted(ev.items()):
        if key in handled or value in (None, "", [], {}):
            continue
        out.append("%s: %s" % (key.replace("_", " "), value if isinstance(value, str) else _short(value)))
    return out


def _evidence_lines(verdict, decision, decided_t, series, observations, lines, onset_t):
    out = []
    if decision.get("reason"):
        out.append("Detector: %s" % decision["reason"])
    if verdict == "failed":
        for ln in _fatal_log_lines(decision, lines, onset_t, decided_t)[:3]:
            out.append("Journal at %s: `%s`" % (fmt_t(ln.t), ln.render()))
    out.extend(_detector_evidence(decision.get("evidence") or {}))
    if decided_t is not None and series.t:
        out.extend(_measured(series, decided_t))
    obs = _obs_at(observations, decided_t)
    if obs:
        unit = obs.get("unit")
        if unit:
            out.append("Unit: %s/%s, main PID %s, systemd restarts %s" % (
                unit.get("active"), unit.get("sub"), unit.get("main_pid"), unit.get("restarts")))
        http = obs.get("http")
        if http:
            health = http.get("health")
            out.append("HTTP /health: %s" % ("connection refused" if health is None else health))
    return [redact(x) for x in out]


def _short(value, limit=200):
    text = str(value)
    return text if len(text) <= limit else text[:limit] + "…"


def _measured(series, at_t):
    out = []
    w = EVIDENCE_WINDOW_S
    mem = trace_signals.window_mean(series.t, series.gpu_mem_gib_mean, at_t, w)
    util = trace_signals.window_mean(series.t, series.gpu_util_pct_mean, at_t, w)
    if mem is not None:
        cap = " of %.0f GiB" % series.gpu_mem_total_gib if series.gpu_mem_total_gib else ""
        out.append("GPU memory %.1f GiB per GPU%s (%d MiB as nvidia-smi shows it), utilisation %.0f %% "
                   "(mean over the last %ds)" % (mem, cap, round(mem * 1024), util if util is not None else 0.0, w))
    cpu = trace_signals.window_mean(series.t, series.cpu_cores, at_t, w)
    if cpu is not None:
        out.append("CPU %.1f cores busy (unit's processes, last %ds)" % (cpu, w))
    disk = trace_signals.window_mean(series.t, series.disk_read_mb_s, at_t, w)
    if disk is not None:
        out.append("Disk reads %.1f MB/s (last %ds)" % (disk, w))
    done = [d for t, d in zip(series.t, series.shards_done) if d is not None and t <= at_t]
    if done and series.shards_total:
        out.append("Weight shards %d/%d" % (done[-1], series.shards_total))
    return out


def _obs_at(observations, t):
    if t is None:
        return observations[-1] if observations else None
    best = None
    for obs in observations:
        if obs["t"] <= t:
            best = obs
    return best


def _timeline(assessments, spans, lines, decision, decided_t, verdict):
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


def excerpt(name, text, lines=DIAGNOSTIC_EXCERPT_LINES):
    """The part of one diagnostics file worth reading first: the tail of a journal, the
    head of anything else."""
    all_lines = redact(text).splitlines()
    pick = all_lines[-lines:] if "journal" in name else all_lines[:lines]
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


def _automation(run, attempts, fc, verdict):
    if run is None:
        if fc is None:
            return "Nothing: this report was rendered from a recorded trace; no restart was tried."
        return ("Nothing: this report was rendered from a recorded trace; no restart was tried. "
                "For this class the restart playbook %s (%s)." % (
                    "tries a restart" if fc.restart_helps else "hands over without restarting", fc.why))
    steps = ["attempt %d: %s in %s at %s (%s) → %s" % (
        a.n, a.verdict, a.phase, fmt_t(a.t), a.reason_code, a.action or "?") for a in attempts]
    tail = run.get("outcome", "?")
    if run.get("gave_up_because"):
        tail += ": " + redact(run["gave_up_because"])
    return "; ".join(steps + ["outcome " + tail]) if steps else "outcome " + tail


def _attempts(run):
    out = []
    for a in (run or {}).get("attempts") or []:
        out.append(Attempt(
            n=int(a.get("n", len(out) + 1)), verdict=a.get("verdict", "?"), phase=a.get("phase") or "?",
            reason_code=a.get("reason_code") or "?", reason=redact(a.get("reason") or ""),
            t=float(a["t"]) if isinstance(a.get("t"), (int, float)) else None,
            action=a.get("action") or ""))
    return out


def _summary(inc, fc, lines):
    what = {
        "failed": "%s failed to start: %s (`%s`)." % (inc.unit, inc.class_title, inc.reason_code),
        "stalled": "%s stalled while starting: %s (`%s`)." % (inc.unit, inc.class_title, inc.reason_code),
        "ready": "Nothing failed: %s came up ready." % inc.unit,
    }.get(inc.verdict, "No verdict: the watch of %s ended before the detector decided (%s)." % (
        inc.unit, inc.reason or "no reason given"))
    phase = "Phase: %s — %s." % (inc.phase, PHASE_WORDS.get(inc.phase, inc.phase))
    spans = [p for p in inc.phases if inc.decided_t is None or p.start_t <= inc.decided_t]
    if spans and inc.verdict != "ready":
        current = spans[-1]
        earlier = ", ".join("%s %s" % (p.phase, fmt_duration(p.duration_s)) for p in spans[:-1])
        phase = phase + " Entered at %s%s." % (fmt_t(current.start_t), "; before it: " + earlier if earlier else "")
    elif spans:
        longest = max(spans, key=lambda p: p.duration_s)
        phase = phase + " Longest phase: %s, %s." % (longest.phase, fmt_duration(longest.duration_s))
    if inc.verdict in ("failed", "stalled"):
        stamp = [ln.stamp for ln in lines if ln.t == inc.onset_t and ln.stamp][:1]
        since = "Since: %s into the start (%s%s); the watcher decided at %s." % (
            fmt_t(inc.onset_t), inc.onset_basis, ", server log clock %s" % stamp[0] if stamp else "",
            fmt_t(inc.decided_t))
    elif inc.verdict == "ready":
        since = "Ready at %s into the start." % fmt_t(inc.decided_t)
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
                   runbook=None, host="", trace_files=()):
    """The Incident for one watched start.

    header/observations: the trace (observations with `t`); assessments: the detector's
    to_dict() per observation (same order); run: run.json as a dict, or None for a bare
    trace; diagnostics: {file name: text}; runbook: {anchor: RunbookSection}.
    """
    header = header or {}
    run_attempts = _attempts(run)
    decision, decided = decision_of(assessments)
    last_attempt = run_attempts[-1] if run_attempts else None
    if last_attempt:  # run.json is what the restart action acted on
        verdict, code = last_attempt.verdict, last_attempt.reason_code
        reason, phase, decided_t = last_attempt.reason or decision.get("reason", ""), last_attempt.phase, last_attempt.t
    else:
        verdict = decision.get("verdict") if decided else "undecided"
        code = decision.get("reason_code") or verdict
        reason = decision.get("reason") or ""
        phase = decision.get("phase") or "starting"
        decided_t = float(decision["t"]) if decided else None
    fc = FAILURE_CLASSES.get(code)
    last_t = float(observations[-1]["t"]) if observations else 0.0
    series = trace_signals.build_series(observations)
    lines = trace_signals.log_lines(observations)
    onset_t, basis = onset(verdict, decided_t, decision, observations, lines)
    spans = phase_spans(assessments, decided_t if decided_t is not None else last_t)
    section = (runbook or {}).get(code)
    inc = Incident(
        host=host or (run or {}).get("host", ""),
        unit=(run or {}).get("unit") or header.get("unit") or "the service",
        source=("restart run" if run is not None else "recorded trace %s" % header.get("name", "?")),
        description=redact(header.get("description", "")),
        verdict=verdict, reason_code=code, reason=redact(reason),
        class_title=fc.title if fc else code,
        restart_helps=fc.restart_helps if fc else None, restart_why=fc.why if fc else "",
        phase=phase, decided_t=decided_t, onset_t=onset_t, onset_basis=basis,
        started_utc=(run or {}).get("started", ""), outcome=(run or {}).get("outcome", "replayed"),
        gave_up_because=redact((run or {}).get("gave_up_because", "")),
        attempts=run_attempts, phases=spans, series=series,
        trace_files=list(trace_files), last_t=last_t,
        next_steps=next_steps_for(code, section),
    )
    inc.evidence = _evidence_lines(verdict, decision, decided_t, series, observations, lines, onset_t)
    inc.automation = _automation(run, run_attempts, fc, verdict)
    inc.timeline = _timeline(assessments, spans, lines, decision, decided_t, verdict)
    inc.key_log_lines = [ln.render() for ln in lines if _ERROR_LINE.search(ln.text)][:20]
    inc.diagnostics = [excerpt(name, text) for name, text in sorted((diagnostics or {}).items(), key=_diag_order)]
    inc.summary = _summary(inc, fc, lines)
    inc.evidence = [redact(e) for e in inc.evidence]
    return inc


_DIAG_ORDER = ("unit-status", "journal", "nvidia-smi", "py-spy", "ports")


def _diag_order(item):
    name = item[0]
    for i, prefix in enumerate(_DIAG_ORDER):
        if name.startswith(prefix):
            return (i, name)
    return (len(_DIAG_ORDER), name)


__all__ = ["Incident", "build_incident", "fmt_duration", "fmt_t", "redact_tree"]
