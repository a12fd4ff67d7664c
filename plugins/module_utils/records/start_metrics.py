"""Start metrics for Prometheus, as a node_exporter textfile (one file per unit).

StartMetrics holds what is known about a unit's starts and renders it in the text
exposition format; write_textfile() puts it in the textfile collector's folder
atomically (a scrape never reads half a file). Names and labels (docs/metrics.md):
units in the names, `_total` counters, labels only from small fixed sets (unit, phase,
verdict, outcome, reason_code) and `host`, the inventory name of the host (when known),
so an alert names the host every command of the runbook takes. Counters survive a
rewrite by being read back from the previous file (read_counters). Standard library
only: this runs on the host too.
"""
import os
import re
import time

from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.failure_classes import FAILURE_CLASSES, FINAL_VERDICTS, VERDICTS
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.phases import PHASES
from ansible_collections.sglang_ops.serving.plugins.module_utils.records import safe_files

OUTCOMES = ("ready", "gave_up", "interrupted")
FILE_SUFFIX = ".prom"
MIB = 2**20

HELP = {
    "sglang_start_in_progress": ("gauge", "1 while a start of the unit is being watched, else 0."),
    "sglang_start_phase": ("gauge", "1 for the phase the current (or last) start is in, 0 for the others."),
    "sglang_start_verdict": ("gauge", "1 for the detector's verdict on the current (or last) start, 0 for the others."),
    "sglang_start_elapsed_seconds": ("gauge", "Seconds since the current start began."),
    "sglang_start_phase_elapsed_seconds": ("gauge", "Seconds the current start has been in its phase."),
    "sglang_start_attempt": ("gauge", "Attempt number of the current start within its restart run."),
    "sglang_start_observe_only": ("gauge", "1 while the current start runs observe-only (rule 4: the same verdict "
                                  "ended the last starts, so this one is not stopped before its ceiling), else 0."),
    "sglang_start_shards_loaded": ("gauge", "Checkpoint shards loaded so far by the current start."),
    "sglang_start_shards": ("gauge", "Checkpoint shards the current start loads in all."),
    "sglang_start_read_bytes": ("gauge", "Bytes read from storage by the unit's processes in the current start."),
    "sglang_start_gpu_memory_used_bytes": ("gauge", "GPU memory in use on the unit's GPUs, summed."),
    "sglang_start_gpu_memory_total_bytes": ("gauge", "GPU memory of the unit's GPUs, summed."),
    "sglang_start_eta_seconds": ("gauge", "Estimated seconds until the current start is ready (absent when unknown)."),
    "sglang_start_phase_remaining_seconds": ("gauge", "Estimated seconds left in the current phase (absent when unknown)."),
    "sglang_start_usual_seconds": ("gauge", "Usual time to ready of the unit's starts (median of recent ready starts)."),
    "sglang_start_warm": ("gauge", "1 when the current (or last) start attached to the weight cache daemon's weights "
                          "(a warm start), 0 when its weights load from disk; absent without a weight cache."),
    "sglang_start_cold_reason_info": ("gauge", "1, labelled with why the current (or last) start is not warm "
                                      "(daemon_not_healthy, fallback_to_disk, not_attached)."),
    "sglang_last_start_info": ("gauge", "1, labelled with the outcome and reason code of the last finished restart run."),
    "sglang_last_start_attempts": ("gauge", "Attempts the last finished restart run took."),
    "sglang_last_start_needed_human": ("gauge", "1 when the last restart run gave up and handed over to a human."),
    "sglang_last_start_phase_duration_seconds": ("gauge", "Seconds each phase took in the last finished start."),
    "sglang_last_start_time_to_ready_seconds": ("gauge", "Seconds from start to ready of the last ready start."),
    "sglang_last_start_slower_than_usual_phases": ("gauge", "Phases of the last start that took over 1.5 times their usual duration."),
    "sglang_last_start_end_timestamp_seconds": ("gauge", "When the last restart run ended (Unix time)."),
    "sglang_restarts_total": ("counter", "Automatic restarts of the unit, by the reason code of the attempt restarted."),
    "sglang_starts_total": ("counter", "Starts of the unit watched to a verdict, by verdict."),
    "sglang_hangs_after_ready_total": ("counter", "Times the unit stopped answering after it had been ready."),
    "sglang_metrics_updated_timestamp_seconds": ("gauge", "When this file was last written (Unix time)."),
    # A file of its own (budget_file_name), written after each ready start beside a later SGLang's
    # weight cache daemon (0.5.23 has no budget, and then no file).
    "sglang_weight_cache_deliveries_remaining": ("gauge", "Engine attaches the weight cache daemon serves before it "
                                                 "answers budget_exhausted (the fewest of its GPUs), read after "
                                                 "the last ready start."),
    "sglang_weight_cache_deliveries": ("gauge", "Attaches one daemon generation serves in all "
                                       "(--weight-cache-max-deliveries)."),
}
COUNTERS = tuple(name for name, (kind, dummy_help) in HELP.items() if kind == "counter")
_SAMPLE = re.compile(r'^(\w+)\{([^}]*)\}\s+(\S+)\s*$')
_LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def file_name(unit):
    return "sglang_ops_%s%s" % (re.sub(r"[^A-Za-z0-9_]+", "_", unit), FILE_SUFFIX)


