"""The supervisor's own cost, recorded with each poll of a start: its CPU (with the probe's
commands: nvidia-smi, py-spy) from one poll to the next and in all, and its peak memory."""
import resource


class SupervisorCost:
    """CPU seconds since this object was made, and per poll."""

    def __init__(self):
        self.cpu0 = _cpu_s()
        self.cpu_last = None
        self.cpu_max_poll = 0.0

    def sample(self, polls):
        """The cost so far after polls polls; read while the server runs (its CPU would
        count once it is reaped)."""
        now = _cpu_s()
        poll_cpu = now - (self.cpu_last if self.cpu_last is not None else self.cpu0)
        self.cpu_last = now
        self.cpu_max_poll = max(self.cpu_max_poll, poll_cpu)
        polls = max(1, polls)
        return {"cpu_s": round(now - self.cpu0, 3), "cpu_s_per_poll": round((now - self.cpu0) / polls, 4),
                "cpu_s_last_poll": round(poll_cpu, 4), "cpu_s_max_poll": round(self.cpu_max_poll, 4),
                "max_rss_mib": round(_peak_rss_kib() / 1024.0, 1)}


def _peak_rss_kib():
    """This process's peak resident memory: VmHWM, of this program only (getrusage's
    ru_maxrss keeps the peak of the process image before exec, e.g. a large parent's)."""
    try:
        with open("/proc/self/status", encoding="ascii", errors="replace") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def _cpu_s():
    own = resource.getrusage(resource.RUSAGE_SELF)
    kids = resource.getrusage(resource.RUSAGE_CHILDREN)   # the probe's commands, reaped each poll
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime
