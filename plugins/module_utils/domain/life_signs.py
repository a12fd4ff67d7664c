"""Rule 2 of the detector, "any sign of life defers": the signs that a start still works
beyond the progress channels. Pure functions and small state, no I/O.

- `GpuBursts`: a GPU reading is a burst (kernels finished) when its utilisation stands out
  from that GPU's own recent floor: real idle boards read 0, so 2 % between zeros is a
  burst; boards whose idle reading jitters (0-3 %) need a reading above that jitter.
- `children_changed`: child processes coming and going (compile workers, JIT compilers).
- `stacks_changed`: a rank's py-spy stack differs from its previous sample.
- `CpuBursts`: an interval whose CPU rate stands out from the unit's own recent floor
  (a loop that times short kernels wakes and works for a second or two between waits; a
  hung rank's background threads tick at a steady trickle). CPU time is a counter, so a
  burst between two readings is never lost with a lost reading, unlike a GPU sample.
- `FrozenClock`: how long the unit's CPU time has not moved at all (rule 5: a frozen CPU
  clock is evidence on its own).
"""
from collections import deque


class GpuBursts:
    """Per GPU, the recent readings below spin utilisation, and whether a new one is a burst."""

    def __init__(self, min_pct, margin_pct, history=24, min_history=6, ceiling_quantile=0.8):
        self.min_pct, self.margin_pct = min_pct, margin_pct
        self.history_len, self.min_history, self.quantile = history, min_history, ceiling_quantile
        self.readings = {}
        self.bursts_in_a_row = {}

    def history(self, idx):
        """The GPU's recent readings (a deque a caller may append an idle reading to)."""
        seen = self.readings.get(idx)
        if seen is None:
            seen = self.readings[idx] = deque(maxlen=self.history_len)
        return seen

    def is_burst(self, idx, util_pct):
        """True when `util_pct` is at least min_pct and margin_pct above the GPU's noise ceiling
        (the `ceiling_quantile` of its recent readings); the reading joins the history."""
        seen = self.history(idx)
        if util_pct < self.min_pct or len(seen) < self.min_history:
            seen.append(util_pct)
            if self.bursts_in_a_row:
                self.bursts_in_a_row.pop(idx, None)
            return False
        ordered = sorted(seen)
        burst = util_pct >= ordered[int(self.quantile * (len(ordered) - 1))] + self.margin_pct
        # bursts stay out of the noise history (frequent bursts would raise the ceiling over
        # the small ones), unless they keep coming: then the board's floor itself has moved
        if burst:
            runs = self.bursts_in_a_row[idx] = self.bursts_in_a_row.get(idx, 0) + 1
            if runs >= self.min_history:
                seen.append(util_pct)
        else:
            self.bursts_in_a_row.pop(idx, None)
            seen.append(util_pct)
        return burst


class CpuBursts:
    """The unit's CPU rate per interval against its recent floor; `last_t` is the end of the
    latest interval that was a burst."""

    def __init__(self, min_pct, floor_share_pct, history=12, min_history=4, ceiling_quantile=0.25):
        self.min_pct, self.share = min_pct, floor_share_pct / 100.0
        self.min_history, self.quantile = min_history, ceiling_quantile
        self._rates = deque(maxlen=history)
        self.last_t = None

    def update(self, t, rate_pct):
        """Judge one interval's rate (percent of one core) ending at `t`; True for a burst."""
        rates = self._rates
        burst = False
        if rate_pct >= self.min_pct and len(rates) >= self.min_history:
            ordered = sorted(rates)
            burst = ordered[int(self.quantile * (len(ordered) - 1))] <= self.share * rate_pct
        if burst:
            self.last_t = t
        else:
            rates.append(rate_pct)
        return burst


def children_changed(previous, current):
    """True when the unit's process count or its process names' counts changed between two
    `procs` readings (dicts with `count` and `comm`); False when either is unknown."""
    if not isinstance(previous, dict) or not isinstance(current, dict):
        return False
    if isinstance(previous.get("count"), int) and isinstance(current.get("count"), int) \
            and previous["count"] != current["count"]:
        return True
    old, new = previous.get("comm"), current.get("comm")
    return isinstance(old, dict) and isinstance(new, dict) and old != new


def stacks_changed(previous, current):
    """True when some rank sampled in both {rank: frames} samples shows other frames."""
    if not previous or not current:
        return False
    return any(rank in previous and previous[rank] != frames for rank, frames in current.items())


class FrozenClock:
    """Since when the unit's summed CPU time has grown by no more than `frozen_pct` percent of
    one core per process (the trickle of a hung process's background threads); an unknown
    reading neither starts nor ends a frozen spell."""

    def __init__(self, frozen_pct):
        self.frozen_pct = frozen_pct
        self.since = None
        self._last = None   # (t, cpu_s)

    def update(self, t, cpu_s, processes=1):
        if not isinstance(cpu_s, (int, float)) or isinstance(cpu_s, bool):
            return
        last = self._last
        if last is None or t <= last[0]:
            if last is None:
                self._last = (t, cpu_s)
            return
        rate_pct = (cpu_s - last[1]) / (t - last[0]) * 100.0
        if cpu_s >= last[1] and rate_pct <= self.frozen_pct * max(1, processes):
            if self.since is None:
                self.since = last[0]
        else:
            self.since = None
        self._last = (t, cpu_s)

    def held_s(self, t):
        return 0.0 if self.since is None else t - self.since


class CpuFloor:
    """Rule 2: a start's CPU floor, learned from its own quietest stretch: the lowest rate,
    per process, that held over `stretch` readings in a row (poll loops, heartbeats, ZMQ:
    a few % per rank, never assumed zero). A rate at that floor is neither progress nor
    activity. Rates above `max_per_process_pct` per process are never a floor.

    A stretch's rate becomes the floor only once the rate has left it (risen above it and
    its margin for a stretch of readings): the readings are sums over the unit, so a stretch
    with one process busy on one core and the others idle (a tokenizer, a CPU repack) reads a
    few % per process too, and judging a stretch by a floor learned from itself would freeze
    that phase. A start back at a floor it sat at before is judged against it at once."""

    def __init__(self, max_per_process_pct, margin_pct, stretch=3):
        self.max_pct, self.margin = max_per_process_pct, margin_pct / 100.0
        self._recent = deque(maxlen=stretch)
        self._current = None          # the quietest stretch since the rate last left one
        self._above = 0               # readings in a row above it and its margin
        self.per_process_pct = None   # the floor: the quietest stretch the rate has left

    def update(self, rate_pct, processes):
        """One interval's rate (percent of one core, summed) over `processes` processes."""
        per_process = rate_pct / max(1, processes)
        current = self._current
        if current is not None and per_process > current * (1.0 + self.margin):
            self._above += 1
            if self._above >= self._recent.maxlen:   # left for a stretch, not one noisy reading
                if self.per_process_pct is None or current < self.per_process_pct:
                    self.per_process_pct = current
                self._current = current = None
        else:
            self._above = 0
        self._recent.append(per_process)
        if len(self._recent) == self._recent.maxlen:
            stretch = max(self._recent)
            if stretch <= self.max_pct and (current is None or stretch < current):
                self._current = stretch

    def at_floor(self, rate_pct, processes):
        """Whether a rate is no more than the learned floor (and its margin)."""
        if self.per_process_pct is None or rate_pct is None:
            return False
        return rate_pct / max(1, processes) <= self.per_process_pct * (1.0 + self.margin)
