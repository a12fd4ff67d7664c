#!/usr/bin/env python3
"""Replay labelled traces as recorded and under every perturbation, judged against their labels.

usage: bench/perturb.py [--cmd 'bin/sglang-ops replay {trace}'] [--cwd DIR] [--seed N]
                        [--only NAME,...] [--jobs N] [--keep DIR] [--json OUT] [--quiet]
                        TRACE_OR_DIR...

The perturbations are those of bench/scoring/perturbations.py (dropped and resampled
polls, jittered times, journal records cut at LineMax, no GPU readings, no py-spy
samples, a time shift, duplicated samples); each variant is judged by its own label
(bench/scoring/judge.py). Report: every run that did not pass (unless --quiet), a table
perturbation x outcome, every false restart and every miss, replay wall times. Exit
status 0 when every run passed and every variant met the trace format.
"""
import argparse
import collections
import json
import os
import shutil
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "collections")]

from bench.scoring import judge  # noqa: E402
from bench.scoring.perturbations import PERTURBATIONS  # noqa: E402
from bench.scoring.replay_command import DEFAULT_CMD  # noqa: E402
from bench.scoring.runs import AS_RECORDED, recorded_runs, replay_runs, variant_runs  # noqa: E402

COLUMNS = ((judge.PASS, "passed"), (judge.FALSE_RESTART, "FALSE"), (judge.PREMATURE, "prem."),
           (judge.MISSED, "missed"), (judge.MISSED_AT_END, "miss@end"), (judge.LATE, "late"),
           (judge.NO_READY, "noRdy"), (judge.ERROR, "error"))


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cmd", default=DEFAULT_CMD, help="replay command, {trace} is the trace's path")
    parser.add_argument("--cwd", default=".", help="folder the command runs in")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", default="", help="comma-separated perturbation names (default: all)")
    parser.add_argument("--jobs", type=int, default=1, help="replays at the same time")
    parser.add_argument("--keep", default=None, help="write the variants here instead of a temporary folder")
    parser.add_argument("--json", default=None, help="write every result as JSON to this file")
    parser.add_argument("--quiet", action="store_true", help="no row per failed run, only the tables")
    parser.add_argument("paths", nargs="+", help="trace files or folders of them (*.jsonl)")
    args = parser.parse_args(argv)
    args.names = [n for n in args.only.split(",") if n] or list(PERTURBATIONS)
    unknown = [n for n in args.names if n not in PERTURBATIONS]
    if unknown:
        parser.error("unknown perturbation(s): %s (known: %s)" % (", ".join(unknown), ", ".join(PERTURBATIONS)))
    return args


def by_run(outcomes):
    return {(o.run.trace, o.run.perturbation): o for o in outcomes}


def failed_rows(outcomes):
    index = by_run(outcomes)
    for o in outcomes:
        if o.judgement.ok:
            continue
        recorded = index.get((o.run.trace, AS_RECORDED))
        also = "" if o.run.perturbation == AS_RECORDED or not recorded or recorded.judgement.ok else " (fails as recorded too)"
        yield "%-44s %-16s %-13s %-44s %s%s | %s" % (
            o.run.trace[:44], o.run.perturbation, o.judgement.kind.upper(), o.judgement.why[:44],
            o.result.get("phase"), also, str(o.result.get("reason") or "")[:110])


def table(outcomes, names):
    index = by_run(outcomes)
    yield "%-16s %5s %s %7s %6s %8s" % ("perturbation", "runs", " ".join("%8s" % c for _, c in COLUMNS),
                                        "regress", "fixed", "wall max")
    for name in [AS_RECORDED] + names:
        rows = [o for o in outcomes if o.run.perturbation == name]
        kinds = collections.Counter(o.judgement.kind for o in rows)
        recorded_ok = [index[(o.run.trace, AS_RECORDED)].judgement.ok for o in rows]
        regress = sum(ok and not o.judgement.ok for o, ok in zip(rows, recorded_ok))
        fixed = sum(not ok and o.judgement.ok for o, ok in zip(rows, recorded_ok))
        yield "%-16s %5d %s %7s %6s %7.2fs" % (
            name, len(rows), " ".join("%8d" % kinds[k] for k, _ in COLUMNS),
            "-" if name == AS_RECORDED else regress, "-" if name == AS_RECORDED else fixed,
            max((o.wall_s for o in rows), default=0.0))


def listed(outcomes, kinds, title):
    yield title
    for o in outcomes:
        if o.judgement.kind in kinds:
            yield "  %-16s %-44s %s at t=%s phase=%s: %s" % (
                o.run.perturbation, o.run.trace[:44], o.result.get("verdict"), o.result.get("t"),
                o.result.get("phase"), str(o.result.get("reason") or "")[:150])


def main(argv=None):
    args = parse_args(argv)
    recorded = recorded_runs(args.paths)
    folder = args.keep or tempfile.mkdtemp(prefix="perturb-")
    os.makedirs(folder, exist_ok=True)
    try:
        variants, refused = variant_runs(recorded, args.names, args.seed, folder)
        outcomes = replay_runs(recorded + variants, args.cmd, args.cwd, args.jobs)
    finally:
        if not args.keep:
            shutil.rmtree(folder, ignore_errors=True)
    if not args.quiet:
        print("# runs that did not pass: trace, perturbation, kind, judgement, phase | reason")
        print("\n".join(failed_rows(outcomes)) or "  (none)")
        print()
    print("# perturbation x outcome (FALSE: healthy start called stalled or failed; prem.: fault called before "
          "its onset; miss@end: not called, the trace ended inside the budget; regress: passed as recorded, "
          "not perturbed; fixed: the reverse)")
    print("\n".join(table(outcomes, args.names)))
    for trace, name, problem in refused:
        print("variant refused by the trace format check: %s %s: %s" % (trace, name, problem))
    print("\n".join(listed(outcomes, (judge.FALSE_RESTART, judge.PREMATURE),
                           "\n# every false restart (healthy start called stalled or failed) and premature verdict")))
    print("\n".join(listed(outcomes, (judge.MISSED, judge.MISSED_AT_END), "\n# every missed fault")))
    walls = sorted(outcomes, key=lambda o: o.wall_s, reverse=True)
    if walls:
        print("\n# replay wall time: %d runs, jobs=%d; max %.2f s (%s / %s, %d observations)" % (
            len(walls), args.jobs, walls[0].wall_s, walls[0].run.trace, walls[0].run.perturbation,
            len(walls[0].run.observations)))
    passed = sum(o.judgement.ok for o in outcomes)
    print("perturb: %d runs passed, %d did not, %d variants refused" % (passed, len(outcomes) - passed, len(refused)))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump([{"trace": o.run.trace, "perturbation": o.run.perturbation, "kind": o.judgement.kind,
                        "why": o.judgement.why, "latency_s": o.judgement.latency_s, "wall_s": o.wall_s,
                        "verdict": o.result.get("verdict"), "t": o.result.get("t"), "phase": o.result.get("phase"),
                        "reason": str(o.result.get("reason") or "")[:300]} for o in outcomes], fh, indent=1)
    return 0 if passed == len(outcomes) and not refused else 1


if __name__ == "__main__":
    sys.exit(main())
