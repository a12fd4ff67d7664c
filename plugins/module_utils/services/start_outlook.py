"""Per-poll companion of a watched start: the time-to-ready estimate and the metrics file.

The restart action (controller) and a host supervising its own starts use it the same
way; on the host, one call per poll is all the watch loop needs:

    outlook = StartOutlook.on_host("sglang-k26-ddtree", "/var/lib/prometheus/node-exporter")
    outlook.begin_attempt(1)
    estimate = outlook.on_poll(observation, assessment)     # every poll: ETA + metrics file
    outlook.restarted(reason_code)                          # before an automatic restart
    outlook.finish("ready", "ready", attempts=1)            # the run ended (or "gave_up")
    outlook.hang_after_ready()                              # a hang seen after ready

`write(name, text)` puts the metrics file where node_exporter reads it; a write that
fails is reported once through `warn` and never stops the watch. Standard library only.
"""
import os
import dataclasses
import time

from ansible_collections.sglang_ops.serving.plugins.module_utils.records.eta import EtaEstimator, LoadConditions, slower_than_usual
from ansible_collections.sglang_ops.serving.plugins.module_utils.host.compile_cache_warmth import compile_cache_warmth
from ansible_collections.sglang_ops.serving.plugins.module_utils.host.prewarm_reader import model_residency
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.phases import phase_rank
from ansible_collections.sglang_ops.serving.plugins.module_utils.records.start_history import (
    HISTORY_LIMIT, HISTORY_TRACE_MAX_BYTES, SUPERVISOR_STARTS_DIR, load_history, model_of, supervisor_traces)
from ansible_collections.sglang_ops.serving.plugins.module_utils.records.start_metrics import (
    StartMetrics, file_name, write_textfile)
from ansible_collections.sglang_ops.serving.plugins.module_utils.records import safe_files

# The metrics file an outlook rewrites holds a few KiB; one over this is not read back.
METRICS_FILE_MAX_BYTES = 1 << 20


def read_metrics_file(textfile_dir, name, warn=None):
    """The text of the unit's metrics file, whose counters the next one carries on; None when
    there is none yet or it is refused (safe_files: a link, a FIFO, another owner's file, over
    METRICS_FILE_MAX_BYTES): counters start at 0, the refusal named once through warn, and the
    next write replaces it (write_textfile renames over it, never writing through)."""
    try:
        return safe_files.read_text_file(os.path.join(textfile_dir, name), METRICS_FILE_MAX_BYTES)
    except safe_files.UnsafeEntry as exc:
        if warn is not None:
            warn("warning: metrics file %s; its counters start again from 0 and a file of ours replaces it" % exc)
    except OSError:
        pass
    return None


def record_phases(record):
    """[{"phase", "started_s", "duration_s"}] of a supervisor's start record (verdict.json's
    phase_durations), in the order of the phases."""
    durations = record.get("phase_durations") or {}
    out, began = [], 0.0
    for phase in sorted(durations, key=phase_rank):
        out.append({"phase": phase, "started_s": round(began, 3), "duration_s": float(durations[phase])})
        began += float(durations[phase])
    return out


def time_to_ready(phases, history, ready_after_s):
    """What a run record keeps of a start against the host's history (ready start records,
    oldest first): the usual time, the start's phases ([{"phase", "started_s",
    "duration_s"}], in order), its time to ready and the phases slower than usual."""
    history = list(history)[-HISTORY_LIMIT:]
    return {"history_starts": len(history), "usual_total_s": EtaEstimator(history).usual_total_s,
            "ready_after_s": ready_after_s, "phases": list(phases),
            "slower_than_usual": [{"phase": p, "took_s": took, "usual_s": usual}
                                  for p, took, usual in slower_than_usual(phases, history)]}


def residency_conditions(model_path, weight_cache=False):
    """The LoadConditions of a start of model_path on this host: the weight files' size and
    what the page cache holds of them now (one mincore pass); ValueError when the kernel
    would under-report residency to this user, OSError when the files cannot be read."""
    residency, trusted = model_residency([model_path])
    if not trusted:
        raise ValueError("page-cache residency of %s is under-reported to this user (neither root nor "
                         "the files' owner)" % model_path)
    return LoadConditions(model_bytes=residency.size_bytes, resident_bytes=residency.resident_bytes,
                          weight_cache=weight_cache)


class StartOutlook:
    def __init__(self, unit, history=(), write=None, previous_text=None, warn=None, clock=time.time, host=None,
                 conditions=None, read_residency=None):
        self.unit = unit
        self.history = list(history)        # ready start records of this host, oldest first
        self.write = write
        self.warn = warn
        self.metrics = StartMetrics(unit, previous_text=previous_text, clock=clock, host=host)
        self.model = None
        # what a start reads and from where (eta.LoadConditions): given (the restart's prewarm
        # measured it), or read_residency(model_path) once per attempt when the model is named
        self.conditions = conditions
        self.read_residency = read_residency
        self._residency_read = False
        self.estimator = EtaEstimator(self.history[-HISTORY_LIMIT:], conditions)
        self.phases = []                    # [{"phase", "started_s", "duration_s"}] of the current attempt
        self.ready_after_s = None
        self._write_failed = False
        self.weight_cache = False           # this start attaches to the weight cache daemon
        self.kind = None                    # warm | cold | cold_fallback (restart_kind), None: no daemon
        self.compile_caches = None          # warm | cold | partial: the JIT caches the server finds
        self.last_estimate = None           # the Estimate of the last poll (the trace records it)

    def _this_start(self, conditions):
        """conditions with what is known of this start besides the page cache."""
        return dataclasses.replace(conditions, weight_cache=self.weight_cache, restart_kind=self.kind,
                                   compile_caches=self.compile_caches)

    def load_conditions(self):
        """The LoadConditions the ETA estimates this start with now: what its trace records."""
        return self.estimator.conditions

    def use_recorded_conditions(self, conditions):
        """Estimate from now on with the LoadConditions a trace recorded (replay)."""
        self.weight_cache, self.kind, self.compile_caches = (conditions.weight_cache, conditions.restart_kind,
                                                             conditions.compile_caches)
        self.estimator.use_conditions(conditions)

    def attached_weight_cache(self, on):
        """This start loads its weights from the weight cache daemon (True) or from disk: the
        ETA's weight load is an attach, not a read (eta.LoadConditions.weight_cache)."""
        self.weight_cache = bool(on)
        self.estimator.use_conditions(self._this_start(self.estimator.conditions))

    def restart_kind(self, kind, reason):
        """warm | cold | cold_fallback, and why not warm (the metrics file says both; the ETA's
        conditions record the kind)."""
        self.metrics.restart_kind(kind, reason)
        self.kind = kind
        self.estimator.use_conditions(self._this_start(self.estimator.conditions))
        if kind != "warm" and self.weight_cache:
            self.attached_weight_cache(False)
        self._write()

    @classmethod
    def on_host(cls, unit, textfile_dir, starts_dir=SUPERVISOR_STARTS_DIR, warn=None, host=None, weight_cache=False):
        """The outlook of a host supervisor: history from its starts folder, the metrics
        file written in textfile_dir (counters read back from the file already there);
        with no textfile_dir, the estimate alone and no file. host: the inventory name
        (the metrics' `host` label). The page-cache residency of the model is read once
        per start, when SGLang names it; weight_cache: the server loads from an attached
        weight cache (`--weight-cache-mode client`). The compile caches are the folders the
        unit's environment names (the supervisor runs with it)."""
        # A start folder's trace beyond HISTORY_TRACE_MAX_BYTES counts by its verdict.json
        # alone (or not at all): the launch waits on this read.
        history = load_history(supervisor_traces(starts_dir), limit=4 * HISTORY_LIMIT,
                               max_trace_bytes=HISTORY_TRACE_MAX_BYTES)
        caches = compile_cache_warmth()

        def residency(model):
            return residency_conditions(model, weight_cache)
        if not textfile_dir:
            outlook = cls(unit, history, write=lambda n, text: None, previous_text=None, warn=warn, host=host,
                          read_residency=residency)
            outlook.weight_cache, outlook.compile_caches = bool(weight_cache), caches
            return outlook
        name = file_name(unit)
        previous = read_metrics_file(textfile_dir, name, warn)
        outlook = cls(unit, history, write=lambda n, text: write_textfile(textfile_dir, n, text),
                      previous_text=previous, warn=warn, host=host, read_residency=residency)
        outlook.weight_cache, outlook.compile_caches = bool(weight_cache), caches
        return outlook

    def _history_of(self, model):
        same = [r for r in self.history if model is None or r.get("model") in (model, None)]
        return same[-HISTORY_LIMIT:]

    def begin_attempt(self, n):
        self.metrics.start(attempt=n)
        conditions = self.conditions if self.conditions is not None else LoadConditions()
        self.estimator = EtaEstimator(self._history_of(self.model), self._this_start(conditions))
        self._residency_read = False
        self.phases, self.ready_after_s = [], None

    def on_poll(self, observation, assessment):
        """One poll: the Estimate (eta.Estimate), with the metrics file rewritten."""
        a = assessment if isinstance(assessment, dict) else assessment.to_dict()
        if self.model is None:
            model = model_of([observation or {}])
            if model is not None:   # SGLang names its model in its first lines
                self.model = model
                self.estimator.use_history(self._history_of(model))
        if self.model is not None and self.read_residency is not None and not self._residency_read:
            self._residency_read = True
            self._read_conditions(self.model)
        estimate = self.last_estimate = self.estimator.update(a)
        self._track_phase(a)
        self.metrics.observe(a, estimate)
        self._write()
        return estimate

    def _read_conditions(self, model):
        try:
            conditions = self.read_residency(model)
            self.estimator.use_conditions(self._this_start(conditions))
        except (OSError, ValueError) as exc:  # the ETA goes on from the history's reads alone
            if self.warn is not None:
                self.warn("ETA without page-cache residency: %s" % exc)

    def _track_phase(self, a):
        t, phase = a.get("t") or 0.0, a.get("phase")
        if self.phases and self.phases[-1]["phase"] != phase:   # the phase before ends where this one begins
            self.phases[-1]["duration_s"] = round(t - self.phases[-1]["started_s"], 3)
        if not self.phases or self.phases[-1]["phase"] != phase:
            self.phases.append({"phase": phase, "started_s": 0.0 if not self.phases else t, "duration_s": 0.0})
        self.phases[-1]["duration_s"] = round(t - self.phases[-1]["started_s"], 3)
        if a.get("verdict") == "ready":
            self.ready_after_s = t

    def restarted(self, reason_code):
        self.metrics.restarted(reason_code)
        self._write()

    def hang_after_ready(self):
        self.metrics.hang_after_ready()
        self._write()

    def slower_than_usual(self):
        """[(phase, took_s, usual_s)] of the current attempt against this host's history."""
        return slower_than_usual(self.phases, self.estimator.history)

    def summary(self):
        """What a run record keeps: the usual time, this attempt's phases, the slow ones."""
        return time_to_ready(self.phases, self.estimator.history, self.ready_after_s)

    def finish(self, outcome, reason_code, attempts):
        self.metrics.finish(outcome, reason_code, attempts, phases=self.phases,
                            ready_after_s=self.ready_after_s if outcome == "ready" else None,
                            slower=self.slower_than_usual())
        self._write()

    def _write(self):
        if self.write is None:
            return
        try:
            self.write(self.metrics.file_name, self.metrics.render())
        except Exception as exc:  # metrics are for on-call's dashboards; the start goes on without them
            if not self._write_failed and self.warn is not None:
                self.warn("metrics file not written: %s" % exc)
            self._write_failed = True


def start_time_to_ready(record, starts):
    """run.json's time_to_ready for one supervised start: against the ready starts among
    `starts` (records, any order) that began before it."""
    name = os.path.basename(record.get("dir") or "")
    history = [{"outcome": "ready", "ready_after_s": s.get("ready_after_s"), "phases": record_phases(s)}
               for s in sorted(starts, key=lambda s: os.path.basename(s.get("dir") or ""))
               if s.get("verdict") == "ready" and s.get("ready_after_s") is not None
               and os.path.basename(s.get("dir") or "") < name]
    ready_after_s = record.get("ready_after_s") if record.get("verdict") == "ready" else None
    return time_to_ready(record_phases(record), history, ready_after_s)
