"""Rules 3 and 5 of the detector: "a stall needs a positive signature" and "blind means
patient, not deaf". Given what the detector has seen on a poll without progress, which
stall signature holds and for how long, and the verdict words. Pure, no I/O.

- frozen: the unit's CPU clock has not moved (rule 5, evidence on its own);
- parked: identical stacks in a wait on samples far enough apart, the hardware agreeing;
- spinning: GPUs pinned with flat memory at a spin-wait's power (a shorter window), or parked
  stacks with spinning GPUs;
- blind on power: identical stacks in one wait far past what the phase usually takes, when
  no power reading tells a spin from a kernel at work (rule 5);
- stopped: every process in state T (rule 5, evidence on its own);
- idle: every signal flat; without a GPU reading the window grows (rule 5);
- blind: nvidia-smi wedged while nothing moves (rule 5);
- the hard ceiling: no progress for too long ends every start (rule 5).
`evidence["rule"]` names the rule that decided.
"""
from dataclasses import dataclass

from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.blind_waits import BlindWaits
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.durations import fmt_duration
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.wait_frames import host_wait_frame, wait_frame


@dataclass(frozen=True)
class Silence:
    """What the detector has seen, as of a poll on which nothing moved."""
    t: float
    phase: str
    last_progress_t: float
    cpu_pct: object = None       # the unit's CPU rate at its last reading, None before one
    cpu_known: bool = False      # a CPU reading within signal_stale_s
    cpu_idle: object = None      # the detector's idle test (its rate, or its learned floor); None: below cpu_idle_pct
    gpus: object = None          # the GPU sample within signal_stale_s (gpu_readings.GpuSample), or None
    gpu_active_t: object = None  # the last poll with kernels coming and going
    gpu_run: int = 0             # polls in a row with a GPU reading, this one included
    smi_since: object = None     # first nvidia-smi timeout of the current run of them
    cpu_burst_t: object = None   # the end of the latest CPU burst (life_signs.CpuBursts.last_t)
    frozen_s: float = 0.0        # how long the unit's CPU clock has not moved (life_signs.FrozenClock)
    stopped: bool = False        # every process of the unit in state T
    compilers: tuple = ()        # compiler processes in the cgroup at the last sample
    stacks: tuple = ()           # ((t, {rank: frames}), ...) taken since the last progress
    last_stack_t: object = None
    work_stack_t: object = None  # last stack sample in which a rank was computing, not waiting
    sync_stack_t: object = None  # last stack sample with every rank in a device synchronize
    same_stacks_since: object = None  # the first of the stack samples in a row identical to the latest
    same_stacks_count: int = 0


@dataclass(frozen=True)
class Judgement:
    verdict: str          # stalled, suspect or quiet
    reason_code: str
    reason: str
    want_stacks: bool = False


@dataclass(frozen=True)
class _Poll:
    """One poll without progress as the signatures read it."""
    quiet_s: float        # since the last progress
    cpu_idle: bool
    gpu_active: bool      # kernels coming and going
    spin_gpus: list       # the GPUs read spinning (none while kernels come and go)
    spinning: bool        # enough of them, and no rank computing on the host
    idle: bool            # every signal flat (or unread GPUs, rule 5)
    signature: str        # stopped, spin, idle, gpu_active, busy or unknown


class _Clock:
    """How long a signature has held; one missed poll is forgiven (noise, a late sample)."""

    def __init__(self):
        self.since = None
        self.misses = 0

    def update(self, present, t):
        if present:
            if self.since is None:
                self.since = t
            self.misses = 0
        else:
            self.misses += 1
            if self.misses >= 2:
                self.since = None

    def held_s(self, t):
        return 0.0 if self.since is None or self.misses else t - self.since

    def reset(self):
        self.since, self.misses = None, 0


