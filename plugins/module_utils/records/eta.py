"""How much longer a start will take: each phase predicted from this host's history and
from what this start will read and from where, the current phase from its own progress.

    est = EtaEstimator(history, LoadConditions(model_bytes, resident_bytes))
    e = est.update(assessment)                 # once per poll; returns an Estimate
    e.remaining_s, e.usual_total_s, e.text()   # "ETA 4m10s (3m20s-5m30s, usual 10m40s)"

The conditions a start was estimated with are what its trace header records
(`load_conditions`, LoadConditions.to_dict()), with a line's own `load_conditions` where
they changed during the start (the residency read once SGLang names its model, a fallback to
disk): replay_conditions() gives them back per observation, so `sglang-ops replay --eta`
estimates each poll as the live start did.

The remaining time is the current phase's remaining time plus the predicted duration of
the phases still ahead (the median, over the history, of what followed this phase, with
the weight load predicted for this start's conditions). The rules, in order:

- weight_load: the shard counter when it moves (shards left at the measured shards per
  second); else, when the conditions say it reads from storage (LoadConditions: the model
  less what the page cache holds; nothing with a weight cache attached), those bytes at
  the measured read rate, or at the history's read rate until this start has read for
  MIN_RATE_S; else the GPU memory it has filled against what an earlier load filled
  (loaded_mib), the rest at the pace of the share done, whatever the page cache holds;
  else the bytes earlier starts read in this phase at the measured rate; with nothing to
  read, the load from memory: as long as an earlier start that read nothing, else the
  model at PAGE_CACHE_LOAD_BPS. A measure of this start's own is blended in from the
  history's prediction as it ages (eta_live.live_weight), and a load it measures is never
  overdue.
- every other phase: its usual duration (the median over the history) less the time
  already spent in it (a phase no earlier start went through has no time of its own in
  the history: overdue from its first poll, and past the load the history's time after
  its load carries the work SGLang named otherwise then); a phase that read from storage
  in earlier starts (MIN_PHASE_BYTES)
  takes the mean of that and its bytes left at its measured read rate until it is
  overdue (such reads come in bursts, so neither alone is trusted).
- a phase past its predicted duration is overdue: the estimate becomes a range, from the
  phases ahead alone (the phase may end now) to twice the guess of what is left of it
  (as long again as it has overrun, at least OVERDUE_FLOOR of its usual duration).
- a phase without a progress measure (its usual duration) whose earlier starts disagree
  (the longest more than DISAGREE_FACTOR times the shortest, and DISAGREE_MIN_S apart) is a
  range: what is left of it from the shortest earlier duration to the longest, plus the
  phases ahead; the point (remaining_s) stays the median's.
- past the weight load, the history's time after its load less this start's time since is
  a second guess (work moves between phases from one start to the next): the point is the
  mean of the two, the range reaches both. While the phase is overdue the two are weighed
  by where the history's work lay: the share of it in the phases ahead for the second
  guess (an overrun is work moved in from there), the share in this phase for "as long
  again" (an overrun is more of this phase's own work).
- every other estimate is a range too (range_reason "spread"): the measured part within
  eta_live.LIVE_SPREAD, the part from history alone within GUESS_LOW..GUESS_HIGH of it.
- never past twice the host's longest recorded start (LONGEST_FACTOR, except a phase that
  counts its own share done, PACED_BASES): an estimate that
  would end later ends there; a start already past it has no estimate, only how far it
  is over. Without history no estimate exceeds MAX_ESTIMATE_S (the watch's start
  timeout), so a division by a crawling rate never prints hours.

Standard library only: this runs on the host.
"""
import statistics
from dataclasses import dataclass

from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.durations import fmt_duration
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.phases import PHASES
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.weight_cache import RESTART_KINDS
from ansible_collections.sglang_ops.serving.plugins.module_utils.records import eta_live
from ansible_collections.sglang_ops.serving.plugins.module_utils.records.eta_live import MIN_RATE_S

