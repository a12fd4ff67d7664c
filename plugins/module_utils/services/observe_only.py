"""Rule 4 of the detector where a start begins: "never keep a server down by our own
verdict" (docs/detector.md). When the unit's last starts ended with the same verdict in the
same phase, a restart did not help: this start runs watched but unkilled, up to a ceiling
learned from the host's usual time to ready (module_utils/domain/observe_only_decision.py decides), and
on-call is told why in the same words everywhere (STATUS=, the progress line, the start
record, the trace, the restart's summary).

    oo = on_host(starts_dir, usual_ready_s, min_ceiling_s=1800.0, ceiling_factor=3.0, exclude=this_start_dir)
    oo = from_starts(starts, usual_ready_s, ...)   # starts: earlier start records, newest first
    words(oo)   -> "observe-only: <why>; ceiling 45m00s"
    to_dict(oo) -> what a start record or run.json keeps

Standard library only: this runs on the host too.
"""
import dataclasses
import os

from ansible_collections.sglang_ops.serving.plugins.module_utils.records import start_records
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.durations import fmt_duration

RECENT_STARTS = 5          # earlier starts read; rule 4 needs the last few only


def from_starts(starts, usual_ready_s=None, min_ceiling_s=None, ceiling_factor=None):
    """The ObserveOnly for the next start of a unit whose earlier starts (newest first,
    dicts with verdict, reason_code, phase) are `starts`, or None. A bound left None is
    observe_only_decision's default (30 min, 3x the usual time)."""
    # Imported here: the watch loop imports words() from this module, and only a start's
    # beginning needs the decision.
    from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.observe_only_decision import observe_only_from_starts
    bounds = {k: float(v) for k, v in (("min_ceiling_s", min_ceiling_s), ("ceiling_factor", ceiling_factor))
              if v is not None}
    return observe_only_from_starts(list(starts), usual_ready_s=usual_ready_s, **bounds)


def on_host(starts_dir, usual_ready_s=None, min_ceiling_s=None, ceiling_factor=None, exclude=None):
    """The ObserveOnly for a start the unit's supervisor begins, from the start folders it
    keeps (start_records.py); `exclude`: the folder of the start being begun."""
    skip = os.path.abspath(exclude) if exclude else None
    starts = [s for s in start_records.recent_starts(starts_dir, RECENT_STARTS + 1)
              if skip is None or os.path.abspath(s.get("dir") or "") != skip]
    return from_starts(starts[:RECENT_STARTS], usual_ready_s, min_ceiling_s, ceiling_factor)


def words(observe_only):
    """What on-call reads wherever the start shows: 'observe-only: <why>; ceiling <duration>'."""
    return "observe-only: %s; ceiling %s" % (observe_only.why, fmt_duration(observe_only.ceiling_s))


def to_dict(observe_only):
    """The ObserveOnly as a record keeps it (None stays None)."""
    if observe_only is None:
        return None
    out = dataclasses.asdict(observe_only)
    out["words"] = words(observe_only)
    return out
