"""Watch one start of the unit: probe every poll_s, feed the detector, print progress,
write each observation with its assessment into the trace, stop at a final verdict.

It runs wherever the probe can be called: the host comes in as one HostAccess (below).
The restart action drives it from the controller over Ansible's connection
(plugin_utils/shared/remote_host_access.py, RemoteHostAccess), the unit's supervisor on the host
itself (module_utils/services/supervisor.py, _LocalHostAccess), unit tests with a scripted host and a
fake clock. tests/unit/probe/test_host_access.py checks that both conform.
"""
import dataclasses
import typing

from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.detector import Assessment, Detector
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.detector_settings import DetectorSettings
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.failure_classes import (
    FINAL_VERDICTS, PROBE_ERROR, READY_PENDING)
from ansible_collections.sglang_ops.serving.plugins.module_utils.services.observe_only import words as observe_only_words
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.progress_line import SEP, progress_line
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.server_layout import layout_of
from ansible_collections.sglang_ops.serving.plugins.module_utils.records.trace_format import (
    TraceWriter, relative_observation, trace_header)


@typing.runtime_checkable
class HostAccess(typing.Protocol):
    """What the watch needs of the host. Every piece of state a call depends on comes in as
    its argument; nobody sets its attributes from outside."""

    def probe(self, cursor, stacks, since_epoch_s):
        """One observation -> the sglang_probe result {"observation" (epoch `ts`), "cursor",
        "missing", "cost"}, or {"failed": True, "msg"}. The log after `cursor`; without one,
        since `since_epoch_s` (the start; None: since the unit left the inactive state).
        `stacks`: also a py-spy dump of every rank."""

    def clock(self):
        """Epoch seconds, the clock of the observations' `ts` too: every duration of the watch
        (`t`, the elapsed time, the start timeout) is a difference on it, so an access that can
        gives one that never steps (the supervisor's: monotonic, anchored at the start)."""

    def sleep(self, seconds):
        """Wait between polls."""

    def emit(self, line):
        """Show one line to the operator."""


POLL_S = 5.0                 # seconds between probes
START_TIMEOUT_S = 7200.0     # the hard upper bound of one start, whatever the detector says
MAX_PROBE_FAILURES = 3       # failed probes in a row before the watch gives up


@dataclasses.dataclass(frozen=True)
class TraceTarget:
    """Where the watch records what it saw (header fields of sglang-trace/1)."""
    path: str
    name: str
    unit: str
    description: str = ""
    # callable(path, header) -> the trace writer; None: trace_format.TraceWriter
    open_writer: object = None


@dataclasses.dataclass(frozen=True)
class WatchOptions:
    poll_s: float = POLL_S
    start_timeout_s: float = START_TIMEOUT_S
    max_probe_failures: int = MAX_PROBE_FAILURES
    settings: DetectorSettings = dataclasses.field(default_factory=DetectorSettings)
    trace: object = None                 # a TraceTarget, or None: nothing recorded
    outlook: object = None               # a start_outlook.StartOutlook (ETA, metrics file), or None
    # The StartOutlook whose load conditions and estimate the trace records, when it runs
    # outside the watch (the supervisor's, in its own poll hook); None: outlook.
    recorded_outlook: object = None
    # One node of a server over several hosts: decided_elsewhere(t) -> the server's final
    # Assessment once another node decided the start (or gave up), else None.
    decided_elsewhere: object = None
    # Rule 4 (module_utils/services/observe_only.py): a observe_only_decision.ObserveOnly when the same verdict
    # ended the unit's last starts; the detector then holds its verdicts up to the ceiling.
    observe_only: object = None
    # The server's command line where the watch knows it (the supervisor runs it): its nodes
    # (server_layout.py) decide a rank waiting at the rendezvous; recorded as the trace's `server`.
    server_argv: object = None


@dataclasses.dataclass
class WatchResult:
    """The final Assessment of one start, and what watching it took."""
    assessment: Assessment        # final, or the watch's own: probe_error, the start timeout
    polls: int                    # observations made
    probe_cost: dict              # totals of the probe's own cost (cpu_s, wall_s)
    observation: dict             # the last observation, {} when none came

    @property
    def ready(self):
        return self.assessment.verdict == "ready"

    def to_dict(self):
        a = self.assessment
        return {"verdict": a.verdict, "phase": a.phase, "reason_code": a.reason_code,
                "reason": a.reason, "t": a.t, "polls": self.polls}


