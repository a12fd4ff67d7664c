"""Watch one start of the unit: probe every poll_s, feed the detector, print progress,
stop at a final verdict. Runs wherever the probe can be called: the restart action drives
it from the controller, a watcher on the host can drive it locally; the host comes in as
callables (probe, emit, clock, sleep), so the loop runs in unit tests with a fake probe, a
fake clock and a real detector.
"""
from dataclasses import dataclass, field

from ansible_collections.sglang_ops.serving.plugins.module_utils import progress_line
from ansible_collections.sglang_ops.serving.plugins.module_utils.detector import Detector
from ansible_collections.sglang_ops.serving.plugins.module_utils.detector_settings import DetectorSettings
from ansible_collections.sglang_ops.serving.plugins.module_utils.failure_classes import FINAL_VERDICTS, PROBE_ERROR
from ansible_collections.sglang_ops.serving.plugins.module_utils.trace_format import relative_observation

POLL_S = 5.0                 # seconds between probes
START_TIMEOUT_S = 7200.0     # the hard upper bound of one start, whatever the detector says
MAX_PROBE_FAILURES = 3       # failed probes in a row before the watch gives up


@dataclass
class WatchOutcome:
    verdict: str          # ready | stalled | failed | probe_error
    phase: str
    reason_code: str
    reason: str
    t: float              # seconds since the watch began when the verdict was reached
    polls: int
    assessment: dict = field(default_factory=dict)
    last_observation: dict = field(default_factory=dict)
    probe_cost: dict = field(default_factory=dict)   # totals of the probe's own cost

    @property
    def ready(self):
        return self.verdict == "ready"

    def to_dict(self):
        return {"verdict": self.verdict, "phase": self.phase, "reason_code": self.reason_code,
                "reason": self.reason, "t": self.t, "polls": self.polls}


def detector_factory(overrides, poll_s):
    """(make_detector(gpus), settings); ValueError on an unknown or bad setting."""
    settings = DetectorSettings().with_overrides(dict(overrides or {}))

    def make_detector(gpus):
        del gpus  # the detector reads the GPU count off each observation
        return Detector(settings)
    return make_detector, settings


def format_progress(assessment, elapsed_s, estimate=None):
    """The one-line progress text (the detector's progress_line formatter), with the ETA
    of an eta.Estimate."""
    del elapsed_s  # the assessment carries the elapsed time of its observation
    return progress_line.progress_line(assessment, estimate)


def completion_ok(observation):
    http = observation.get("http") or {}
    completion = http.get("completion")
    return isinstance(completion, dict) and completion.get("ok") is True


def _add_cost(totals, cost):
    for key, value in (cost or {}).items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            totals[key] = round(totals.get(key, 0) + value, 6)


def _assessment_dict(a):
    return a.to_dict() if hasattr(a, "to_dict") else dict(a)


class StartWatch:
    """One attempt's watch.

    probe(cursor, want_stacks) -> the probe module's result dict (observation, cursor,
        missing, cost; failed/msg when it failed).
    make_detector(gpus) -> a Detector; built on the first observation, when the GPU
        count is known.
    open_trace(gpus) -> a TraceWriter (or anything with append()).
    emit(text) -> prints one progress line.
    format_progress(assessment, elapsed_s[, estimate]) -> the line's text.
    on_poll(observation, assessment) -> an ETA estimate for the line (StartOutlook.on_poll), or None.
    """

    def __init__(self, probe, make_detector, open_trace, emit, format_progress, clock, sleep,
                 poll_s, start_timeout_s, gpus=None, max_probe_failures=MAX_PROBE_FAILURES, on_poll=None):
        self.probe = probe
        self.make_detector = make_detector
        self.open_trace = open_trace
        self.emit = emit
        self.format_progress = format_progress
        self.clock = clock
        self.sleep = sleep
        self.poll_s = float(poll_s)
        self.start_timeout_s = float(start_timeout_s)
        self.gpus = gpus
        self.max_probe_failures = max_probe_failures
        self.on_poll = on_poll

    def run(self, t0, cursor=None):
        state = {"trace": None}
        try:
            return self._run(t0, cursor, state)
        finally:
            if state["trace"] is not None and hasattr(state["trace"], "close"):
                state["trace"].close()

    def _run(self, t0, cursor, state):
        detector = None
        trace = None
        want_stacks = False
        probe_failures = 0
        polls = 0
        last_obs, last_a = {}, None
        cost_totals = {}
        while True:
            poll_began = self.clock()
            result = self.probe(cursor, want_stacks)
            if result.get("failed") or result.get("unreachable") or "observation" not in result:
                probe_failures += 1
                if probe_failures >= self.max_probe_failures:
                    return WatchOutcome(
                        PROBE_ERROR, getattr(last_a, "phase", "starting"), PROBE_ERROR,
                        "the probe failed %d times in a row: %s" % (probe_failures, result.get("msg", "no observation")),
                        round(self.clock() - t0, 3), polls, _assessment_dict(last_a) if last_a else {},
                        last_obs, cost_totals)
                self.sleep(self.poll_s)
                continue
            probe_failures = 0
            polls += 1
            cursor = result.get("cursor", cursor)
            _add_cost(cost_totals, result.get("cost"))
            obs = relative_observation(result["observation"], t0)
            if result.get("missing"):
                obs["missing"] = result["missing"]
            if detector is None:
                gpus = self.gpus if self.gpus is not None else len(obs.get("gpus") or [])
                detector = self.make_detector(gpus)
                trace = state["trace"] = self.open_trace(gpus)
            trace.append(obs)
            a = detector.observe(obs)
            last_obs, last_a = obs, a
            elapsed_s = obs["t"]
            estimate = self.on_poll(obs, a) if self.on_poll is not None else None
            self.emit(self.format_progress(a, elapsed_s) if estimate is None
                      else self.format_progress(a, elapsed_s, estimate))
            want_stacks = bool(getattr(a, "want_stacks", False))
            verdict = a.verdict
            if verdict == "ready" and not completion_ok(obs):
                # The detector may call a healthy /health ready; the product's promise is
                # a real completion, so keep polling until one succeeds.
                verdict = "ready_pending"
            if verdict in FINAL_VERDICTS:
                return WatchOutcome(verdict, a.phase, a.reason_code, a.reason, obs["t"], polls,
                                    _assessment_dict(a), obs, cost_totals)
            if self.clock() - t0 >= self.start_timeout_s:
                return WatchOutcome(
                    "stalled", a.phase, "stall_no_progress",
                    "not ready after start_timeout_s=%.0f s (the hard upper bound); last: %s"
                    % (self.start_timeout_s, a.reason),
                    obs["t"], polls, _assessment_dict(a), obs, cost_totals)
            self.sleep(max(0.0, self.poll_s - (self.clock() - poll_began)))
