"""The detector's GPU channel: one start's nvidia-smi answers, poll by poll. Pure, no I/O.

Each answer becomes a `GpuSample` (spinning and idle GPUs, utilisation moving between bands,
the sums), moves the `gpu_mem` channel when a GPU's memory left its value at its last move
(the unit's own holders' memory where `unit_gpu_memory.py` has it, else the board's), and
teaches the idle power a GPU draws doing nothing. A GPU at spin utilisation spins only at a
spin-wait's power (a fraction of its power.limit, `gpu_spin_power_max_limit_pct`): drawing
more it runs compute kernels; without a power reading the level is unknown (rule 5).
Utilisation and power are board totals: they are the unit's only on a GPU no other process
holds (`shared`, from unit_gpu_memory.py). On a shared GPU a neighbour can only add to them:
an idle board, or one pinned at a spin-wait's power, bounds the unit's own (idle; computing
nothing); a busy or high reading may be the neighbour's and says nothing about the unit.
A timed-out nvidia-smi while the unit runs is remembered too: a wedged driver is evidence,
not nothing (rule 5).
"""
from dataclasses import dataclass

from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.life_signs import GpuBursts

IDLE_BAND, BETWEEN_BAND, SPIN_BAND = 0, 1, 2


@dataclass
class GpuSample:
    t: float
    count: int
    mem_used_mib: float
    mem_total_mib: float
    util_max_pct: float
    spinning: list       # indexes at or above spin_util_pct
    all_idle: bool       # every GPU below idle_util_pct
    active: bool         # utilisation between idle and spin, or a GPU changed band: kernels come and go
    spin_at_idle_power: bool  # every spinning GPU draws a spin-wait's power: a spin, not a compute kernel
    between: bool = False     # some GPU between idle and spin, or bursting above its noise: kernels finishing
    spin_power_unknown: bool = False  # some spinning GPU without a power reading: spin or kernel, unknown (rule 5)
    own: bool = True          # utilisation and power read on some GPU the unit holds alone


@dataclass
class _Bands:
    """What one answer's utilisation readings say, GPU by GPU."""
    spinning: list
    spin_levels: list     # per spinning GPU: True at a spin-wait's power, None without a reading
    own: bool = False
    all_idle: bool = True
    active: bool = False
    between: bool = False
    util_max: float = 0


