"""The detector's view of the unit's processes (the probe's `procs`), poll by poll. Pure, no I/O.

From the cgroup's counters: the CPU rate and its bursts, the start's learned CPU floor and the
frozen CPU clock (life_signs.py); the disk channels; the processes coming and going, stopped
(state T) or compiling. The `children`, `disk_read`, `disk_write` and `compile` channels move
here; CPU alone is never progress.
"""
import re

from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.life_signs import (
    CpuBursts, CpuFloor, FrozenClock, children_changed)

COMPILER_COMMS = re.compile(r"^(cc1plus|cc1|cicc|nvcc|ptxas|nvlink|fatbinary|cudafe\+\+|gcc|g\+\+|c\+\+|cc|clang\+\+|clang|ld|ld\.lld|as|ninja|make)$")
STOPPED_STATES = ("T", "t")


class ProcessReadings:
    """The unit's CPU, disk and process readings, and the tests the rules put to them."""

    def __init__(self, settings):
        s = self.settings = settings
        self.frozen = FrozenClock(s.frozen_cpu_pct)
        self.cpu_bursts = CpuBursts(s.cpu_burst_min_pct, s.cpu_burst_floor_share_pct)
        self._cpu_floor = CpuFloor(s.cpu_floor_max_per_process_pct, s.cpu_floor_margin_pct)
        self._proc_count = 1
        self._procs = None        # the last procs reading (children coming and going)
        self._cpu = None          # (t, cpu_s)
        self._io = None           # (t, read_bytes, write_bytes)
        self.prev_cpu_pct = None
        self.cpu_pct = None
        self.cpu_t = None
        self.read_bps = None
        self.write_bps = None
        self.stopped = False      # every process of the unit in state T
        self.compilers = []       # compiler processes in the cgroup at the last sample

    @property
    def read_bytes(self):
        return None if self._io is None else self._io[1]

    def read(self, procs, t, moved, first):
        """Take in one `procs` reading; the channels it moved go into `moved`."""
        if not isinstance(procs, dict):
            return
        if not first and children_changed(self._procs, procs):
            moved.append("children")
        self._procs = procs
        count = procs.get("count")
        self._read_cpu(procs.get("cpu_s"), count if isinstance(count, int) and count > 0 else 1, t)
        self._read_io(procs.get("read_bytes"), procs.get("write_bytes"), t, moved)
        states = procs.get("states")
        if isinstance(states, dict):
            count = sum(n for n in states.values() if isinstance(n, int))
            self.stopped = count > 0 and sum(states.get(k, 0) or 0 for k in STOPPED_STATES) == count
        else:
            self.stopped = False
        comm = procs.get("comm")
        if isinstance(comm, dict):
            compilers = sorted(c for c, n in comm.items() if n and COMPILER_COMMS.match(c))
            self.compilers = compilers
            if compilers and not first and self.cpu_pct is not None and self.cpu_pct >= self.settings.cpu_idle_pct:
                moved.append("compile")

    def _read_cpu(self, cpu_s, processes, t):
        """The CPU rate since the last reading (percent of one core), its bursts, floor and frozen clock."""
        self.frozen.update(t, cpu_s, processes)
        if not isinstance(cpu_s, (int, float)):
            return
        if self._cpu is not None and cpu_s >= self._cpu[1] and t > self._cpu[0]:
            self.prev_cpu_pct = self.cpu_pct
            self.cpu_pct = (cpu_s - self._cpu[1]) / (t - self._cpu[0]) * 100.0
            self.cpu_bursts.update(t, self.cpu_pct)
            self._proc_count = processes
            self._cpu_floor.update(self.cpu_pct, self._proc_count)
            self.cpu_t = t
        self._cpu = (t, cpu_s)

    def _read_io(self, rb, wb, t, moved):
        """The storage byte rates since the last reading; `disk_read` / `disk_write` at io_noise_bytes_per_s or more."""
        if not isinstance(rb, int) or not isinstance(wb, int):
            return
        if self._io is not None and t > self._io[0] and rb >= self._io[1] and wb >= self._io[2]:
            dt = t - self._io[0]
            self.read_bps = (rb - self._io[1]) / dt
            self.write_bps = (wb - self._io[2]) / dt
            if self.read_bps >= self.settings.io_noise_bytes_per_s:
                moved.append("disk_read")
            if self.write_bps >= self.settings.io_noise_bytes_per_s:
                moved.append("disk_write")
        self._io = (t, rb, wb)

    def cpu_known(self, t):
        """A CPU reading within signal_stale_s."""
        return self.cpu_pct is not None and self.cpu_t is not None and t - self.cpu_t <= self.settings.signal_stale_s

    def cpu_idle(self, gpus):
        """Below the idle rate, or at the start's own floor while every GPU is read idle (rule 2:
        poll loops are not life). Without GPU readings only the idle rate counts (rule 5)."""
        if self.cpu_pct < self.settings.cpu_idle_pct:
            return True
        return gpus is not None and gpus.all_idle and self._cpu_floor.at_floor(self.cpu_pct, self._proc_count)

    def cpu_pinned(self):
        """The rate held or rose within cpu_pinned_change_pct since the reading before."""
        prev, cur = self.prev_cpu_pct, self.cpu_pct
        if prev is None or cur is None or prev <= 0:
            return False
        # a rate that fell is work stopping (the rank that raised), not a sign of life
        return (cur - prev) / prev * 100.0 <= self.settings.cpu_pinned_change_pct
