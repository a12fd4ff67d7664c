"""Where a start is: the phase model fed by log markers, bars and HTTP answers.

Phases only move forward, so a late duplicate line from another rank cannot pull the
start back. DeepGEMM JIT is the exception: SGLang runs it wherever a kernel is first
needed, so it may be entered from, and left to, any phase before the HTTP server.
"""
PHASES = ("starting", "distributed_init", "weight_load", "post_load", "kv_cache",
          "jit_compile", "cuda_graph", "http_server", "warmup", "ready")
_ORDER = {p: i for i, p in enumerate(PHASES)}
_FLOATING = "jit_compile"


def phase_rank(phase):
    """Sort key: a start's phases in the order a start goes through them, unknown ones last."""
    return _ORDER.get(phase, len(PHASES))


class PhaseModel:
    def __init__(self):
        self.phase = "starting"
        self.since_t = 0.0

    def enter(self, phase, t):
        """Move to `phase` if that is forward (or a JIT detour); True when it moved."""
        if phase is None or phase == self.phase:
            return False
        cur, new = _ORDER[self.phase], _ORDER[phase]
        http = _ORDER["http_server"]
        forward = new > cur
        if phase == _FLOATING:
            forward = cur < http
        elif self.phase == _FLOATING:
            forward = new > _ORDER["post_load"]
        if not forward:
            return False
        self.phase, self.since_t = phase, t
        return True

    def on_bar(self, kind, done, t):
        if kind == "shards":
            return self.enter("post_load" if done else "weight_load", t)
        if kind in ("cuda_graph", "jit_compile"):
            return self.enter(kind, t)
        return False

    def on_http(self, answered, t):
        if answered:
            return self.enter("http_server", t)
        return False
