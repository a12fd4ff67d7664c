"""The supervisor's side of SGLang's weight cache daemon (model/weight_cache.py): which
GPUs the unit uses, whether every one has a live daemon (host/weight_cache_state.py),
that state as the observation's `weight_cache` field, and the bounded wait of an engine
for its daemon before it starts (an engine started while the daemon still loads would
fall back to a disk load of its own)."""
from ansible_collections.sglang_ops.serving.plugins.module_utils.host import weight_cache_state

# An engine with no start timeout of its own waits this long for its daemon at most: the
# daemons' own bound on their load (sglang.srt.weight_cache.daemon --timeout).
DEFAULT_WAIT_S = 1800.0


class WeightCacheWatch:
    def __init__(self, ready_template, nvidia_smi="nvidia-smi", env=None,
                 read_uuids=weight_cache_state.read_unit_gpu_uuids, health=weight_cache_state.daemon_health):
        self.ready_template = ready_template
        self.nvidia_smi, self.env = nvidia_smi, env
        self._read_uuids, self._health = read_uuids, health
        self.uuids = []
        self.last = None

    def check(self):
        """DaemonHealth now; the unit's GPUs are read once, when first known."""
        if not self.uuids:
            self.uuids, why = self._read_uuids(self.nvidia_smi, self.env)
            if not self.uuids:
                self.last = weight_cache_state.DaemonHealth(False, reason="the unit's GPUs are not known: %s" % why)
                return self.last
        self.last = self._health(self.ready_template, self.uuids)
        return self.last

    def observation(self, health=None):
        """The trace's `weight_cache` field: {"healthy", "gpus", "ready", "reason"}."""
        health = health or self.last or self.check()
        return {"healthy": health.healthy, "gpus": len(self.uuids), "ready": len(health.pids),
                "reason": health.reason}

    def wait_healthy(self, timeout_s, poll_s, sleep, clock, on_wait):
        """Check until healthy or timeout_s passed -> (DaemonHealth, waited_s). on_wait(health,
        waited_s) after each unhealthy check; sleep(s) may raise to end the wait (a stop)."""
        began = clock()
        while True:
            health = self.check()
            waited = clock() - began
            if health.healthy or waited >= timeout_s:
                return health, waited
            on_wait(health, waited)
            sleep(min(poll_s, max(0.1, timeout_s - waited)))


def ready_words(health):
    return "weight cache ready on %d GPUs" % len(health.pids)