class GpuReadings:
    """The latest GPU sample of a start and what its answers taught across polls."""

    def __init__(self, settings):
        self.settings = settings
        self.bursts = GpuBursts(settings.gpu_burst_util_pct, settings.gpu_burst_margin_pct)
        self.sample = None        # GpuSample, the last nvidia-smi answer
        self.active_t = None      # the last poll with kernels coming and going
        self.run = 0              # polls in a row with a GPU reading of the unit's own, this one included
        self.smi_since = None     # first nvidia-smi timeout of the current run of them
        self._mem_ref = {}        # gpu index (board) or ("unit", index) -> MiB at its last move
        self._bands = {}          # gpu index -> band (last sample)
        self._idle_power_w = None  # lowest power of a GPU seen idle: what a GPU draws doing nothing
        self._least_power_w = None  # lowest power of any earlier reading: at least the idle power

    def fresh(self, t, own=True):
        """The last sample, unless it is older than signal_stale_s or (`own`) its utilisation
        and power are no GPU's the unit holds alone: then the unit's GPUs are unread (rule 5)."""
        sample = self.sample
        if sample is None or t - sample.t > self.settings.signal_stale_s or (own and not sample.own):
            return None
        return sample

    def read(self, gpus, t, moved, first, gpu_procs=None, unit_mem=None, shared=frozenset()):
        """Record one nvidia-smi sample: memory moves (of the unit's own processes where
        `unit_mem` has them, else of the board), spinning and idle GPUs among those the unit
        holds alone (not in `shared`), sums."""
        if not isinstance(gpus, list) or not gpus:
            self.run = 0
            return
        recent = self.sample is not None and t - self.sample.t <= self.settings.signal_stale_s
        bands = self._read_bands(gpus, recent, gpu_procs, shared)
        self.run = self.run + 1 if bands.own else 0
        used, total, mem_moved = self._read_memory(gpus, unit_mem)
        if mem_moved and not first:
            moved.append("gpu_mem")
        if bands.active and not first:
            self.active_t = t
        levels = bands.spin_levels
        self.sample = GpuSample(t, len(gpus), used, total, bands.util_max, bands.spinning, bands.all_idle, bands.active,
                                bool(levels) and all(levels), bands.between, None in levels, bands.own)
        self.smi_since = None

    def _read_bands(self, gpus, recent, gpu_procs, shared):
        """Each GPU's band (idle, between, spin) this answer, learning the idle power on the
        way. A GPU another process shares has one only where its reading bounds the unit's
        own: a neighbour only adds utilisation and power, so a board read idle, or pinned at
        a spin-wait's power, is a unit idle or computing nothing; any other reading is unknown."""
        s = self.settings
        bursts = self.bursts
        burst_hist, burst_min = bursts.readings, s.gpu_burst_util_pct
        spin_at, idle_below = s.spin_util_pct, s.idle_util_pct
        floor = self._idle_power_w
        last_bands = self._bands
        out = _Bands([], [])
        for pos, g in enumerate(gpus):
            idx = g.get("index", pos)
            util = g.get("util_pct") or 0
            power = g.get("power_w")
            if power.__class__ is not int and power.__class__ is not float:
                power = None
            elif util < idle_below and (floor is None or power < floor):
                floor = power
            level = None if power is None or util < spin_at else self._spin_level(power, g.get("power_limit_w"), floor)
            if idx in shared and not (util < burst_min or (util >= spin_at and level)):
                last_bands.pop(idx, None)
                continue
            out.own = True
            if util >= spin_at and level is not False:
                band = SPIN_BAND
                out.spinning.append(idx)
                out.spin_levels.append(level)
                out.all_idle = False
            elif util >= idle_below or (util >= burst_min and bursts.is_burst(idx, util) and _owned(gpu_procs, idx)):
                # busy, flat out while drawing compute power, or a burst above the GPU's own
                # noise: kernels at work
                band = BETWEEN_BAND
                out.all_idle = False
                out.active = out.between = True
            else:
                band = IDLE_BAND
                if util < burst_min:    # an idle reading: into the GPU's noise history (inlined: every poll, every GPU)
                    (burst_hist.get(idx) or bursts.history(idx)).append(util)
                    if bursts.bursts_in_a_row:
                        bursts.bursts_in_a_row.pop(idx, None)
            if util > out.util_max:
                out.util_max = util
            if recent and not out.active and last_bands.get(idx, band) != band:
                out.active = True
            last_bands[idx] = band
        self._idle_power_w = floor
        powers = [g.get("power_w") for g in gpus if g.get("power_w").__class__ in (int, float)]
        if powers and (self._least_power_w is None or min(powers) < self._least_power_w):
            self._least_power_w = min(powers)
        return out

    def _spin_level(self, power, limit, floor):
        """Whether a GPU at spin utilisation draws a spin-wait's power: True (a spin), False
        (compute kernels), None (the level cannot be told: a board without its limit, at
        most gpu_spin_power_max_w, with no earlier power reading). Without an idle reading,
        the lowest power an earlier reading drew stands for the idle power (it is at least that)."""
        s = self.settings
        if (limit.__class__ is int or limit.__class__ is float) and limit > 0:
            return power <= limit * s.gpu_spin_power_max_limit_pct / 100.0
        if power > s.gpu_spin_power_max_w:
            return False
        floor = floor if floor is not None else self._least_power_w
        if floor is None:
            return None
        return power < floor * (1.0 + s.gpu_compute_power_above_idle_pct / 100.0)

    def _read_memory(self, gpus, unit_mem):
        """(used MiB, total MiB, whether some GPU's memory moved by gpu_mem_noise_mib since its last move)."""
        noise = self.settings.gpu_mem_noise_mib
        refs = self._mem_ref
        mem_moved = False
        used = total = 0
        for pos, g in enumerate(gpus):
            mem = g.get("mem_used_mib")
            if mem.__class__ is int or mem.__class__ is float:
                used += mem
                key = g.get("index", pos)
                if unit_mem is not None:
                    key, mem = ("unit", key), unit_mem.get(key, 0)
                ref = refs.get(key)
                if ref is None:
                    refs[key] = mem
                elif mem - ref >= noise or ref - mem >= noise:
                    refs[key] = mem
                    mem_moved = True
            total += g.get("mem_total_mib") or 0
        return used, total, mem_moved

    def read_missing(self, obs, t):
        """A timed-out nvidia-smi while the unit runs is evidence (a wedged driver), not nothing."""
        why = (obs.get("missing") or {}).get("gpus") if isinstance(obs.get("missing"), dict) else None
        unit = obs.get("unit")
        running = not isinstance(unit, dict) or unit.get("active") in ("active", "activating", "reloading", None)
        # "timed out" or "exited N: Unable to determine the device handle ...": the driver did not
        # answer; "not found" / "not runnable" say nothing about the GPUs
        if "gpus" in obs:
            return
        if isinstance(why, str) and ("timed out" in why or "exited" in why) and running:
            if self.smi_since is None:
                self.smi_since = t
        else:
            self.smi_since = None


def _owned(gpu_procs, idx):
    """Whether the unit's processes may account for a GPU's utilisation: a process of the
    unit holds it (the probe lists the holders), or the holders are unknown."""
    if not isinstance(gpu_procs, list) or not gpu_procs:
        return True
    return any(p.get("gpu") == idx for p in gpu_procs if isinstance(p, dict))