class StallSignatures:
    """The signature clocks across polls; `judge` once per poll without progress."""

    def __init__(self, settings):
        self.settings = settings
        self._spin = _Clock()
        self._idle = _Clock()
        self._stopped = _Clock()
        self._idle_gpu_seen = False
        self._last_busy_t = None
        self.blind_waits = BlindWaits(settings)

    def on_progress(self):
        """Something moved: the spin and idle spells end."""
        self._spin.reset()
        self._idle.reset()

    def judge(self, seen, evidence):
        """The Judgement of a poll without progress; fills `evidence` (signature, rule, ...):
        the first stall signature that holds long enough, else suspect or quiet."""
        poll = self._take_in(seen)
        self._describe(seen, poll, evidence)
        for signature in (self._parked_stacks, self._stopped_processes, self._spinning_gpus, self._frozen_clock,
                          self._idle_signals, self._smi_wedged, self._blind_wait, self._hard_ceiling):
            judgement = signature(seen, poll, evidence)
            if judgement is not None:
                return judgement
        return self._not_yet(seen, poll)

    def _take_in(self, seen):
        """What this poll shows (a _Poll), and the signature clocks moved on by it."""
        s = self.settings
        t = seen.t
        gpus = seen.gpus
        cpu_known = seen.cpu_known
        cpu_idle = cpu_known and (seen.cpu_pct < s.cpu_idle_pct if seen.cpu_idle is None else seen.cpu_idle)
        gpu_active = gpus is not None and gpus.active
        spin_gpus = gpus.spinning if gpus is not None and not gpu_active else []
        # the latest stack sample shows a rank computing on the host, not waiting for its GPU:
        # a board read flat out is then not this start's spin (another process on a shared
        # board, or a CPU phase beside a long kernel)
        host_at_work = seen.work_stack_t is not None and seen.work_stack_t == seen.last_stack_t \
            and t - seen.last_stack_t <= 3 * s.stacks_interval_s
        spinning = len(spin_gpus) >= s.spin_min_gpus and not host_at_work
        gpus_idle = gpus is not None and gpus.all_idle
        # no GPU reading and the ranks waiting on their GPUs: the GPUs may well be computing
        gpu_wait_blind = gpus is None and seen.sync_stack_t is not None and t - seen.sync_stack_t <= 3 * s.stacks_interval_s
        # without a GPU reading the idle window grows (rule 5: stall_idle_blind_window_s)
        idle = cpu_idle and not seen.compilers and (gpus_idle or (gpus is None and not gpu_wait_blind))
        busy = cpu_known and not cpu_idle and not spinning
        # Busy CPU is work only when something says it computes: GPUs answering and not
        # spinning, kernels coming and going, a stack in a compute loop, a compiler. Alone
        # it is as likely a rank busy-polling a hung collective.
        recent_work_stack = seen.work_stack_t is not None and t - seen.work_stack_t <= 3 * s.stacks_interval_s
        if gpu_active or gpu_wait_blind or (busy and (gpus is not None or recent_work_stack or bool(seen.compilers))):
            self._last_busy_t = t
        stopped = seen.stopped
        self._run_clocks(t, gpu_active or seen.cpu_burst_t == t, spinning, idle, stopped, gpus_idle)
        signature = ("stopped" if stopped else "spin" if spinning else "idle" if idle else "gpu_active" if gpu_active
                     else "busy" if busy else "unknown")
        return _Poll(t - seen.last_progress_t, cpu_idle, gpu_active, spin_gpus, spinning, idle, signature)

    def _run_clocks(self, t, at_work, spinning, idle, stopped, gpus_idle):
        """Move the spin, idle and stopped clocks by one poll; `at_work`: kernels come and go, or
        the host woke for a burst of work (a stuck process does neither): no idle spell, no spin."""
        if at_work:
            self._idle.reset()
            self._spin.reset()
        self._spin.update(spinning, t)
        self._idle.update(idle, t)
        self._stopped.update(stopped, t)
        if idle and gpus_idle:
            self._idle_gpu_seen = True
        elif not idle:
            self._idle_gpu_seen = False

    @staticmethod
    def _describe(seen, poll, evidence):
        """The evidence every poll without progress carries: its signature and what was read."""
        evidence.update({"signature": poll.signature, "no_progress_s": round(poll.quiet_s, 1)})
        if poll.spinning:
            evidence["spin_gpus"] = poll.spin_gpus
        if seen.cpu_known:
            evidence["cpu_pct"] = round(seen.cpu_pct, 1)
        if seen.gpus is None:
            evidence["gpus"] = "unanswered since %s" % fmt_duration(seen.t - seen.smi_since) if seen.smi_since is not None else "unknown"

    def _parked_stacks(self, seen, poll, evidence):
        """Rule 3, parked (or spinning) signature: identical stacks in a wait, the hardware agreeing."""
        confirmed = self._identical_wait_stacks(seen, poll.cpu_idle)
        if not confirmed:
            return None
        evidence["rule"] = "rule 3: %s signature (identical stacks in a wait, %s)" % (
            "spinning" if poll.spinning else "parked", confirmed["hardware"])
        evidence["stacks"] = confirmed
        code = "stall_spin" if poll.spinning else "stall_wait_stacks"
        what = ("%d GPU(s) spinning and " % len(poll.spin_gpus)) if poll.spinning else ""
        reason = "%sall %d sampled ranks show the same stack, parked in %s, on samples %ds apart (%s); nothing moved for %s" % (
            what, confirmed["ranks"], confirmed["wait_frame"], confirmed["gap_s"], confirmed["hardware"], fmt_duration(poll.quiet_s))
        return Judgement("stalled", code, reason)

    def _stopped_processes(self, seen, poll, evidence):
        """Rule 5: every process stopped (state T) for stall_stopped_window_s, evidence on its own."""
        held_s = self._stopped.held_s(seen.t)
        if not (seen.stopped and held_s >= self.settings.stall_stopped_window_s):
            return None
        evidence["rule"] = "rule 5: every process stopped (state T), evidence on its own"
        reason = "every process of the unit stopped (state T) for %s: nothing can move" % fmt_duration(held_s)
        return Judgement("stalled", "stall_idle", reason)

    def _spinning_gpus(self, seen, poll, evidence):
        """Rule 3, spinning signature: GPUs pinned with flat memory for the phase's spin window
        (a shorter one at idle power)."""
        s = self.settings
        gpus = seen.gpus
        # kernels may run flat out for long in the kernel phases, but not at idle power
        long_spin = seen.phase in s.kernel_phases and not (gpus is not None and gpus.spin_at_idle_power)
        spin_window = s.stall_spin_kernel_phase_window_s if long_spin else s.stall_spin_window_s
        if gpus is not None and gpus.spin_at_idle_power:
            # the power reading confirms a spin-wait: no compute kernel draws idle power
            spin_window = min(spin_window, s.stall_spin_idle_power_window_s)
        if not (poll.spinning and self._spin.held_s(seen.t) >= spin_window):
            return None
        evidence["rule"] = "rule 3: spinning signature"
        reason = "%d of %d GPUs at >= %d%% utilisation with flat memory for %s and nothing else moving: a hung collective" % (
            len(poll.spin_gpus), gpus.count, s.spin_util_pct, fmt_duration(self._spin.held_s(seen.t)))
        return Judgement("stalled", "stall_spin", reason)

    def _frozen_clock(self, seen, poll, evidence):
        """Rule 5: the unit's CPU clock frozen for stall_frozen_window_s, nothing else moving."""
        gpus = seen.gpus
        frozen_s = min(seen.frozen_s, poll.quiet_s)
        if not (frozen_s >= self.settings.stall_frozen_window_s and not poll.spinning and not poll.gpu_active
                and (gpus is None or gpus.all_idle)):
            return None
        evidence["rule"] = "rule 5: frozen CPU clock, evidence on its own"
        evidence["signature"] = "frozen"
        reason = "the unit's CPU time has not moved for %s (%s) and nothing else moved: every process frozen" % (
            fmt_duration(frozen_s), "GPUs idle" if gpus is not None else "no GPU reading")
        return Judgement("stalled", "stall_idle", reason)

    def _idle_signals(self, seen, poll, evidence):
        """Rule 3, idle signature: every signal flat for the idle window (longer without a GPU
        reading, rule 5)."""
        s = self.settings
        idle_window = s.stall_idle_window_s if self._idle_gpu_seen else s.stall_idle_blind_window_s
        if not (poll.idle and self._idle.held_s(seen.t) >= idle_window):
            return None
        evidence["rule"] = "rule 3: %s signature" % ("idle" if self._idle_gpu_seen else "idle without a GPU reading (rule 5 window)")
        gpu_words = "GPUs idle" if self._idle_gpu_seen else "no GPU reading"
        reason = "every signal flat for %s: CPU %.0f%%, %s, no disk I/O, no new log lines" % (
            fmt_duration(self._idle.held_s(seen.t)), seen.cpu_pct, gpu_words)
        return Judgement("stalled", "stall_idle", reason)

    def _smi_wedged(self, seen, poll, evidence):
        """Rule 5: nvidia-smi timing out for stall_gpu_unanswered_window_s while nothing moves."""
        t, window = seen.t, self.settings.stall_gpu_unanswered_window_s
        if not (seen.gpus is None and seen.smi_since is not None and not poll.gpu_active and t - seen.smi_since >= window
                and t - seen.last_progress_t >= window):
            return None
        evidence["rule"] = "rule 5: nvidia-smi wedged while nothing moves"
        reason = "nvidia-smi has timed out for %s while the unit runs and nothing moved for %s: a wedged GPU (hung collective)" % (
            fmt_duration(t - seen.smi_since), fmt_duration(poll.quiet_s))
        return Judgement("stalled", "stall_spin", reason)

    def _blind_wait(self, seen, poll, evidence):
        """Rule 5, blind on power: identical stacks in one wait past the phase's bound (blind_waits.py)."""
        found = self.blind_waits.judge(seen, poll.gpu_active, evidence)
        return None if found is None else Judgement("stalled", *found)

    def _hard_ceiling(self, seen, poll, evidence):
        """Rule 5: no progress for too long ends every start, busy or not."""
        s = self.settings
        calm_since = max(seen.last_progress_t, self._last_busy_t or seen.last_progress_t)
        if not (poll.quiet_s >= s.stall_busy_no_progress_s or seen.t - calm_since >= s.stall_no_progress_s):
            return None
        evidence["rule"] = "rule 5: hard ceiling without progress"
        reason = "no progress on any channel for %s (signature: %s)" % (fmt_duration(poll.quiet_s), poll.signature)
        return Judgement("stalled", "stall_no_progress", reason)

    def _not_yet(self, seen, poll):
        """No stall yet: suspect once a spin or idle spell held suspect_after_s, else quiet; and
        whether stacks are wanted."""
        s = self.settings
        t, quiet_s = seen.t, poll.quiet_s
        want = quiet_s >= s.stacks_after_quiet_s and (
            seen.last_stack_t is None or seen.last_stack_t < seen.last_progress_t or t - seen.last_stack_t >= s.stacks_interval_s)
        if poll.spinning and self._spin.held_s(t) >= s.suspect_after_s:
            return Judgement("suspect", "suspect_spin", "nothing moved for %s; %d GPU(s) at ~100%% with flat memory" % (
                fmt_duration(quiet_s), len(poll.spin_gpus)), want)
        if (poll.idle or seen.stopped) and max(self._idle.held_s(t), self._stopped.held_s(t)) >= s.suspect_after_s:
            return Judgement("suspect", "suspect_idle", "nothing moved for %s; CPU, GPUs and disk all idle" % (
                fmt_duration(quiet_s)), want)
        if poll.signature == "busy":
            words = "nothing moved for %s; CPU busy (%.0f%%), likely working silently" % (fmt_duration(quiet_s), seen.cpu_pct)
        elif poll.signature == "gpu_active":
            words = "nothing moved for %s; GPU utilisation changing, kernels running" % fmt_duration(quiet_s)
        else:
            words = "nothing moved for %s" % fmt_duration(quiet_s)
        return Judgement("quiet", "quiet", words, want)

    def _ranks_wait_apart(self, sample, ranks, waits):
        """Every rank waits and some wait on the host or a collective, not only for their own
        GPUs: SGLang's ranks run one code path in lockstep, so ranks parked apart wait on each other."""
        depth = self.settings.stack_collective_depth
        return all(waits) and any(host_wait_frame(sample[r], depth) for r in ranks)

    def _identical_wait_stacks(self, seen, cpu_idle):
        """Two samples since the last progress, far enough apart, identical, every rank waiting,
        and the hardware agreeing that nothing runs: stacks say where a rank is, not whether
        it is stuck."""
        s = self.settings
        t, gpus, stacks = seen.t, seen.gpus, seen.stacks
        if len(stacks) < 2:
            return None
        t_new, new = stacks[-1]
        if t_new != t:
            return None
        # the latest sample far enough back: if the stacks changed since, the ranks moved
        earlier = [(t_old, old) for t_old, old in stacks[:-1] if t_new - t_old >= s.stacks_min_gap_s]
        if not earlier:
            return None
        t_old, old = earlier[-1]
        common = [r for r in new if r in old]
        if not common or any(new[r] != old[r] for r in common):
            return None
        waits = [wait_frame(new[r], s.stack_wait_depth) for r in common]
        if not cpu_idle and not all(waits):
            return None
        if seen.stopped:
            hardware = "every process stopped"
        elif gpus is not None:
            # utilisation flat since the older sample: all idle, or spinning on some ranks
            if (seen.gpu_active_t is not None and seen.gpu_active_t > t_old) or not (gpus.all_idle or gpus.spinning):
                return None
            if seen.gpu_run < s.stacks_gpu_flat_polls:
                return None   # too few readings in a row: a burst may have fallen on a lost one
            if gpus.all_idle:
                # parked needs no burst of work, on the GPUs or the CPU, for longer than a
                # tuning loop waits between configs (its GPU bursts fall between readings;
                # its CPU bursts add up in the counter)
                last_burst = max(seen.gpu_active_t or 0.0, seen.cpu_burst_t or 0.0, seen.last_progress_t)
                if t - last_burst < s.stall_parked_quiet_s:
                    return None
                hardware = "GPUs idle"
            elif gpus.spin_power_unknown:
                # a GPU pinned without a power reading may be computing: only ranks parked apart
                # settle it now; ranks all in a synchronize wait for the blind bound (_blind_wait)
                if not self._ranks_wait_apart(new, common, waits):
                    return None
                hardware = "GPUs pinned (power unknown); every rank waiting, on the host or a collective"
            else:
                hardware = "GPUs spinning, utilisation flat"
        elif self._ranks_wait_apart(new, common, waits):
            hardware = "no GPU reading; every rank waiting, on the host or a collective"
        else:
            return None
        frame = next((w for w in waits if w), (new[common[0]] or ("?",))[0])
        return {"ranks": len(common), "gap_s": int(t_new - t_old), "wait_frame": frame,
                "frames": list(new[common[0]][:6]), "cpu_idle": cpu_idle, "hardware": hardware}
