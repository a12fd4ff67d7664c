"""The stall detector: one observation in, one Assessment out. Pure Python, no I/O.

It composes the five rules of trust (docs/detector.md); `evidence["rule"]` names the one
that decided:
1. no verdict from a line alone: a lethal-looking line is a hypothesis that the process
   exiting or the start freezing after it confirms (line_confirmation.py);
2. any sign of life defers: progress channels, bursts of GPU utilisation, child processes
   coming and going, stacks that change (life_signs.py);
3. a stall needs a positive signature: frozen, parked (identical stacks in a wait, GPUs
   flat), spinning, stopped (stall_signatures.py), or dead (the unit's main process gone);
4. never keep a server down by our own verdict: observe-only starts (observe_only_gate.py);
5. blind means patient, not deaf: longer windows without GPU readings or stacks, a frozen
   CPU clock or stopped processes decide alone, and a hard ceiling ends every start
   (stall_signatures.py).
Records journald cut at LineMax are joined before anything reads them.
"""
import re
from dataclasses import dataclass, field

from ansible_collections.sglang_ops.serving.plugins.module_utils.domain import log_lines, tqdm_frames
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.detector_settings import DetectorSettings
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.durations import fmt_duration
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.failure_classes import FAILURE_CLASSES, FINAL_VERDICTS
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.life_signs import (
    CpuBursts, CpuFloor, FrozenClock, GpuBursts, children_changed, stacks_changed)
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.line_confirmation import (
    CONFIRMED_DEAD, CONFIRMED_FROZEN, SURVIVED, LineConfirmation)
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.observe_only_gate import CEILING_CODE, OBSERVING, ObserveOnlyGate
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.phases import PhaseModel
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.sglang_dialect import bar_kind
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.unit_gpu_memory import UnitGpuMemory
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.stall_signatures import (
    DEVICE_SYNC, Silence, StallSignatures, host_wait_frame, wait_frame)


COMPILER_COMMS = re.compile(r"^(cc1plus|cc1|cicc|nvcc|ptxas|nvlink|fatbinary|cudafe\+\+|gcc|g\+\+|c\+\+|cc|clang\+\+|clang|ld|ld\.lld|as|ninja|make)$")
DEAD_ACTIVE = ("failed", "inactive", "deactivating")
STOPPED_STATES = ("T", "t")
DEAD_SUB = ("dead", "failed", "auto-restart", "exited", "stop", "stop-sigterm", "stop-sigkill", "stop-post", "final-sigterm", "final-sigkill")


@dataclass
class Assessment:
    t: float
    phase: str
    verdict: str
    reason_code: str
    reason: str
    evidence: dict = field(default_factory=dict)
    progress: dict = field(default_factory=dict)
    want_stacks: bool = False

    @property
    def final(self):
        return self.verdict in FINAL_VERDICTS

    def to_dict(self):
        return {"t": self.t, "phase": self.phase, "verdict": self.verdict, "reason_code": self.reason_code,
                "reason": self.reason, "evidence": self.evidence, "progress": self.progress,
                "want_stacks": self.want_stacks, "final": self.final}


@dataclass
class _GpuSample:
    t: float
    count: int
    mem_used_mib: float
    mem_total_mib: float
    util_max_pct: float
    spinning: list       # indexes at or above spin_util_pct
    all_idle: bool       # every GPU below idle_util_pct
    active: bool         # utilisation between idle and spin, or a GPU changed band: kernels come and go
    spin_at_idle_power: bool  # every spinning GPU draws about its idle power: a spin-wait, not a compute kernel
    between: bool = False     # some GPU between idle and spin, or bursting above its noise: kernels finishing


