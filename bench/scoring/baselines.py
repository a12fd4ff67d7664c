"""The reference watchers the detector must beat, replayed on the same traces.

  deadline SECONDS  a fixed start deadline (Kubernetes startupProbe, systemd
                    TimeoutStartSec, an Ansible until/retries loop): stalled once t >= SECONDS
  silence SECONDS   the operator's rule of thumb: stalled after SECONDS without a journal line
  activity SECONDS  a stall deadline rather than a total one: stalled after SECONDS in which
                    no journal line arrived, GPU memory did not change by 64 MiB or more and
                    the unit's cgroup read under 1 MB/s
All three: ready on a completion answered, failed when the unit is not running. Each
returns the replay contract's verdict dict.
"""
GPU_MEM_STEP_MIB = 64
READ_RATE_BYTES_PER_S = 1e6
NOT_RUNNING_ACTIVE = ("failed", "inactive")
NOT_RUNNING_SUB = ("auto-restart", "dead", "failed")


class _Activity:
    """When the start last showed a sign of life: a journal line, or (activity only)
    GPU memory or storage reads moving."""

    def __init__(self):
        self.last_log_t = self.last_active_t = 0.0
        self.prev_t = self.prev_mem_mib = self.prev_read_bytes = None

    def see(self, obs):
        t = obs["t"]
        if obs.get("log"):
            self.last_log_t = self.last_active_t = t
        mem_mib = sum(g.get("mem_used_mib", 0) for g in obs["gpus"]) if obs.get("gpus") else None
        read_bytes = (obs.get("procs") or {}).get("read_bytes")
        if self.prev_t is not None and (self._memory_moved(mem_mib) or self._reading(t, read_bytes)):
            self.last_active_t = t
        self.prev_t = t
        if mem_mib is not None:
            self.prev_mem_mib = mem_mib
        if read_bytes is not None:
            self.prev_read_bytes = read_bytes

    def _memory_moved(self, mem_mib):
        return mem_mib is not None and self.prev_mem_mib is not None and abs(mem_mib - self.prev_mem_mib) >= GPU_MEM_STEP_MIB

    def _reading(self, t, read_bytes):
        return (read_bytes is not None and self.prev_read_bytes is not None and t > self.prev_t
                and (read_bytes - self.prev_read_bytes) / (t - self.prev_t) >= READ_RATE_BYTES_PER_S)


def _verdict(verdict, t, reason, phase=None):
    return {"verdict": verdict, "t": t, "phase": phase, "reason": reason}


def _gave_up(kind, limit_s, t, activity):
    if kind == "deadline":
        return t >= limit_s and "deadline"
    if kind == "silence":
        return t - activity.last_log_t >= limit_s and "log silence"
    return t - activity.last_active_t >= limit_s and "no activity"


KINDS = ("deadline", "silence", "activity")


def watch(kind, limit_s, observations):
    """The verdict of the reference watcher `kind` with its limit of `limit_s` seconds."""
    if kind not in KINDS:
        raise ValueError("unknown reference watcher %r (known: %s)" % (kind, ", ".join(KINDS)))
    activity, t = _Activity(), None
    for obs in observations:
        t = obs["t"]
        if ((obs.get("http") or {}).get("completion") or {}).get("ok"):
            return _verdict("ready", t, "completion ok", "ready")
        unit = obs.get("unit") or {}
        if unit.get("active") in NOT_RUNNING_ACTIVE or unit.get("sub") in NOT_RUNNING_SUB:
            return _verdict("failed", t, "unit not running")
        activity.see(obs)
        reason = _gave_up(kind, limit_s, t, activity)
        if reason:
            return _verdict("stalled", t, reason)
    return _verdict("undecided", t, "end of trace")
