"""Replaying a recorded start (sglang-trace/1, docs/trace-format.md) through the detector the
restart uses, and its time-to-ready estimate as the watch made it. `sglang-ops replay`, the
detector benchmarks (bench/) and the trace corpus tests all replay through this module.
"""
import os

from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.detector import Detector
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.detector_settings import DetectorSettings, from_overrides
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.failure_classes import UNDECIDED
from ansible_collections.sglang_ops.serving.plugins.module_utils.records.start_history import (
    HISTORY_LIMIT, history_traces, load_history)
from ansible_collections.sglang_ops.serving.plugins.module_utils.records.trace_format import header_settings, recorded_conditions, trace_layout
from ansible_collections.sglang_ops.serving.plugins.module_utils.services.start_outlook import StartOutlook


def parse_overrides(pairs):
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError("--set expects KEY=VALUE, got %r" % pair)
        out[key.strip()] = value.strip()
    return out


def assessments(observations, settings, header=None):
    """The detector's assessment (as a dict) of every observation, in order, past a final
    one too: the report of a trace that does not carry the watch's own assessments."""
    det = Detector(settings, layout=trace_layout(header or {}))
    return [det.observe(obs).to_dict() for obs in observations]


def settings_or_defaults(recorded):
    """The DetectorSettings a trace or run recorded (overrides of the defaults); today's
    defaults when it recorded none, or ones from a release that named them otherwise."""
    if recorded:
        try:
            return from_overrides(recorded)
        except (ValueError, TypeError):
            pass
    return DetectorSettings()


def replay(header, observations, settings, on_assessment=None):
    """The verdict dict of the replay contract for one trace; on_assessment(assessment,
    observation) after each observation."""
    det = Detector(settings, layout=trace_layout(header))
    last = None
    for obs in observations:
        last = det.observe(obs)
        if on_assessment is not None:
            on_assessment(last, obs)
        if last.final:
            break
    if last is None:
        return {"verdict": UNDECIDED, "t": None, "phase": None, "reason": "the trace has no observations"}
    verdict = last.verdict if last.final else UNDECIDED
    reason = last.reason if last.final else "end of trace while %s: %s" % (last.verdict, last.reason)
    return {"verdict": verdict, "t": last.t, "phase": last.phase, "reason": reason,
            "reason_code": last.reason_code, "evidence": last.evidence}


# What two estimates must share to be the same (Estimate.to_dict() rounds to 0.1 s)
SAME_ESTIMATE_KEYS = ("phase", "remaining_s", "remaining_low_s", "remaining_high_s", "phase_basis")


class EtaReplay:
    """The time-to-ready estimate of a recorded start, made again as the watch made it: a
    StartOutlook over the history, with the load conditions the trace recorded."""

    def __init__(self, header, history):
        self.outlook = StartOutlook(header.get("unit") or "", history)
        self.outlook.begin_attempt(1)
        self.conditions = recorded_conditions(header)
        if self.conditions is not None:
            self.outlook.use_recorded_conditions(self.conditions)
        self.compared = self.agreed = 0

    def estimate(self, assessment, observation):
        """(Estimate, the LoadConditions this line changed to or None) of one poll."""
        changed = recorded_conditions(observation)
        if changed is not None:
            self.conditions = changed
            self.outlook.use_recorded_conditions(changed)
        estimate = self.outlook.on_poll(observation, assessment)
        live = observation.get("eta")
        if live is not None:
            mine = estimate.to_dict()
            self.compared += 1
            self.agreed += all(live.get(k) == mine.get(k) for k in SAME_ESTIMATE_KEYS)
        return estimate, changed


def eta_history(trace, paths):
    """The ready starts the ETA of `trace` is estimated from: those in paths (history_traces);
    when they list the trace itself, only the ones before it (what the live start had)."""
    traces = history_traces(paths)
    absolute = [os.path.abspath(p) for p in traces]
    if os.path.abspath(trace) in absolute:
        traces = traces[:absolute.index(os.path.abspath(trace))]
    return load_history(traces, exclude=[trace], limit=4 * HISTORY_LIMIT)


def settings_for(header, settings_from, overrides):
    """The DetectorSettings of a replay: the trace's recorded ones (or the defaults), then
    the overrides; ValueError names a bad setting."""
    settings = DetectorSettings()
    recorded = header_settings(header) if settings_from == "trace" else None
    if recorded:
        try:
            settings = from_overrides(recorded)
        except ValueError as e:
            raise ValueError("the settings recorded in the trace: %s (--settings-from default ignores them)" % e)
    return from_overrides(parse_overrides(overrides), base=settings)