def completion_ok(observation):
    """The start is proven to serve: a completion answered, or, for the weight cache daemon
    (no HTTP), every GPU's ready file names a live daemon."""
    cache = observation.get("weight_cache")
    if isinstance(cache, dict) and "http" not in observation:
        return cache.get("healthy") is True
    http = observation.get("http") or {}
    completion = http.get("completion")
    return isinstance(completion, dict) and completion.get("ok") is True


def _add_cost(totals, cost):
    for key, value in (cost or {}).items():
        if isinstance(value, (int, float)) and not isinstance(value, bool):
            totals[key] = round(totals.get(key, 0) + value, 6)


def _decision(a, obs, watched_s, options):
    """What the watch makes of the detector's assessment at this observation."""
    if a.verdict in FINAL_VERDICTS and (a.verdict != "ready" or completion_ok(obs)):
        return dataclasses.replace(a, t=obs["t"])
    if watched_s >= options.start_timeout_s:
        return dataclasses.replace(
            a, t=obs["t"], verdict="stalled", reason_code="stall_no_progress",
            reason="not ready after start_timeout_s=%.0f s (the hard upper bound); last: %s"
                   % (options.start_timeout_s, a.reason))
    if a.verdict == "ready":
        # The detector may call a healthy /health ready; the product's promise is a real
        # completion, so the watch keeps polling until one succeeds.
        return dataclasses.replace(a, verdict=READY_PENDING)
    return a


def _open_trace(target, options, obs, conditions):
    if target is None:
        return None
    gpus = len(obs.get("gpus") or [])
    header = trace_header(target.name, target.unit, options.poll_s, gpus, target.description, settings=options.settings,
                          load_conditions=conditions, layout=layout_of(options.server_argv) if options.server_argv else None)
    return (target.open_writer or TraceWriter)(target.path, header)


def _decided_elsewhere(options, watched_s):
    if options.decided_elsewhere is None:
        return None
    return options.decided_elsewhere(round(watched_s, 3))


def watch_start(access, options, t0, new_detector=None):
    """Watch from t0 (epoch seconds, the start; the journal is read from then) through
    access (a HostAccess) to a final verdict -> WatchResult."""
    make = new_detector or Detector
    kw = {} if options.observe_only is None else {"observe_only": options.observe_only}
    if options.server_argv:
        kw["layout"] = layout_of(options.server_argv)
    detector = make(options.settings, **kw)
    trace, cursor, stacks = None, None, False
    recorded = options.recorded_outlook or options.outlook
    recorded_conditions = None
    polls, failures, cost = 0, 0, {}
    obs, decided = {}, Assessment(0.0, "starting", "progressing", "starting", "no observation yet")
    try:
        while True:
            poll_began = access.clock()
            result = access.probe(cursor, stacks, None if cursor is not None else t0)
            elsewhere = _decided_elsewhere(options, access.clock() - t0)
            if elsewhere is not None:
                return WatchResult(elsewhere, polls, cost, obs)
            if result.get("failed") or result.get("unreachable") or "observation" not in result:
                failures += 1
                if failures >= options.max_probe_failures:
                    decided = dataclasses.replace(
                        decided, t=round(access.clock() - t0, 3), verdict=PROBE_ERROR, reason_code=PROBE_ERROR,
                        reason="the probe failed %d times in a row: %s" % (failures, result.get("msg", "no observation")))
                    return WatchResult(decided, polls, cost, obs)
                access.sleep(options.poll_s)
                continue
            failures, polls = 0, polls + 1
            cursor = result.get("cursor", cursor)
            _add_cost(cost, result.get("cost"))
            obs = relative_observation(result["observation"], t0)
            if result.get("missing"):
                obs["missing"] = result["missing"]
            a = detector.observe(obs)
            estimate = options.outlook.on_poll(obs, a) if options.outlook is not None else None
            line = progress_line(a, estimate)
            access.emit(line if options.observe_only is None else line + SEP + observe_only_words(options.observe_only))
            stacks = bool(a.want_stacks)
            decided = _decision(a, obs, access.clock() - t0, options)
            # what the ETA estimated with (the header; a line where it changed) and what it showed
            conditions = recorded.load_conditions() if recorded is not None else None
            if trace is None:
                trace, recorded_conditions = _open_trace(options.trace, options, obs, conditions), conditions
            if trace is not None:
                trace.append(obs, decided, load_conditions=conditions if conditions != recorded_conditions else None,
                             eta=recorded.last_estimate if recorded is not None else None)
                recorded_conditions = conditions
            if decided.verdict in FINAL_VERDICTS:
                return WatchResult(decided, polls, cost, obs)
            access.sleep(max(0.0, options.poll_s - (access.clock() - poll_began)))
    finally:
        if trace is not None:
            trace.close()
