#!/usr/bin/env python3
"""Score a replay command on labelled sglang-trace/1 files (docs/trace-format.md).

usage: bench/score.py [--cmd 'bin/sglang-ops replay {trace}'] [--cwd DIR] TRACE_OR_DIR...

One row per labelled trace (judged by bench/scoring/judge.py: a false restart, a verdict
before the onset, a miss or a late verdict fails), then the detection latency, the phase
attribution and the summary line 'score: N passed, M failed'. Exit status 1 when any
trace failed.
"""
import argparse
import os
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "collections")]

from bench.scoring.replay_command import DEFAULT_CMD  # noqa: E402
from bench.scoring.runs import recorded_runs, replay_runs  # noqa: E402


def row(outcome):
    run, j = outcome.run, outcome.judgement
    want = run.label().phase
    return "%-4s %-44s %-44s phase=%s%s" % ("ok" if j.ok else "FAIL", run.trace[:44], j.why[:44],
                                             outcome.result.get("phase"), "" if want is None else " (want %s)" % want)


def summary(outcomes):
    latencies_s = sorted(o.judgement.latency_s for o in outcomes if o.judgement.latency_s is not None)
    phased = [o.judgement.phase_right for o in outcomes if o.judgement.phase_right is not None]
    passed = sum(o.judgement.ok for o in outcomes)
    return ["detection latency: median %s s, max %s s; phase right %d/%d; replay wall max %.2f s" % (
                round(statistics.median(latencies_s)) if latencies_s else None,
                round(latencies_s[-1]) if latencies_s else None, sum(phased), len(phased),
                max((o.wall_s for o in outcomes), default=0.0)),
            "score: %d passed, %d failed" % (passed, len(outcomes) - passed)]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cmd", default=DEFAULT_CMD, help="replay command, {trace} is the trace's path")
    parser.add_argument("--cwd", default=".", help="folder the command runs in")
    parser.add_argument("--jobs", type=int, default=1, help="replays at the same time")
    parser.add_argument("paths", nargs="+", help="trace files or folders of them (*.jsonl)")
    args = parser.parse_args(argv)
    runs = recorded_runs(args.paths)
    if not runs:
        parser.error("no labelled trace in %s" % " ".join(args.paths))
    outcomes = replay_runs(runs, args.cmd, args.cwd, args.jobs)
    for outcome in outcomes:
        print(row(outcome))
    print("\n".join(summary(outcomes)))
    return 0 if all(o.judgement.ok for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
