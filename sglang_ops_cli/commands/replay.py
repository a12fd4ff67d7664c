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
import sys

from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.detector_settings import from_overrides
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.progress_line import progress_line
from ansible_collections.sglang_ops.serving.plugins.module_utils.records.trace_format import (
    TraceFormatError, header_settings, read_trace)
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.shared.replay import (
    EtaReplay, eta_history, parse_overrides, replay, settings_for)

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