SLOWER_THAN_USUAL = 1.5          # a phase that took this many times its usual duration
MIN_PHASE_BYTES = 256 * 2**20    # reading less than this in a phase: it is not bound by storage
PAGE_CACHE_LOAD_BPS = 10e9       # weights from memory to the GPUs (548 GB in ~40-55 s on 8 H200s)
# An engine attached to the weight cache daemon maps the weights already on its GPUs (CUDA
# IPC handles): seconds, whatever the model's size (IpcModelLoader's "Loaded model via IPC").
WEIGHT_CACHE_ATTACH_S = 15.0
# A phase without a progress measure whose earlier durations differ this much (the longest
# over the shortest, and by at least DISAGREE_MIN_S) gets a range, not a point.
DISAGREE_FACTOR = 1.5
DISAGREE_MIN_S = 10.0
OVERDUE_FLOOR = 0.5              # an overdue phase has at least this share of its usual duration left
LONGEST_FACTOR = 2.0             # no estimate ends later than this many times the longest recorded start
MAX_ESTIMATE_S = 7200.0          # without history: the watch's start timeout (start_watch.START_TIMEOUT_S)
WEIGHT_LOAD = "weight_load"
# Bases of a phase's remaining time measured on this start (the rest come from history);
# of those, the ones that count the load done rather than divide by a read rate are not
# held to the history's longest start (LONGEST_FACTOR): this start shows its own pace.
LIVE_BASES = ("shards", "gpu_memory", "bytes", "bytes+usual")
PACED_BASES = ("shards", "gpu_memory")
_ORDER = {p: i for i, p in enumerate(PHASES)}


# The compile caches (JIT, kernels) a start found: every folder filled, none, or some
COMPILE_CACHE_STATES = ("warm", "cold", "partial")


