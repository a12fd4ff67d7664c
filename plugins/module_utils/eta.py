"""How much longer a start will take: the current phase at its own measured rate, plus
the usual duration of the phases still ahead (start_history records of the same host
and model).

    est = EtaEstimator(history)                # history: start records, may be empty
    e = est.update(assessment)                 # once per poll; returns an Estimate
    e.remaining_s, e.usual_total_s, e.text()   # "ETA 4m10s (usual 10m40s)"

The current phase's remaining time comes from, in this order: the shard counter (shards
left at the measured shards per second), the bytes the same phase read in earlier starts
(bytes left at the measured read rate), or the phase's usual duration less the time
already spent in it. With no history only the first two can say anything, and only about
the current phase; the estimate says so. Standard library only: this runs on the host.
"""
import statistics
from dataclasses import dataclass

from ansible_collections.sglang_ops.serving.plugins.module_utils.durations import fmt_duration
from ansible_collections.sglang_ops.serving.plugins.module_utils.phases import PHASES

SLOWER_THAN_USUAL = 1.5          # a phase that took this many times its usual duration
MIN_RATE_S = 20.0                # a rate measured over less time than this is noise
MIN_PHASE_BYTES = 256 * 2**20    # an earlier start that read less in a phase: no byte rate
MIN_READ_BPS = 1e6               # reading slower than this: the page cache serves the load
_ORDER = {p: i for i, p in enumerate(PHASES)}


@dataclass
class Estimate:
    t: float                      # observation time
    phase: str
    remaining_s: float = None     # to ready; None when unknown
    phase_remaining_s: float = None
    phase_basis: str = None       # shards | bytes | usual | None
    usual_total_s: float = None   # the usual time to ready (median of the history)
    history_starts: int = 0

    def to_dict(self):
        return {"t": self.t, "phase": self.phase, "remaining_s": _round(self.remaining_s),
                "phase_remaining_s": _round(self.phase_remaining_s), "phase_basis": self.phase_basis,
                "usual_total_s": _round(self.usual_total_s), "history_starts": self.history_starts}

    def text(self):
        """The progress line's ETA part."""
        if self.phase == "ready":
            return ""
        if not self.history_starts:
            if self.phase_remaining_s is None:
                return "ETA unknown (no earlier start)"
            return "%s ends in ~%s (no earlier start for the rest)" % (self.phase, fmt_duration(self.phase_remaining_s))
        if self.remaining_s is None:
            return "ETA unknown (usual %s)" % fmt_duration(self.usual_total_s)
        return "ETA %s (usual %s)" % (fmt_duration(self.remaining_s), fmt_duration(self.usual_total_s))


def _round(value):
    return None if value is None else round(value, 1)


def _median(values):
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def usual_phase_s(history):
    """{phase: median duration} over the history's starts."""
    by_phase = {}
    for rec in history:
        for p in rec.get("phases") or ():
            by_phase.setdefault(p["phase"], []).append(p["duration_s"])
    return {phase: statistics.median(v) for phase, v in by_phase.items()}


def usual_phase_bytes(history):
    by_phase = {}
    for rec in history:
        for p in rec.get("phases") or ():
            if p.get("read_bytes") is not None:
                by_phase.setdefault(p["phase"], []).append(p["read_bytes"])
    return {phase: statistics.median(v) for phase, v in by_phase.items()}


def _ahead_s(record, phase):
    """Seconds the record spent in phases after `phase` (in its own order when it went
    through `phase`, else by the phase model's order)."""
    names = [p["phase"] for p in record.get("phases") or ()]
    if phase in names:
        rest = record["phases"][names.index(phase) + 1:]
    else:
        rest = [p for p in record.get("phases") or () if _ORDER.get(p["phase"], -1) > _ORDER.get(phase, -1)]
    return sum(p["duration_s"] for p in rest)


def slower_than_usual(phases, history, factor=SLOWER_THAN_USUAL):
    """[(phase, took_s, usual_s)] for each phase of a finished start that took more than
    factor times its usual duration."""
    usual = usual_phase_s(history)
    out = []
    for p in phases:
        u = usual.get(p["phase"])
        if u and p["duration_s"] > factor * u:
            out.append((p["phase"], p["duration_s"], u))
    return out


class EtaEstimator:
    def __init__(self, history=()):
        self.use_history(history)
        self._phase = None
        self._since_t = 0.0
        self._read_at_entry = None
        self._shards_at_entry = None

    def use_history(self, history):
        """Estimate from now on with these start records (the phase being timed is kept)."""
        self.history = list(history)
        self.usual_s = usual_phase_s(self.history)
        self.usual_bytes = usual_phase_bytes(self.history)
        self.usual_total_s = _median([r.get("ready_after_s") for r in self.history])

    def update(self, assessment):
        """The Estimate after one poll's Assessment (or its to_dict())."""
        a = assessment if isinstance(assessment, dict) else assessment.to_dict()
        t, phase = float(a.get("t") or 0.0), a.get("phase") or "starting"
        progress = a.get("progress") or {}
        read = progress.get("read_bytes")
        if phase != self._phase:
            self._phase, self._since_t = phase, (0.0 if self._phase is None else t)
            self._read_at_entry = read
            self._shards_at_entry = progress.get("shards_done")
        est = Estimate(t, phase, usual_total_s=self.usual_total_s, history_starts=len(self.history))
        if phase == "ready" or a.get("verdict") == "ready":
            est.remaining_s = est.phase_remaining_s = 0.0
            return est
        in_phase_s = t - self._since_t
        est.phase_remaining_s, est.phase_basis = self._phase_remaining(phase, in_phase_s, progress, read)
        if not self.history or est.phase_remaining_s is None:
            return est
        ahead = _median([_ahead_s(r, phase) for r in self.history])
        est.remaining_s = est.phase_remaining_s + (ahead or 0.0)
        return est

    def _phase_remaining(self, phase, in_phase_s, progress, read):
        done, total = progress.get("shards_done"), progress.get("shards_total")
        if phase == "weight_load" and total and done is not None and in_phase_s >= MIN_RATE_S:
            moved = done - (self._shards_at_entry or 0)
            if moved > 0 and done < total:
                return (total - done) * in_phase_s / moved, "shards"
        want = self.usual_bytes.get(phase)
        if want and want >= MIN_PHASE_BYTES and read is not None and self._read_at_entry is not None \
                and in_phase_s >= MIN_RATE_S:
            got = read - self._read_at_entry
            rate = got / in_phase_s
            if rate >= MIN_READ_BPS:
                return max(0.0, (want - got) / rate), "bytes"
        usual = self.usual_s.get(phase)
        if usual is not None:
            return max(0.0, usual - in_phase_s), "usual"
        return None, None