def budget_file_name(unit):
    """The delivery budget's file beside the unit's: the supervisor rewrites the unit's own at
    every start and knows nothing of the budget, so it is kept apart."""
    return file_name(unit + "-weight-cache-budget")


def _escape(value):
    return str(value).replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def _unescape(value):
    return re.sub(r"\\(.)", lambda m: "\n" if m.group(1) == "n" else m.group(1), value)


def _number(value):
    if isinstance(value, bool):
        return "1" if value else "0"
    if float(value).is_integer() and abs(value) < 1e15:
        return "%d" % value
    return repr(round(float(value), 6))


def read_counters(text):
    """{(metric, ((label, value), ...)): value} of the counters in a previous file's text."""
    out = {}
    for line in (text or "").splitlines():
        m = _SAMPLE.match(line.strip())
        if not m or m.group(1) not in COUNTERS:
            continue
        labels = tuple(sorted((k, _unescape(v)) for k, v in _LABEL.findall(m.group(2))))
        try:
            out[(m.group(1), labels)] = float(m.group(3))
        except ValueError:
            continue
    return out


class StartMetrics:
    """What the textfile says about one unit; observe() per poll, finish() per run."""

    def __init__(self, unit, previous_text=None, clock=time.time, host=None):
        self.unit = unit
        self.host = host or None     # the inventory name: the `host` label of every series
        self.file_name = file_name(unit)
        self.clock = clock
        # A counter read back belongs to this unit on this host, whatever host label it had
        # (none before the label existed, or an inventory name since renamed).
        self.counters = {}
        for (metric, labels), value in read_counters(previous_text).items():
            key = (metric, self._labels(dict(labels)))
            self.counters[key] = self.counters.get(key, 0.0) + value
        # Counters exported from the first write on, so the first increase is seen.
        self._add("sglang_hangs_after_ready_total", 0)
        for code in sorted(c.code for c in FAILURE_CLASSES.values() if c.restart_helps):
            self._add("sglang_restarts_total", 0, reason_code=code)
        for verdict in FINAL_VERDICTS:
            self._add("sglang_starts_total", 0, verdict=verdict)
        self.current = None       # dict while a start is watched
        self.last = None          # dict of the last finished run
        self.last_assessment = None
        self.kind = None          # (restart kind, reason) of the last start told, or None

    # ---- updates -----------------------------------------------------------------------
    def start(self, attempt=1):
        self.current = {"attempt": attempt, "phase_since": 0.0, "phase": "starting"}
        self.last_assessment = None

    def observe_only(self, on):
        """The current start runs observe-only (module_utils/services/observe_only.py) or not."""
        if self.current is None:
            self.start()
        self.current["observe_only"] = bool(on)

    def observe(self, assessment, estimate=None):
        """One poll of the current start: the detector's Assessment (or its dict) and
        the EtaEstimator's Estimate (or None)."""
        a = assessment if isinstance(assessment, dict) else assessment.to_dict()
        if self.current is None:
            self.start()
        cur = self.current
        if a.get("phase") != cur["phase"]:
            cur["phase"], cur["phase_since"] = a.get("phase"), a.get("t") or 0.0
        cur["assessment"] = a
        cur["estimate"] = None if estimate is None else (estimate if isinstance(estimate, dict) else estimate.to_dict())
        self.last_assessment = a
        if a.get("final") or a.get("verdict") in FINAL_VERDICTS:
            self._add("sglang_starts_total", 1, verdict=a.get("verdict"))

    def restart_kind(self, kind, reason):
        """The start is warm (attached to the weight cache) or cold (reason says why)."""
        self.kind = (kind, reason)

    def restarted(self, reason_code):
        self._add("sglang_restarts_total", 1, reason_code=reason_code)

    def hang_after_ready(self):
        self._add("sglang_hangs_after_ready_total", 1)

    def finish(self, outcome, reason_code, attempts, phases=(), ready_after_s=None, slower=()):
        """The run ended: outcome ready | gave_up | interrupted; phases of its last start
        ([{"phase", "duration_s"}]); slower: the phases slower than usual."""
        self.last = {"outcome": outcome, "reason_code": reason_code or "", "attempts": attempts,
                     "phases": [(p["phase"], p["duration_s"]) for p in phases],
                     "ready_after_s": ready_after_s, "slower": len(slower), "ended": self.clock()}
        if self.current is not None:
            self.current["ended"] = True

    def _labels(self, labels):
        labels = dict(labels, unit=self.unit)
        labels.pop("host", None)
        if self.host:
            labels["host"] = self.host
        return tuple(sorted(labels.items()))

    def _add(self, metric, value, **labels):
        key = (metric, self._labels(labels))
        self.counters[key] = self.counters.get(key, 0.0) + value

    # ---- rendering ---------------------------------------------------------------------
    def render(self):
        samples = {}

        def put(metric, value, **labels):
            if value is not None:
                samples.setdefault(metric, []).append((dict(self._labels(labels)), value))

        cur = self.current or {}
        watching = bool(cur) and not cur.get("ended")
        put("sglang_start_in_progress", watching)
        put("sglang_start_observe_only", watching and bool(cur.get("observe_only")))
        a = cur.get("assessment") or self.last_assessment
        if a:
            p = a.get("progress") or {}
            for phase in PHASES:
                put("sglang_start_phase", phase == a.get("phase"), phase=phase)
            for verdict in VERDICTS:
                put("sglang_start_verdict", verdict == a.get("verdict"), verdict=verdict)
            put("sglang_start_elapsed_seconds", a.get("t"))
            put("sglang_start_phase_elapsed_seconds", (a.get("t") or 0.0) - cur.get("phase_since", 0.0))
            put("sglang_start_attempt", cur.get("attempt"))
            put("sglang_start_shards_loaded", p.get("shards_done"))
            put("sglang_start_shards", p.get("shards_total"))
            put("sglang_start_read_bytes", p.get("read_bytes"))
            if p.get("gpu_mem_used_mib") is not None:
                put("sglang_start_gpu_memory_used_bytes", p["gpu_mem_used_mib"] * MIB)
            if p.get("gpu_mem_total_mib") is not None:
                put("sglang_start_gpu_memory_total_bytes", p["gpu_mem_total_mib"] * MIB)
            e = cur.get("estimate") or {}
            if watching:
                put("sglang_start_eta_seconds", e.get("remaining_s"))
                put("sglang_start_phase_remaining_seconds", e.get("phase_remaining_s"))
            put("sglang_start_usual_seconds", e.get("usual_total_s"))
        if self.kind is not None:
            put("sglang_start_warm", self.kind[0] == "warm")
            if self.kind[0] != "warm":
                put("sglang_start_cold_reason_info", 1, reason=self.kind[1] or "")
        last = self.last
        if last:
            put("sglang_last_start_info", 1, outcome=last["outcome"], reason_code=last["reason_code"])
            put("sglang_last_start_attempts", last["attempts"])
            put("sglang_last_start_needed_human", last["outcome"] == "gave_up")
            for phase, seconds in last["phases"]:
                put("sglang_last_start_phase_duration_seconds", seconds, phase=phase)
            put("sglang_last_start_time_to_ready_seconds", last["ready_after_s"])
            put("sglang_last_start_slower_than_usual_phases", last["slower"])
            put("sglang_last_start_end_timestamp_seconds", round(last["ended"], 3))
        for (metric, labels), value in sorted(self.counters.items()):
            put(metric, value, **dict(labels))
        put("sglang_metrics_updated_timestamp_seconds", round(self.clock(), 3))
        return _exposition(samples)


