#!/usr/bin/env python3
"""ETA benchmark (`make bench`): the error of the time-to-ready estimate on the corpus.

For every healthy start of the corpus (tests/traces, its corpus/ and real/) that the
detector calls ready, the history is one earlier start of the same host: the corpus
holds one start of each kind, so the earlier start is this start's own record
(start_history.record_from_trace: phase durations and bytes read) with each phase's
duration multiplied by a factor drawn at random (seeded by the trace's name) from
[1/SPREAD, SPREAD], the run-to-run variation of one host. The start is then replayed
through the detector and the EtaEstimator, and at half of the start (the last poll at or
before ready_after_s / 2) the estimated remaining time is compared with the true one:
error = |estimated - true| / true. Targets: median <= 20 %, worst <= 35 % at a spread
of 1.25 (one phase 25 % faster or slower than the last time). A wider spread and no
history at all are printed for reference. Then the metrics file: render + atomic write
per poll (target <= 50 ms), the best of three passes over the corpus's observations.
Exit status 1 when a target is missed.
"""
import glob
import os
import random
import statistics
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path[:0] = [ROOT, os.path.join(ROOT, "collections")]

from ansible_collections.sglang_ops.serving.plugins.module_utils.detector import Detector  # noqa: E402
from ansible_collections.sglang_ops.serving.plugins.module_utils.detector_settings import DetectorSettings  # noqa: E402
from ansible_collections.sglang_ops.serving.plugins.module_utils.eta import EtaEstimator  # noqa: E402
from ansible_collections.sglang_ops.serving.plugins.module_utils.start_history import record_from_trace  # noqa: E402
from ansible_collections.sglang_ops.serving.plugins.module_utils.trace_format import read_trace  # noqa: E402

TRACE_DIRS = tuple(os.path.join(ROOT, "tests", "traces", *sub) for sub in ((), ("corpus",), ("real",)))
TARGET_SPREAD = 1.25
TARGET_MEDIAN, TARGET_WORST = 0.20, 0.35
TARGET_WRITE_MS = 50.0


def earlier_start(record, spread, seed):
    """The record with each phase's duration scaled by a factor in [1/spread, spread]."""
    rng = random.Random(seed)
    phases, began = [], 0.0
    for p in record["phases"]:
        factor = spread ** rng.uniform(-1.0, 1.0)
        phases.append(dict(p, started_s=began, duration_s=p["duration_s"] * factor))
        began += phases[-1]["duration_s"]
    return dict(record, phases=phases, ready_after_s=began)


def estimates(header, observations, history):
    """[(t, Estimate)] of a replay with the estimator fed each poll."""
    det = Detector(DetectorSettings())
    est = EtaEstimator(history)
    out = []
    for obs in observations:
        a = det.observe(obs)
        out.append((a.t, est.update(a)))
        if a.final:
            break
    return out


def error_at_half(header, observations, record, history):
    """(t, estimated remaining, true remaining, basis) at the last poll at or before half
    of the start; with no history, of the current phase only."""
    ready_s, at = record["ready_after_s"], None
    for t, e in estimates(header, observations, history):
        if t <= ready_s / 2.0:
            at = (t, e)
    t, e = at
    if history:
        return t, e.remaining_s, ready_s - t, e.phase_basis
    phase_end = next(p["started_s"] + p["duration_s"] for p in record["phases"]
                     if p["started_s"] <= t <= p["started_s"] + p["duration_s"])
    return t, e.phase_remaining_s, phase_end - t, e.phase_basis


def healthy_starts():
    for d in TRACE_DIRS:
        for path in sorted(glob.glob(os.path.join(d, "*.jsonl"))):
            header, observations = read_trace(path)
            record = record_from_trace(header, observations, source=path)
            if (header.get("expect") or {}).get("outcome") == "ready" and record["outcome"] == "ready":
                yield header, observations, record


def eta_table(starts, spread):
    errors = []
    title = "start (no history)" if spread is None else "start (spread %.2f)" % spread
    print("%-46s %8s %8s %9s %9s %7s %s" % (title, "ready", "at", "estimate", "true", "error", "basis"))
    for header, observations, record in starts:
        history = [earlier_start(record, spread, header["name"])] if spread else []
        t, estimate, true, basis = error_at_half(header, observations, record, history)
        err = None if estimate is None else abs(estimate - true) / true
        if err is not None:
            errors.append(err)
        print("%-46s %7.0fs %7.0fs %8s %8.0fs %7s %s" % (
            header["name"][:46], record["ready_after_s"], t, "-" if estimate is None else "%.0fs" % estimate, true,
            "-" if err is None else "%.0f%%" % (100 * err), basis or "-"))
    return errors


def metrics_write_ms(starts, rounds=3):
    """The slowest per-poll render + atomic write over the corpus, best of `rounds`, and the median."""
    from ansible_collections.sglang_ops.serving.plugins.module_utils.start_metrics import StartMetrics, write_textfile
    best = None
    with tempfile.TemporaryDirectory() as folder:
        for _ in range(rounds):
            times = []
            for header, observations, record in starts:
                det = Detector(DetectorSettings())
                est = EtaEstimator([record])
                metrics = StartMetrics(header.get("unit") or "sglang-k26-ddtree")
                for obs in observations:
                    a = det.observe(obs)
                    e = est.update(a)
                    began = time.perf_counter()
                    metrics.observe(a, e)
                    write_textfile(folder, metrics.file_name, metrics.render())
                    times.append((time.perf_counter() - began) * 1000.0)
                    if a.final:
                        break
            times.sort()
            if best is None or times[-1] < best[0]:
                best = (times[-1], statistics.median(times), len(times))
    return best


def main():
    starts = list(healthy_starts())
    ok = True
    for spread in (TARGET_SPREAD, 1.5, None):
        errors = eta_table(starts, spread)
        median, worst = statistics.median(errors), max(errors)
        label = "no history (the current phase's own remaining time)" if spread is None else "one earlier start, spread %.2f" % spread
        print("ETA error at half of the start, %s: median %.1f%%, worst %.1f%% over %d of %d starts%s\n" % (
            label, 100 * median, 100 * worst, len(errors), len(starts),
            " (targets: median <= %.0f%%, worst <= %.0f%%)" % (100 * TARGET_MEDIAN, 100 * TARGET_WORST)
            if spread == TARGET_SPREAD else ""))
        if spread == TARGET_SPREAD:
            ok = ok and median <= TARGET_MEDIAN and worst <= TARGET_WORST
    slowest, median_ms, polls = metrics_write_ms(starts)
    print("metrics file per poll (render + atomic write): median %.2f ms, slowest %.2f ms over %d polls "
          "(best of 3 passes; target <= %.0f ms)" % (median_ms, slowest, polls, TARGET_WRITE_MS))
    ok = ok and slowest <= TARGET_WRITE_MS
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
