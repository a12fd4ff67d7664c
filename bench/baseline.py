#!/usr/bin/env python3
"""Replay one reference watcher (bench/scoring/baselines.py) on a trace.

usage: bench/baseline.py deadline|silence|activity SECONDS TRACE
Prints the verdict JSON of the replay contract, so bench/score.py can score it:
  bench/score.py --cmd 'python3 bench/baseline.py deadline 1800 {trace}' tests/traces/corpus
"""
import argparse
import json
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "collections")]

from bench.scoring.baselines import KINDS, watch  # noqa: E402
from bench.scoring.traces import read_trace  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kind", choices=KINDS)
    parser.add_argument("limit_s", type=float, metavar="SECONDS")
    parser.add_argument("trace")
    args = parser.parse_args(argv)
    _, observations = read_trace(args.trace)
    print(json.dumps(watch(args.kind, args.limit_s, observations)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