@dataclass(frozen=True)
class LoadConditions:
    """What this start will read and from where, known when it begins.

    model_bytes: size of the model's weight files; resident_bytes: of those, in the page
    cache when the start began (prewarm_reader.model_residency); weight_cache: the
    weights come from an attached weight cache (`--weight-cache-mode client`), so
    almost nothing is read from storage; restart_kind: warm | cold | cold_fallback as the
    restart decided it (None: no weight cache daemon); compile_caches: warm | cold |
    partial, the JIT and kernel caches the server found (None: not read). None: not known.
    The trace header records them (`load_conditions`), so a replay estimates as the live
    start did."""
    model_bytes: int = None
    resident_bytes: int = None
    weight_cache: bool = False
    restart_kind: str = None
    compile_caches: str = None

    def storage_bytes(self):
        """Bytes the weight load will read from storage, or None when unknown."""
        if self.weight_cache:
            return 0
        if self.model_bytes is None or self.resident_bytes is None:
            return None
        return max(0, self.model_bytes - self.resident_bytes)

    def to_dict(self):
        return {"model_bytes": self.model_bytes, "resident_bytes": self.resident_bytes,
                "weight_cache": self.weight_cache, "restart_kind": self.restart_kind,
                "compile_caches": self.compile_caches}

    @classmethod
    def from_dict(cls, d):
        """The conditions a trace recorded (to_dict()); ValueError naming a bad field."""
        if not isinstance(d, dict):
            raise ValueError("load_conditions must be a JSON object")
        unknown = sorted(set(d) - set(cls().to_dict()))
        if unknown:
            raise ValueError("load_conditions: unknown field(s) %s" % ", ".join(unknown))
        for key in ("model_bytes", "resident_bytes"):
            value = d.get(key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                raise ValueError("load_conditions.%s must be a byte count (an integer >= 0) or null" % key)
        if not isinstance(d.get("weight_cache", False), bool):
            raise ValueError("load_conditions.weight_cache must be true or false")
        for key, allowed in (("restart_kind", RESTART_KINDS), ("compile_caches", COMPILE_CACHE_STATES)):
            if d.get(key) is not None and d[key] not in allowed:
                raise ValueError("load_conditions.%s must be one of %s or null" % (key, ", ".join(allowed)))
        return cls(**d)

    def words(self):
        """The conditions in one line (replay --eta prints it)."""
        if self.weight_cache:
            load = "weights attached from the weight cache"
        elif self.model_bytes is None or self.resident_bytes is None:
            load = "page-cache residency not read"
        else:
            size = "%.1f GB" % (self.model_bytes / 1e9) if self.model_bytes >= 1e8 else "%d bytes" % self.model_bytes
            load = "%.0f%% of %s in the page cache" % (
                100.0 * self.resident_bytes / self.model_bytes if self.model_bytes else 100.0, size)
        kind = "%s restart" % self.restart_kind if self.restart_kind else "restart kind not recorded"
        return "%s; %s; compile caches %s" % (load, kind, self.compile_caches or "not read")


@dataclass
class Estimate:
    t: float                      # observation time
    phase: str
    remaining_s: float = None     # to ready; None when unknown (the middle of the range when overdue)
    phase_remaining_s: float = None
    phase_basis: str = None       # shards | bytes | read_rate_history | page_cache | weight_cache | usual | not_in_history | overdue | bytes+usual | None
    usual_total_s: float = None   # the usual time to ready (median of the history)
    history_starts: int = 0
    remaining_low_s: float = None   # a range instead of a point: the phase is overdue, or its history disagrees
    remaining_high_s: float = None
    range_reason: str = None      # overdue | history_disagrees | None (a point)
    phase_range_s: tuple = None   # (shortest, longest) earlier duration of the phase, when they disagree
    overdue_s: float = None       # how far the current phase is past its predicted duration
    usual_phase_s: float = None   # the current phase's predicted duration
    longest_s: float = None       # the longest recorded start of the history
    bound_s: float = None         # LONGEST_FACTOR x longest_s: no estimate ends later
    past_bound_s: float = None    # how far the start already runs past bound_s (no estimate then)

    def to_dict(self):
        return {"t": self.t, "phase": self.phase, "remaining_s": _round(self.remaining_s),
                "phase_remaining_s": _round(self.phase_remaining_s), "phase_basis": self.phase_basis,
                "usual_total_s": _round(self.usual_total_s), "history_starts": self.history_starts,
                "remaining_low_s": _round(self.remaining_low_s), "remaining_high_s": _round(self.remaining_high_s),
                "range_reason": self.range_reason,
                "overdue_s": _round(self.overdue_s), "bound_s": _round(self.bound_s),
                "past_bound_s": _round(self.past_bound_s)}

    def text(self):
        """The progress line's ETA part."""
        if self.phase == "ready":
            return ""
        if not self.history_starts:
            if self.phase_remaining_s is None:
                return "ETA unknown (no earlier start)"
            return "%s ends in ~%s (no earlier start for the rest)" % (self.phase, fmt_duration(self.phase_remaining_s))
        usual = fmt_duration(self.usual_total_s)
        if self.past_bound_s is not None:
            return "ETA unknown (overdue by %s: %s is twice the longest earlier start)" % (
                fmt_duration(self.past_bound_s), fmt_duration(self.bound_s))
        if self.remaining_s is None and self.remaining_low_s is not None:
            return "ETA over %s (longer than twice the longest earlier start, %s)" % (
                fmt_duration(self.remaining_low_s), fmt_duration(self.longest_s))
        if self.remaining_s is None:
            return "ETA unknown (usual %s)" % usual
        if self.overdue_s is not None and not self.usual_phase_s:
            return "ETA %s-%s (%s: %s so far, no time in earlier starts; start usual %s)" % (
                fmt_duration(self.remaining_low_s), fmt_duration(self.remaining_high_s), self.phase,
                fmt_duration(self.overdue_s), usual)
        if self.overdue_s is not None:
            return "ETA %s-%s (%s overdue by %s, usual %s; start usual %s)" % (
                fmt_duration(self.remaining_low_s), fmt_duration(self.remaining_high_s), self.phase,
                fmt_duration(self.overdue_s), fmt_duration(self.usual_phase_s), usual)
        if self.range_reason == "spread":
            return "ETA %s (%s-%s, usual %s)" % (
                fmt_duration(self.remaining_s), fmt_duration(self.remaining_low_s), fmt_duration(self.remaining_high_s), usual)
        if self.range_reason == "history_disagrees":
            return "ETA %s-%s (%s took %s-%s in earlier starts; usual %s)" % (
                fmt_duration(self.remaining_low_s), fmt_duration(self.remaining_high_s), self.phase,
                fmt_duration(self.phase_range_s[0]), fmt_duration(self.phase_range_s[1]), usual)
        return "ETA %s (usual %s)" % (fmt_duration(self.remaining_s), usual)


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


def phase_times(history, phase):
    """The durations of `phase` in the history's starts (a phase entered twice: its sum)."""
    out = []
    for rec in history:
        spans = [p["duration_s"] for p in rec.get("phases") or () if p["phase"] == phase]
        if spans:
            out.append(sum(spans))
    return out


def disagreeing_range(durations):
    """(shortest, longest) of a phase's earlier durations when they disagree (DISAGREE_FACTOR,
    DISAGREE_MIN_S), else None."""
    if len(durations) < 2:
        return None
    low, high = min(durations), max(durations)
    if high - low < DISAGREE_MIN_S or high <= DISAGREE_FACTOR * low:
        return None
    return low, high


def loaded_mib(record):
    """GPU memory (MiB, all GPUs) the record's weight load filled, or None."""
    phases = record.get("phases") or ()
    for i, p in enumerate(phases):
        if p["phase"] == WEIGHT_LOAD and p.get("gpu_mem_mib") is not None:
            before = phases[i - 1].get("gpu_mem_mib") if i else 0
            return p["gpu_mem_mib"] - before if before is not None else None
    return None


def after_load_s(record):
    """Seconds from the end of the record's weight load to ready, or None."""
    ends = [p["started_s"] + p["duration_s"] for p in record.get("phases") or ()
            if p["phase"] == WEIGHT_LOAD and p.get("started_s") is not None]
    if not ends or record.get("ready_after_s") is None:
        return None
    return max(0.0, record["ready_after_s"] - ends[-1])


def usual_phase_bytes(history):
    by_phase = {}
    for rec in history:
        for p in rec.get("phases") or ():
            if p.get("read_bytes") is not None:
                by_phase.setdefault(p["phase"], []).append(p["read_bytes"])
    return {phase: statistics.median(v) for phase, v in by_phase.items()}


def _phases_after(record, phase):
    """The record's phases after `phase` (in its own order when it went through `phase`,
    else by the phase model's order)."""
    names = [p["phase"] for p in record.get("phases") or ()]
    if phase in names:
        return record["phases"][names.index(phase) + 1:]
    return [p for p in record.get("phases") or () if _ORDER.get(p["phase"], -1) > _ORDER.get(phase, -1)]


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


class WeightLoadModel:
    """The weight load of this start predicted from the history's weight loads: bytes to
    read from storage at the history's storage read rate, or, with nothing to read, as
    long as an earlier load from memory (or the model at PAGE_CACHE_LOAD_BPS)."""

    def __init__(self, history, conditions):
        self.conditions = conditions or LoadConditions()
        loads = [p for rec in history for p in rec.get("phases") or () if p["phase"] == WEIGHT_LOAD]
        from_storage = [p for p in loads if (p.get("read_bytes") or 0) >= MIN_PHASE_BYTES and p["duration_s"] > 0]
        self.storage_bps = _median([p["read_bytes"] / p["duration_s"] for p in from_storage])
        self.from_memory_s = _median([p["duration_s"] for p in loads
                                      if p.get("read_bytes") is not None and p["read_bytes"] < MIN_PHASE_BYTES])
        self.usual_s = _median([p["duration_s"] for p in loads])
        self.usual_read_bytes = _median([p.get("read_bytes") for p in loads])

    def storage_bytes(self):
        """What this load will read from storage: the conditions', else the history's."""
        known = self.conditions.storage_bytes()
        return known if known is not None else self.usual_read_bytes

    def reads_storage(self):
        want = self.storage_bytes()
        return want is not None and want >= MIN_PHASE_BYTES

    def predicted_s(self):
        """(seconds, basis) of the whole load, before its own progress says more."""
        if self.conditions.weight_cache:
            return WEIGHT_CACHE_ATTACH_S, "weight_cache"
        if self.conditions.storage_bytes() is None:
            return self.usual_s, "usual"
        if self.reads_storage():
            if self.storage_bps:
                return self.storage_bytes() / self.storage_bps, "read_rate_history"
            return None, None           # no earlier start read from storage: wait for the live rate
        if self.from_memory_s is not None:
            return self.from_memory_s, "page_cache"
        if self.conditions.model_bytes:
            return self.conditions.model_bytes / PAGE_CACHE_LOAD_BPS, "page_cache"
        return self.usual_s, "usual"


class EtaEstimator:
    def __init__(self, history=(), conditions=None):
        self.conditions = conditions or LoadConditions()
        self.use_history(history)
        self._phase = None
        self._since_t = 0.0
        self._read_at_entry = self._mem_at_entry = self._load_end_t = None
        self._shards_at_entry = self._shards_seen = None
        self._shard_step_t = 0.0

    def use_history(self, history):
        """Estimate from now on with these start records (the phase being timed is kept)."""
        self.history = list(history)
        self.usual_s = usual_phase_s(self.history)
        self.usual_bytes = usual_phase_bytes(self.history)
        self.usual_total_s = _median([r.get("ready_after_s") for r in self.history])
        self.longest_s = max([r["ready_after_s"] for r in self.history if r.get("ready_after_s")] or [0.0]) or None
        self.load = WeightLoadModel(self.history, self.conditions)
        self.loaded_mib = _median([loaded_mib(rec) for rec in self.history])
        self.after_load_s = _median([after_load_s(rec) for rec in self.history])

    def use_conditions(self, conditions):
        """What this start reads and from where (LoadConditions), once known."""
        self.conditions = conditions or LoadConditions()
        self.load = WeightLoadModel(self.history, self.conditions)

    def predicted_phase_s(self, phase):
        """(seconds, basis) a phase of this start should take, from the history."""
        if phase == WEIGHT_LOAD:
            return self.load.predicted_s()
        usual = self.usual_s.get(phase)
        return (usual, "usual") if usual is not None else (None, None)

    def ahead_s(self, phase):
        """The phases after `phase`: the median over the history of what followed it, the
        weight load taken at its prediction for this start."""
        load_s = self.load.predicted_s()[0]
        totals = []
        for rec in self.history:
            totals.append(sum(load_s if p["phase"] == WEIGHT_LOAD and load_s is not None else p["duration_s"]
                              for p in _phases_after(rec, phase)))
        return _median(totals)

    def update(self, assessment):
        """The Estimate after one poll's Assessment (or its to_dict())."""
        a = assessment if isinstance(assessment, dict) else assessment.to_dict()
        t, phase = float(a.get("t") or 0.0), a.get("phase") or "starting"
        progress = a.get("progress") or {}
        self._follow(t, phase, progress)
        est = Estimate(t, phase, usual_total_s=self.usual_total_s, history_starts=len(self.history),
                       longest_s=self.longest_s)
        if phase == "ready" or a.get("verdict") == "ready":
            est.remaining_s = est.phase_remaining_s = 0.0
            return est
        in_phase_s = t - self._since_t
        rate_s, rate_basis = self._phase_by_rate(phase, in_phase_s, progress, progress.get("read_bytes"))
        self._by_history(est, phase, in_phase_s)
        if rate_s is not None and (phase == WEIGHT_LOAD or est.overdue_s is None):
            self._with_rate(est, phase, in_phase_s, rate_s, rate_basis)
        if not self.history:
            if est.phase_remaining_s is not None and est.phase_remaining_s > MAX_ESTIMATE_S:
                est.phase_remaining_s, est.phase_basis = None, None
            return est
        if est.phase_remaining_s is None:
            return est
        ahead = self.ahead_s(phase) or 0.0
        est.remaining_s = est.phase_remaining_s + ahead
        self._range(est, phase, in_phase_s, ahead)
        self._after_load(est, t, ahead)
        self._cap(est)
        return est

    def _follow(self, t, phase, progress):
        """Where this start is: the phase, when it began, its counters then, the last shard step."""
        if phase != self._phase:
            if self._phase == WEIGHT_LOAD:
                self._load_end_t = t
            self._phase, self._since_t = phase, (0.0 if self._phase is None else t)
            self._read_at_entry = progress.get("read_bytes")
            self._mem_at_entry = progress.get("gpu_mem_used_mib")
            self._shards_at_entry = self._shards_seen = progress.get("shards_done")
            self._shard_step_t = t
        if progress.get("shards_done") is not None and progress["shards_done"] != self._shards_seen:
            self._shards_seen, self._shard_step_t = progress["shards_done"], t

    def _by_history(self, est, phase, in_phase_s):
        """The phase's remaining time from its predicted duration; overdue past it."""
        predicted, basis = self.predicted_phase_s(phase)
        if predicted is None and self.history and phase != WEIGHT_LOAD:
            # a phase no earlier start went through took no time in them: what it does now is
            # more than they did here (as long again as it has run), or work they did under
            # another name, which the history's time after its load carries (_after_load).
            # Not the history's total from here: that counts a late peer's wait or a slow load
            # this start has already left behind.
            predicted, basis = 0.0, "not_in_history"
        est.usual_phase_s = predicted
        if predicted is None:
            return
        est.phase_basis = basis
        est.phase_remaining_s = max(0.0, predicted - in_phase_s)
        if in_phase_s > predicted:
            est.overdue_s = in_phase_s - predicted
            est.phase_basis = "overdue"
            est.phase_remaining_s = max(est.overdue_s, OVERDUE_FLOOR * predicted)

    def _with_rate(self, est, phase, in_phase_s, rate_s, rate_basis):
        """The phase's own progress blended in: the weight load's from the history's prediction
        towards its measure as the measure ages (eta_live.live_weight); another phase's reads
        come in bursts, so half its own progress, half its usual duration."""
        if phase == WEIGHT_LOAD:
            # a load past its prediction is no evidence against its own measure: not overdue
            predicted = est.phase_remaining_s if est.overdue_s is None else None
            est.phase_remaining_s = eta_live.blend(predicted, rate_s, eta_live.live_weight(in_phase_s))
            est.phase_basis, est.overdue_s = rate_basis, None
        elif est.phase_remaining_s is not None:
            est.phase_remaining_s = (est.phase_remaining_s + rate_s) / 2.0
            est.phase_basis = "bytes+" + est.phase_basis
        else:
            est.phase_remaining_s, est.phase_basis = rate_s, rate_basis

    def _range(self, est, phase, in_phase_s, ahead):
        """How sure the estimate is: overdue (the phase may end now, or run as long again),
        history that disagrees on a silent phase, else the measured part and the part from
        history each within its spread (eta_live.spread)."""
        if est.overdue_s is not None:
            est.remaining_low_s, est.remaining_high_s = ahead, ahead + 2 * est.phase_remaining_s
            est.range_reason = "overdue"
            return
        if est.phase_basis == "usual":
            # no progress measure: when earlier starts disagree on this phase, what is left of it
            # runs from the shortest of them to the longest (the point stays the median's)
            spread = disagreeing_range(phase_times(self.history, phase))
            if spread is not None:
                est.phase_range_s, est.range_reason = spread, "history_disagrees"
                est.remaining_low_s = ahead + max(0.0, spread[0] - in_phase_s)
                est.remaining_high_s = ahead + max(0.0, spread[1] - in_phase_s)
                return
        measured = est.phase_remaining_s if est.phase_basis in LIVE_BASES else 0.0
        est.remaining_low_s, est.remaining_high_s = eta_live.spread(measured, est.remaining_s - measured)
        est.range_reason = "spread"

    def _after_load(self, est, t, ahead):
        """Past the weight load, the history's time from there to ready less this start's
        time since is a second guess: SGLang moves work between its phases from one start
        to the next (a tuning pass in the KV cache setup once, in the graph capture the next
        time), which the phase-by-phase sum misses. The point is the mean of the two; the
        range reaches both."""
        if self._load_end_t is None or self.after_load_s is None or est.phase_basis in LIVE_BASES:
            return
        left = self.after_load_s - (t - self._load_end_t)
        if left <= 0:      # this start is already past the history's whole time after its load
            return
        est.remaining_low_s = min(est.remaining_low_s, left)
        est.remaining_high_s = max(est.remaining_high_s, left)
        if est.overdue_s is None:
            est.remaining_s = (est.remaining_s + left) / 2.0
            return
        # an overdue phase is more of its own work ("as long again") or work moved in from the
        # phases ahead (the history's time after its load): each as likely as the history's
        # work lay there, so a history whose long phase is still ahead says the second
        moved = ahead / (ahead + est.usual_phase_s) if ahead + est.usual_phase_s > 0 else 0.0
        est.remaining_s = moved * left + (1.0 - moved) * est.remaining_s

    def _cap(self, est):
        """No estimate ends past LONGEST_FACTOR x the longest recorded start: one that
        would is no number but a lower bound ("over"), and past the bound, overdue."""
        if not self.longest_s or est.phase_basis in PACED_BASES:
            return
        est.bound_s = LONGEST_FACTOR * self.longest_s
        if est.t + est.remaining_s <= est.bound_s:
            if est.remaining_high_s is not None:
                est.remaining_high_s = min(est.remaining_high_s, est.bound_s - est.t)
            return
        est.remaining_s = est.remaining_high_s = est.range_reason = est.phase_range_s = None
        if est.t >= est.bound_s:
            est.remaining_low_s, est.past_bound_s = None, est.t - est.bound_s
        else:
            est.remaining_low_s = est.bound_s - est.t

    def _by_shards(self, progress, in_phase_s):
        """Seconds left by the shard counter: the time per shard up to the last shard
        done, less the time since (so a slow counter does not grow the estimate between
        its steps); None before it moved over MIN_RATE_S."""
        done, total = progress.get("shards_done"), progress.get("shards_total")
        moved = (done or 0) - (self._shards_at_entry or 0)
        stepped_s = self._shard_step_t - self._since_t
        if not total or done is None or moved <= 0 or done >= total or stepped_s < MIN_RATE_S:
            return None
        since_step_s = in_phase_s - stepped_s
        return max((total - done) * stepped_s / moved - since_step_s, 0.0)

    def _load_mib(self):
        """GPU memory (MiB, all GPUs) this weight load will fill: what an earlier load filled,
        else the weights' size on disk (a start without history: the weights take on the
        GPUs about what their files take)."""
        if self.loaded_mib:
            return self.loaded_mib
        return self.conditions.model_bytes / float(2**20) if self.conditions.model_bytes else None

    def _phase_by_rate(self, phase, in_phase_s, progress, read):
        """(seconds, basis) left in a phase by its own progress, or (None, None): the shard
        counter of the weight load, else the bytes it reads from storage when the conditions
        say how many, else the GPU memory it fills against what an earlier load filled, else
        the bytes the history read; another phase: the bytes it reads from storage at the
        rate this start reads them."""
        if in_phase_s <= 0:
            return None, None
        if phase == WEIGHT_LOAD:
            shards_s = self._by_shards(progress, in_phase_s)
            if shards_s is not None:
                return shards_s, "shards"
            if self.conditions.storage_bytes() is None or not self.load.reads_storage():
                done = eta_live.loaded_fraction(progress.get("gpu_mem_used_mib"), self._mem_at_entry, self._load_mib())
                memory_s = eta_live.fraction_left_s(done, in_phase_s)
                if memory_s is not None:
                    return memory_s, "gpu_memory"
            want = self.load.storage_bytes() if self.load.reads_storage() else None
            # with no earlier read rate to go by, a young rate beats none
            young_ok = self.load.storage_bps is None
        else:
            want = self.usual_bytes.get(phase)
            want = want if want is not None and want >= MIN_PHASE_BYTES else None
            young_ok = False
        if want is None or read is None or self._read_at_entry is None or (in_phase_s < MIN_RATE_S and not young_ok):
            return None, None
        got = read - self._read_at_entry
        left_s = eta_live.bytes_left_s(want, got, eta_live.rate_bps(read, self._read_at_entry, in_phase_s))
        return (left_s, "bytes") if left_s is not None else (None, None)