def _exposition(samples):
    """The text exposition of {metric: [(labels, value)]}, in HELP's order."""
    lines = []
    for metric, (kind, text) in HELP.items():
        if metric not in samples:
            continue
        lines.append("# HELP %s %s" % (metric, text))
        lines.append("# TYPE %s %s" % (metric, kind))
        seen = set()
        for labels, value in samples[metric]:
            label_text = ",".join('%s="%s"' % (k, _escape(v)) for k, v in sorted(labels.items()))
            if label_text in seen:   # one sample per label set (a counter read back and updated)
                continue
            seen.add(label_text)
            lines.append("%s{%s} %s" % (metric, label_text, _number(value)))
    return "\n".join(lines) + "\n"


def render_delivery_budget(unit, budget, host=None, clock=time.time):
    """budget_file_name's text: the weight cache daemon's delivery budget (domain/weight_cache's
    DeliveryBudget) read after a ready start of `unit`, labelled unit and host."""
    labels = {"unit": unit}
    if host:
        labels["host"] = host
    return _exposition({
        "sglang_weight_cache_deliveries_remaining": [(labels, budget.remaining)],
        "sglang_weight_cache_deliveries": [(labels, budget.max_deliveries)],
        "sglang_metrics_updated_timestamp_seconds": [(labels, round(clock(), 3))],
    })


def write_textfile(folder, name, text):
    """Write folder/name atomically: a temporary file from mkstemp in the folder (a name the
    collector ignores), then renamed over the old one (a link planted at the name is
    replaced, never written through); mode 0644. The folder is checked first
    (safe_files.Folder.open_writable: not a link, this user's or root's, not writable by
    everyone). OSError names the file (folder/name) whatever step failed (ENOSPC, EROFS,
    EACCES, a folder refused)."""
    path = os.path.join(folder, name)
    try:
        with safe_files.Folder.open_writable(folder) as where:
            where.replace_with(name, text.encode("utf-8"), mode=0o644)
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror or str(exc), path) from exc
