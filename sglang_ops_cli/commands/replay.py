"""`sglang-ops replay FILE`: feed a recorded trace to the detector the restart uses.

The last stdout line is the verdict JSON of the replay contract
(docs/trace-format.md); `--verbose` prints one progress line per observation
before it; `--eta` prints the time-to-ready estimate of each poll (with `--history`:
earlier starts of the same host, as trace files or the folders that hold them; a folder that
holds the trace itself gives the starts before it, the history the live start had). The
estimate is the watch's own (start_outlook.StartOutlook) from the load conditions the trace
recorded (its header's `load_conditions`, a line's own where they changed: page-cache
residency, weight cache, restart kind, compile caches), so it is the estimate the live start
gave; a trace that recorded that estimate (each line's `eta`) is compared with it, poll by
poll, in one line before the verdict. Exit status: 0 when the trace was read, 2 for a
malformed trace or bad settings.

The detector settings are those the trace's header records (`settings`, the ones that
decided the start), so a replay reaches the verdict the watch reached; `--settings-from
default` uses the defaults instead, and `--set KEY=VALUE` overrides either.
"""
import json
import os
import sys

from ansible_collections.sglang_ops.serving.plugins.module_utils.model.detector import Detector
from ansible_collections.sglang_ops.serving.plugins.module_utils.model.detector_settings import DetectorSettings, from_overrides
from ansible_collections.sglang_ops.serving.plugins.module_utils.model.failure_classes import UNDECIDED
from ansible_collections.sglang_ops.serving.plugins.module_utils.model.progress_line import progress_line
from ansible_collections.sglang_ops.serving.plugins.module_utils.records.start_history import (
    HISTORY_LIMIT, history_traces, load_history)
from ansible_collections.sglang_ops.serving.plugins.module_utils.records.trace_format import (
    TraceFormatError, header_settings, read_trace, recorded_conditions)
from ansible_collections.sglang_ops.serving.plugins.module_utils.services.start_outlook import StartOutlook

HELP = "replay a recorded start (sglang-trace/1) through the stall detector"


def add_arguments(parser):
    parser.add_argument("file", help="trace file (JSON Lines, sglang-trace/1)")
    parser.add_argument("--verbose", "-v", action="store_true", help="print the per-observation timeline")
    parser.add_argument("--eta", action="store_true", help="print the time-to-ready estimate of each poll")
    parser.add_argument("--history", action="append", default=[], metavar="PATH",
                        help="an earlier start of the same host for --eta: a trace file, or a folder of them "
                             "(artifacts/<host>, a supervisor's starts folder); repeatable")
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                        help="override a detector setting (repeatable), e.g. --set stall_idle_window_s=300")
    parser.add_argument("--settings-from", choices=("trace", "default"), default="trace",
                        help="the detector settings to start from: those recorded in the trace's header (the "
                             "ones that decided; the defaults for a trace without them), or the defaults")


def parse_overrides(pairs):
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError("--set expects KEY=VALUE, got %r" % pair)
        out[key.strip()] = value.strip()
    return out


def replay(header, observations, settings, on_assessment=None):
    """The verdict dict of the replay contract for one trace; on_assessment(assessment,
    observation) after each observation."""
    det = Detector(settings)
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


def run(args):
    try:
        from_overrides(parse_overrides(args.overrides))
    except ValueError as e:
        print("sglang-ops replay: %s" % e, file=sys.stderr)
        return 2
    try:
        header, observations = read_trace(args.file)
    except TraceFormatError as e:
        print("sglang-ops replay: malformed trace %s" % e, file=sys.stderr)
        return 2
    try:
        settings = settings_for(header, getattr(args, "settings_from", "trace"), args.overrides)
    except ValueError as e:
        print("sglang-ops replay: %s" % e, file=sys.stderr)
        return 2
    if args.verbose:
        print("settings: %s%s" % (
            "recorded in the trace" if args.settings_from == "trace" and header_settings(header) else "defaults",
            " with --set %s" % ", ".join(args.overrides) if args.overrides else ""), file=sys.stderr)
    show, eta = None, None
    if args.verbose:
        def show(a, obs):
            print("%8.1f  %-11s %s" % (a.t, a.verdict, progress_line(a)))
    if args.eta:
        try:
            eta = EtaReplay(header, eta_history(args.file, args.history))
        except ValueError as e:
            print("sglang-ops replay: %s" % e, file=sys.stderr)
            return 2
        verbose = args.verbose
        if eta.conditions is not None:
            print("load conditions (trace header): %s" % eta.conditions.words())

        def show(a, obs):
            estimate, changed = eta.estimate(a, obs)
            if changed is not None:
                print("%8.1f  load conditions: %s" % (a.t, changed.words()))
            if verbose:
                print("%8.1f  %-11s %s" % (a.t, a.verdict, progress_line(a, estimate)))
            else:
                print("%8.1f  %-16s %s" % (a.t, a.phase, estimate.text() or "ready"))
    try:
        verdict = replay(header, observations, settings, show)
    except Exception as e:  # an observation the format checks let through: one line, no traceback
        print("sglang-ops replay: cannot replay %s: %s: %s" % (
            args.file, type(e).__name__, str(e).splitlines()[0][:200] if str(e) else "malformed observation"),
            file=sys.stderr)
        return 2
    if eta is not None and eta.compared:
        print("ETA as the live start estimated it at %d of %d polls%s" % (
            eta.agreed, eta.compared, "" if eta.agreed == eta.compared else
            " (the history given is not the one the live start had, or the code changed since)"))
    print(json.dumps(verdict, sort_keys=False))
    return 0