class Detector:
    """Everything it needs comes with the observations; the thresholds are the settings."""

    def __init__(self, settings=None, observe_only=None):
        self.settings = settings or DetectorSettings()
        s = self.settings
        self.lines = LineConfirmation(s.line_confirm_window_s, s.line_freeze_min_s, log_lines.fatal_priority,
                                      s.line_sticky_quiet_s)
        self.gate = ObserveOnlyGate(observe_only)
        self._bursts = GpuBursts(s.gpu_burst_util_pct, s.gpu_burst_margin_pct)
        self._frozen = FrozenClock(s.frozen_cpu_pct)
        self._cpu_bursts = CpuBursts(s.cpu_burst_min_pct, s.cpu_burst_floor_share_pct)
        self._cpu_floor = CpuFloor(s.cpu_floor_max_per_process_pct, s.cpu_floor_margin_pct)
        self._proc_count = 1
        self.signatures = StallSignatures(s)
        self._procs = None        # the last procs reading (children coming and going)
        self._last_sample = None  # the last py-spy sample {rank: frames}
        self._prev_cpu_pct = None
        self._life_log_t = None   # journal time of the latest line saying the process carries on
        self._held = None         # the Assessment held by the observe-only gate
        self.phases = PhaseModel()
        self._final = None
        self._polls = 0
        # channel baselines
        self._cpu = None          # (t, cpu_s)
        self._io = None           # (t, read_bytes, write_bytes)
        self._mem_ref = {}        # gpu index (board) or ("unit", index) -> MiB at its last move
        self._unit_memory = UnitGpuMemory()
        self._gpus = None         # _GpuSample, the last nvidia-smi answer
        self._cpu_pct = None
        self._cpu_t = None
        self._read_bps = None
        self._write_bps = None
        self._http = None         # last http dict
        self._http_rank = None
        self._bars = {}           # kind -> (n, total)
        self._heartbeat_polls = {}
        self._ready_line = False
        self._main_pid = None
        self._restarts = None
        self._compilers = []      # compiler processes in the cgroup at the last sample
        # progress bookkeeping
        self.last_moved = {}
        self._last_progress_t = None
        self._stacks = []         # [(t, {rank: frames})] taken since the last progress
        self._last_stack_t = None
        # lines and records
        self._partial = None      # (t, text, polls carried) of a record journald cut at LineMax
        self._survivable = None   # (t, code, line) of the last watchdog dump
        self._ordinary_t = None   # journal time of the latest ordinary (non-failure) record
        self._survived_traceback_t = None  # "Exception ignored in ...": the traceback after it is survived
        # hardware states
        self._bands = {}          # gpu index -> 0 idle, 1 between, 2 spin (last sample)
        self._gpu_active_t = None
        self._gpu_run = 0         # polls in a row with a GPU reading, this one included
        self._idle_power_w = None  # lowest power of a GPU seen idle: what a GPU draws doing nothing
        self._smi_since = None    # first nvidia-smi timeout of the current run of them
        self._procs_stopped = False
        self._work_stack_t = None  # last stack sample in which a rank was computing, not waiting
        self._sync_stack_t = None  # last stack sample with every rank in a device synchronize

    # ------------------------------------------------------------------ public
    def observe(self, obs):
        if self._final is not None:
            return self._final
        t = float(obs["t"])
        first = self._polls == 0
        self._polls += 1
        if first:
            self._last_progress_t = t
        moved = []
        facts = {}

        self._read_logs(obs.get("log") or (), t, moved, facts)
        dead = self._read_unit(obs, facts)
        self._read_procs(obs.get("procs"), t, moved, first)
        self._read_gpus(obs.get("gpus"), t, moved, first, obs.get("gpu_procs"), self._unit_memory.per_gpu(obs))
        self._read_missing(obs, t)
        self._read_http(obs.get("http"), t, moved, first)
        sample = self._read_stacks(obs.get("stacks"), t)
        if sample is not None:
            if stacks_changed(self._last_sample, sample) and self._work_stack_t == t:
                moved.append("stacks")   # ranks that moved into a wait are a stall starting, not life
            self._last_sample = sample

        for ch in moved:
            self.last_moved[ch] = t
        if moved:
            self._last_progress_t = t
            self.signatures.on_progress()
            self._stacks = [s for s in self._stacks if s[0] >= t]
        progress = self._progress(t)
        evidence = {"moved": sorted(set(moved)), "last_moved": dict(self.last_moved)}
        evidence.update(facts)

        if self._is_ready(obs):
            evidence["rule"] = "ready: %s" % ("a completion answered" if (obs.get("http") or {}).get("completion")
                                              else "every GPU's weight cache daemon ready" if "http" not in obs
                                              else "/health after the ready line")
            return self._decide(Assessment(t, "ready", "ready", "ready", self._ready_reason(obs), evidence, progress))
        failed = self._judge_lines(t, dead, moved, evidence, progress)
        if failed is not None:
            return self._decide(failed, dead=bool(dead))
        if self.gate.ceiling_reached(t):
            evidence["rule"] = "rule 4: observe-only ceiling"
            return self._decide(Assessment(t, self.phases.phase, "stalled", CEILING_CODE, self.gate.ceiling_words(t),
                                           evidence, progress))
        if moved or first:
            self._held = None
            return Assessment(t, self.phases.phase, "progressing", "progressing" if moved else "starting",
                              self._moving_words(moved), evidence, progress)
        return self._still_held(self._judge_silence(t, evidence, progress))

    # ------------------------------------------------------------------ channels
    def _read_logs(self, records, t, moved, facts):
        """Phase markers, lethal and survivable lines, exit lines and log progress of one
        poll's records, in their own time order, cut records joined first."""
        keys_this_poll = set()
        if records and any(records[i].get("t", t) > records[i + 1].get("t", t) for i in range(len(records) - 1)):
            records = sorted(records, key=lambda r: r.get("t", t))
        partial = self._partial
        self._partial = None
        for rec in records:
            msg = rec.get("msg") or ""
            rec_t = rec.get("t", t)
            if partial is not None:
                msg, rec_t = partial[1] + msg, partial[0]
                partial = None
            if rec.get("line_break") == "line-max":
                partial = (rec_t, msg, 0)
                continue
            self._read_record(msg, rec_t, t, moved, facts, keys_this_poll)
        if partial is not None:
            if partial[2] >= 1:      # the rest never came: read what there is
                self._read_record(partial[1], partial[0], t, moved, facts, keys_this_poll)
            else:
                self._partial = (partial[0], partial[1], partial[2] + 1)
        for key in keys_this_poll:
            self._heartbeat_polls[key] = self._heartbeat_polls.get(key, 0) + 1

    def _read_record(self, msg, rec_t, t, moved, facts, keys_this_poll):
        parts = tqdm_frames.frames(msg) if ("\r" in msg or "\n" in msg) else [msg]
        progress_bar = tqdm_frames.last_bar(msg) if "%" in msg else None
        if progress_bar is not None:
            self._on_bar(progress_bar, rec_t, moved)
        for part in parts:
            if progress_bar is not None and progress_bar.desc[:20] in part and tqdm_frames.parse_frame(part) is not None:
                continue   # bar frames: handled above as one bar state
            line = log_lines.classify(part)
            if line.phase is not None:
                self.phases.enter(line.phase, rec_t)
                self._ready_line = self._ready_line or line.phase == "ready"
            if line.fatal_code or line.survivable:
                self._on_failure_line(line, part.strip(), rec_t, t, facts)
            if line.exit_status:
                facts["exit_status"] = line.exit_status
                facts["main_exited_line"] = line.text
            if line.exit_status or line.unit_done:
                continue   # systemd's words about the unit: a death sign, not progress
            if line.heartbeat or self._heartbeat_polls.get(line.key, 0) >= self.settings.heartbeat_repeat_polls:
                facts["heartbeat_lines"] = facts.get("heartbeat_lines", 0) + 1
                continue
            keys_this_poll.add(line.key)
            moved.append("log")
            if (not line.chatter or (line.survivable and not line.lethal)) and (self._life_log_t is None or rec_t > self._life_log_t):
                self._life_log_t = rec_t   # the process says it carries on
            if not line.chatter and (self._ordinary_t is None or rec_t > self._ordinary_t):
                self._ordinary_t = rec_t

    def _on_failure_line(self, line, text, rec_t, t, facts):
        """Lethal lines open (or sharpen) the fault awaiting proof; survivable ones are evidence."""
        if not line.lethal:
            if log_lines.ANNOUNCES_SURVIVED_TRACEBACK.search(line.text):
                self._survived_traceback_t = rec_t
            if line.survivable:
                facts.setdefault("survived_lines", []).append(text[:300])
            if line.survivable == "watchdog":
                self._survivable = (rec_t, line.fatal_code, text)
            return
        if line.fatal_code == "fatal_error" and not line.sticky and self._survived_traceback_t is not None \
                and rec_t - self._survived_traceback_t <= self.settings.fatal_confirm_s:
            facts.setdefault("survived_lines", []).append(text[:300])   # the traceback Python announced
            return
        facts.setdefault("fatal_lines", []).append(text[:300])
        phase = log_lines.CLASS_PHASES.get(line.fatal_code) or self.phases.phase
        self.lines.on_line(rec_t, line.fatal_code, text, phase, t, sticky=line.sticky)
        if line.fatal_code in log_lines.CLASS_PHASES:
            self.phases.enter(phase, rec_t)

    def _on_bar(self, progress_bar, t, moved):
        kind = bar_kind(progress_bar.desc) or progress_bar.desc
        prev = self._bars.get(kind)
        if prev is None or progress_bar.n > prev[0] or (prev[1] != progress_bar.total):
            moved.append("bar")
        self._bars[kind] = (progress_bar.n, progress_bar.total)
        self.phases.on_bar(kind, progress_bar.done, t)

    def _read_unit(self, obs, facts):
        """Words saying why the main process is gone, or None while it runs."""
        unit = obs.get("unit")
        why = None
        if isinstance(unit, dict):
            active, sub = unit.get("active"), unit.get("sub")
            pid, restarts = unit.get("main_pid"), unit.get("restarts")
            if self._restarts is None and restarts is not None:
                self._restarts = restarts
            if self._main_pid is None and pid:
                self._main_pid = pid
            if active in DEAD_ACTIVE or sub in DEAD_SUB:
                why = "unit is %s/%s" % (active, sub)
            elif restarts is not None and self._restarts is not None and restarts > self._restarts:
                why = "systemd restarted the unit (NRestarts %s -> %s)" % (self._restarts, restarts)
            elif pid and self._main_pid and pid != self._main_pid:
                why = "main PID changed %s -> %s" % (self._main_pid, pid)
            elif active == "active" and not pid and self._main_pid:
                why = "main process gone (unit active, no main PID)"
            facts["unit"] = "%s/%s" % (active, sub)
        procs = obs.get("procs")
        if why is None and isinstance(procs, dict) and procs.get("count") == 0 and self._polls > 1:
            why = "no process left in the unit's cgroup"
        if why is None and facts.get("exit_status"):
            why = "journal: %s" % facts["main_exited_line"]
        if why is None:
            return None
        status = facts.get("exit_status")
        if status:
            why = "main process exited with status %s%s; %s" % (
                status, " (reported as success)" if status.startswith("0") else "", why)
        return "server process exited: " + why

    def _read_procs(self, procs, t, moved, first):
        if not isinstance(procs, dict):
            return
        if not first and children_changed(self._procs, procs):
            moved.append("children")
        self._procs = procs
        cpu_s = procs.get("cpu_s")
        count = procs.get("count")
        self._frozen.update(t, cpu_s, count if isinstance(count, int) and count > 0 else 1)
        if isinstance(cpu_s, (int, float)):
            if self._cpu is not None and cpu_s >= self._cpu[1] and t > self._cpu[0]:
                self._prev_cpu_pct = self._cpu_pct
                self._cpu_pct = (cpu_s - self._cpu[1]) / (t - self._cpu[0]) * 100.0
                self._cpu_bursts.update(t, self._cpu_pct)
                self._proc_count = count if isinstance(count, int) and count > 0 else 1
                self._cpu_floor.update(self._cpu_pct, self._proc_count)
                self._cpu_t = t
            self._cpu = (t, cpu_s)
        rb, wb = procs.get("read_bytes"), procs.get("write_bytes")
        if isinstance(rb, int) and isinstance(wb, int):
            if self._io is not None and t > self._io[0] and rb >= self._io[1] and wb >= self._io[2]:
                dt = t - self._io[0]
                self._read_bps = (rb - self._io[1]) / dt
                self._write_bps = (wb - self._io[2]) / dt
                if self._read_bps >= self.settings.io_noise_bytes_per_s:
                    moved.append("disk_read")
                if self._write_bps >= self.settings.io_noise_bytes_per_s:
                    moved.append("disk_write")
            self._io = (t, rb, wb)
        states = procs.get("states")
        if isinstance(states, dict):
            count = sum(n for n in states.values() if isinstance(n, int))
            self._procs_stopped = count > 0 and sum(states.get(k, 0) or 0 for k in STOPPED_STATES) == count
        else:
            self._procs_stopped = False
        comm = procs.get("comm")
        if isinstance(comm, dict):
            compilers = sorted(c for c, n in comm.items() if n and COMPILER_COMMS.match(c))
            self._compilers = compilers
            if compilers and not first and self._cpu_pct is not None and self._cpu_pct >= self.settings.cpu_idle_pct:
                moved.append("compile")

    @staticmethod
    def _owned(gpu_procs, idx):
        """Whether the unit's processes may account for a GPU's utilisation: a process of the
        unit holds it (the probe lists the holders), or the holders are unknown."""
        if not isinstance(gpu_procs, list) or not gpu_procs:
            return True
        return any(p.get("gpu") == idx for p in gpu_procs if isinstance(p, dict))

    def _read_gpus(self, gpus, t, moved, first, gpus_procs=None, unit_mem=None):
        """Record one nvidia-smi sample: memory moves (of the unit's own processes where
        `unit_mem` has them, else of the board), spinning and idle GPUs, sums."""
        if not isinstance(gpus, list) or not gpus:
            self._gpu_run = 0
            return
        self._gpu_run += 1
        bursts = self._bursts
        burst_hist, burst_min = bursts.readings, self.settings.gpu_burst_util_pct
        s = self.settings
        noise, spin_at, idle_below = s.gpu_mem_noise_mib, s.spin_util_pct, s.idle_util_pct
        mem_moved, spin, all_idle, active, between = False, [], True, False, False
        used = total = 0
        util_max = 0
        refs = self._mem_ref
        bands = self._bands
        recent = self._gpus is not None and t - self._gpus.t <= s.signal_stale_s
        floor = self._idle_power_w
        above_idle = s.gpu_compute_power_above_idle_pct / 100.0
        spin_powers = []
        for pos, g in enumerate(gpus):
            idx = g.get("index", pos)
            util = g.get("util_pct") or 0
            power = g.get("power_w")
            if power.__class__ is not int and power.__class__ is not float:
                power = None
            elif util < idle_below and (floor is None or power < floor):
                floor = power
            if util >= spin_at and (power is None or floor is None or power < floor * (1.0 + above_idle)):
                band = 2
                spin.append(idx)
                spin_powers.append(power)
                all_idle = False
            elif util >= idle_below or (util >= burst_min and bursts.is_burst(idx, util) and self._owned(gpus_procs, idx)):
                # busy, flat out while drawing compute power, or a burst above the GPU's own
                # noise: kernels at work
                band = 1
                all_idle = False
                active = between = True
            else:
                band = 0
                if util < burst_min:    # an idle reading: into the GPU's noise history (inlined: every poll, every GPU)
                    (burst_hist.get(idx) or bursts.history(idx)).append(util)
                    if bursts.bursts_in_a_row:
                        bursts.bursts_in_a_row.pop(idx, None)
            if util > util_max:
                util_max = util
            if recent and not active and bands.get(idx, band) != band:
                active = True
            bands[idx] = band
            mem = g.get("mem_used_mib")
            if mem.__class__ is int or mem.__class__ is float:
                used += mem
                key = idx
                if unit_mem is not None:
                    key, mem = ("unit", idx), unit_mem.get(idx, 0)
                ref = refs.get(key)
                if ref is None:
                    refs[key] = mem
                elif mem - ref >= noise or ref - mem >= noise:
                    refs[key] = mem
                    mem_moved = True
            total += g.get("mem_total_mib") or 0
        if mem_moved and not first:
            moved.append("gpu_mem")
        if active and not first:
            self._gpu_active_t = t
        self._idle_power_w = floor
        at_idle_power = bool(spin_powers) and floor is not None and None not in spin_powers
        self._gpus = _GpuSample(t, len(gpus), used, total, util_max, spin, all_idle, active, at_idle_power, between)
        self._smi_since = None

    def _read_missing(self, obs, t):
        """A timed-out nvidia-smi while the unit runs is evidence (a wedged driver), not nothing."""
        why = (obs.get("missing") or {}).get("gpus") if isinstance(obs.get("missing"), dict) else None
        unit = obs.get("unit")
        running = not isinstance(unit, dict) or unit.get("active") in ("active", "activating", "reloading", None)
        # "timed out" or "exited N: Unable to determine the device handle ...": the driver did not
        # answer; "not found" / "not runnable" say nothing about the GPUs
        if "gpus" in obs:
            return
        if isinstance(why, str) and ("timed out" in why or "exited" in why) and running:
            if self._smi_since is None:
                self._smi_since = t
        else:
            self._smi_since = None

    def _fresh_gpus(self, t):
        if self._gpus is None or t - self._gpus.t > self.settings.signal_stale_s:
            return None
        return self._gpus

    def _read_http(self, http, t, moved, first):
        if not isinstance(http, dict):
            return
        self._http = http
        health = http.get("health", None)
        rank = 0 if health is None else 1 if health == "timeout" else 3 if health == 200 else 2
        if self._http_rank is None or rank > self._http_rank:
            if self._http_rank is not None or (first and rank > 0):
                moved.append("http")
            self._http_rank = rank
        self.phases.on_http(rank >= 2, t)

    def _read_stacks(self, stacks, t):
        if not isinstance(stacks, list) or not stacks:
            return None
        sample = {}
        for s in stacks:
            key = s.get("rank") if s.get("rank") is not None else s.get("pid")
            sample[key] = tuple(s.get("frames") or ())
        self._stacks = self._stacks[-8:] + [(t, sample)]
        self._last_stack_t = t
        depth = self.settings.stack_wait_depth
        waits = [wait_frame(frames, depth) for frames in sample.values() if frames]
        if any(w is None for w in waits):
            self._work_stack_t = t
        elif waits and all(DEVICE_SYNC.search(w) for w in waits):
            self._sync_stack_t = t   # the host waits for the GPU: only the GPU says whether it works
        return sample

    # ------------------------------------------------------------------ decisions
    def _is_ready(self, obs):
        cache = obs.get("weight_cache")
        if isinstance(cache, dict) and "http" not in obs:
            # the weight cache daemon serves no HTTP: ready is every GPU's ready file with a live pid
            return cache.get("healthy") is True
        http = obs.get("http")
        if not isinstance(http, dict):
            return False
        comp = http.get("completion")
        if isinstance(comp, dict) and comp.get("ok"):
            return True
        return (not self.settings.ready_requires_completion and http.get("health") == 200 and self._ready_line
                and not isinstance(comp, dict))

    def _ready_reason(self, obs):
        cache = obs.get("weight_cache")
        if isinstance(cache, dict) and "http" not in obs:
            return "weight cache ready on %s GPUs" % cache.get("ready")
        comp = (obs.get("http") or {}).get("completion") or {}
        if comp.get("ok"):
            return "a completion succeeded (%s ms)" % comp.get("ms")
        return "/health answered 200 after the ready line"

    def _judge_lines(self, t, dead, moved, evidence, progress):
        """Rule 1, and the dead process: `failed` when the process went (named after a lethal
        line of the last line_confirm_window_s, survived or not), or when the start froze after
        a lethal line; None otherwise. A sign of life after the line means it was survived."""
        s = self.settings
        h = self.lines.open
        if h is None and not dead and not self.lines.survived:
            return None
        if h is None or dead:
            life, frozen = [], None
        elif h.sticky:
            life, frozen = self._progress_after_line(h, moved), None
        else:
            life, frozen = self._after_line(t, h, moved)
        outcome, hyp = self.lines.judge(t, dead, life, frozen)
        if self.lines.survived:
            evidence["survived_lines"] = evidence.get("survived_lines", []) + [x.line[:300] for x in self.lines.survived[-3:]]
        if outcome == SURVIVED:
            evidence["survived_by"] = life or ["no confirmation within %s" % fmt_duration(s.line_confirm_window_s)]
        if outcome in (CONFIRMED_DEAD, CONFIRMED_FROZEN):
            words = "%s: %s" % (FAILURE_CLASSES[hyp.code].title, hyp.line[:240])
            if outcome == CONFIRMED_DEAD:
                evidence["rule"] = "rule 1: lethal line confirmed by the process exiting"
                words += "; %s" % dead
            elif hyp.sticky:
                quiet = t - (hyp.seen_t if hyp.progress_t is None else hyp.progress_t)
                evidence["rule"] = "rule 1: sticky line confirmed by no progress after it (%s, whatever the utilisation)" % (
                    fmt_duration(quiet))
                evidence["line_kind"] = "sticky"
                words += "; no progress for %s after it" % fmt_duration(quiet)
            else:
                evidence["rule"] = "rule 1: lethal line confirmed by the start freezing after it (%s)" % self._freeze_words(t)
            return Assessment(t, hyp.phase, "failed", hyp.code, words, evidence, progress)
        if not dead:
            return None
        evidence["rule"] = "dead process"
        last = self._survivable
        if last is not None and t - last[0] <= s.fatal_death_window_s:
            words = "%s, and the process went: %s; %s" % (FAILURE_CLASSES[last[1]].title, last[2][:200], dead)
            return Assessment(t, self.phases.phase, "failed", last[1], words, evidence, progress)
        return Assessment(t, self.phases.phase, "failed", "process_exited", dead, evidence, progress)

    def _progress_after_line(self, h, moved):
        """Rule 2's progress since a sticky line: the channels that moved this poll and an
        ordinary log line printed after it (the error's own traceback, the launcher's
        reaction and the server's teardown are part of the error); never CPU time or GPU
        utilisation."""
        progress = [m for m in moved if m not in ("log", "compile")]
        if self._ordinary_t is not None and self._ordinary_t > h.t:
            progress.append("log")
        return sorted(set(progress))

    def _after_line(self, t, h, moved):
        """(signs of life, frozen) of this poll for an open hypothesis. frozen is True for a
        stall signature (spinning GPUs, stopped processes, CPU idle with GPUs idle or unread,
        or unread GPUs and a CPU pinned at a steady rate), False when the poll shows work, and
        None when it says nothing (no fresh CPU reading)."""
        sig = self._signals(t)
        life = [m for m in moved if m not in ("log", "bar", "http")]
        if "bar" in moved or "http" in moved:
            life.append("progress")
        if self._life_log_t is not None and self._life_log_t > h.t:
            life.append("log")
        gpus = sig["gpus"]
        # a GPU going from idle to spinning is the freeze starting, not kernels finishing
        bursting = gpus is not None and gpus.between
        if bursting:
            life.append("gpu_burst")
        spinning = gpus is not None and not bursting and len(gpus.spinning) >= self.settings.spin_min_gpus
        if not sig["cpu_fresh"] and not sig["stopped"]:
            return sorted(set(life)), None
        if sig["stopped"] or spinning:
            return sorted(set(life)), True
        if sig["cpu_idle"]:
            return sorted(set(life)), sig["gpus"] is None or sig["gpus"].all_idle
        # the CPU is busy: work, unless the GPUs are unread, the rate is pinned and stacks show
        # every rank waiting on the host (busy-polling a collective). Rule 5: a pinned CPU with
        # no GPU reading and no stacks is never a freeze (a long CPU-bound phase looks the same).
        if sig["gpus"] is None and self._cpu_pinned() and self._ranks_wait_on_host(t):
            return sorted(set(life)), True
        life.append("cpu")
        return sorted(set(life)), False

    def _ranks_wait_on_host(self, t):
        """The latest stack sample, recent, has every rank in a host or collective wait."""
        if self._last_sample is None or self._last_stack_t is None or t - self._last_stack_t > self.settings.signal_stale_s:
            return False
        depth = self.settings.stack_collective_depth
        return all(frames and host_wait_frame(frames, depth) for frames in self._last_sample.values())

    def _cpu_pinned(self):
        prev, cur = self._prev_cpu_pct, self._cpu_pct
        if prev is None or cur is None or prev <= 0:
            return False
        # a rate that fell is work stopping (the rank that raised), not a sign of life
        return (cur - prev) / prev * 100.0 <= self.settings.cpu_pinned_change_pct

    def _freeze_words(self, t):
        sig = self._signals(t)
        if sig["stopped"]:
            return "every process stopped"
        if sig["gpus"] is not None and sig["gpus"].spinning:
            return "GPUs %s spinning, nothing else moving" % sig["gpus"].spinning
        if sig["cpu_idle"]:
            return "CPU %.0f%%, %s" % (self._cpu_pct, "GPUs idle" if sig["gpus"] is not None else "no GPU reading")
        return "CPU pinned at %.0f%% with nothing else moving, no GPU reading" % self._cpu_pct

    def _signals(self, t):
        """The hardware's view of this poll, shared by the line confirmation and the stall signatures."""
        s = self.settings
        cpu_known = self._cpu_pct is not None and self._cpu_t is not None and t - self._cpu_t <= s.signal_stale_s
        gpus = self._fresh_gpus(t)
        gpu_active = gpus is not None and gpus.active
        spin_gpus = gpus.spinning if gpus is not None and not gpu_active else []
        return {"cpu_known": cpu_known, "cpu_fresh": cpu_known and self._cpu_t == t,
                "cpu_idle": cpu_known and self._cpu_idle(gpus), "gpus": gpus, "gpu_active": gpu_active,
                "spin_gpus": spin_gpus, "spinning": len(spin_gpus) >= s.spin_min_gpus, "stopped": self._procs_stopped}

    def _cpu_idle(self, gpus):
        """Below the idle rate, or at the start's own floor while every GPU is read idle (rule 2:
        poll loops are not life). Without GPU readings only the idle rate counts (rule 5)."""
        if self._cpu_pct < self.settings.cpu_idle_pct:
            return True
        return gpus is not None and gpus.all_idle and self._cpu_floor.at_floor(self._cpu_pct, self._proc_count)

    def _judge_silence(self, t, evidence, progress):
        """Rules 3 and 5 (stall_signatures.py) on what the detector has seen since the last progress."""
        s = self.settings
        cpu_known = self._cpu_pct is not None and self._cpu_t is not None and t - self._cpu_t <= s.signal_stale_s
        seen = Silence(t=t, phase=self.phases.phase, last_progress_t=self._last_progress_t, cpu_pct=self._cpu_pct,
                       cpu_known=cpu_known, cpu_idle=cpu_known and self._cpu_idle(self._fresh_gpus(t)),
                       gpus=self._fresh_gpus(t), gpu_active_t=self._gpu_active_t,
                       gpu_run=self._gpu_run, smi_since=self._smi_since, cpu_burst_t=self._cpu_bursts.last_t,
                       frozen_s=self._frozen.held_s(t), stopped=self._procs_stopped, compilers=self._compilers,
                       stacks=self._stacks, last_stack_t=self._last_stack_t, work_stack_t=self._work_stack_t,
                       sync_stack_t=self._sync_stack_t)
        j = self.signatures.judge(seen, evidence)
        assessment = Assessment(t, seen.phase, j.verdict, j.reason_code, j.reason, evidence, progress, j.want_stacks)
        return self._decide(assessment) if j.verdict == "stalled" else assessment

    def _decide(self, assessment, dead=False):
        """Latch a final verdict, unless the observe-only gate holds it (rule 4): then only a
        dead process or the gate's own ceiling is final."""
        if assessment.verdict in ("stalled", "failed") and not dead and assessment.reason_code != CEILING_CODE \
                and self.gate.active:
            self._held = self.gate.hold(assessment)
            return assessment
        self._final = assessment
        return assessment

    def _still_held(self, assessment):
        """After a held verdict, a start that has not moved since stays `observing`."""
        held = self._held
        if held is None or assessment.verdict == OBSERVING or assessment.final:
            return assessment
        assessment.evidence["held_verdict"] = held.evidence["held_verdict"]
        assessment.evidence["rule"] = held.evidence["rule"]
        assessment.verdict, assessment.reason_code, assessment.reason = held.verdict, held.reason_code, held.reason
        return assessment

    def _moving_words(self, moved):
        if not moved:
            return "first observation"
        shard_bar = self._bars.get("shards")
        words = ", ".join(sorted(set(moved)))
        if shard_bar and self.phases.phase == "weight_load":
            return "moving (%s); shards %d/%s" % (words, shard_bar[0], "?" if shard_bar[1] is None else "%d" % shard_bar[1])
        return "moving: %s" % words

    def _progress(self, t):
        gpus = self._fresh_gpus(t)
        shard_bar = self._bars.get("shards")
        http = None
        if self._http is not None:
            h = self._http.get("health")
            http = "refused" if h is None else h
        return {
            "shards_done": None if shard_bar is None else int(shard_bar[0]),
            "shards_total": None if shard_bar is None or shard_bar[1] is None else int(shard_bar[1]),
            "gpu_count": None if gpus is None else gpus.count,
            "gpu_mem_used_mib": None if gpus is None else gpus.mem_used_mib,
            "gpu_mem_total_mib": None if gpus is None else gpus.mem_total_mib,
            "gpu_util_max_pct": None if gpus is None else gpus.util_max_pct,
            "read_bps": self._read_bps,
            "read_bytes": None if self._io is None else self._io[1],
            "write_bps": self._write_bps,
            "cpu_pct": None if self._cpu_pct is None else round(self._cpu_pct, 1),
            "http": http,
            "elapsed_s": t,
        }
