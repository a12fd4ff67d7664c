"""Builders for observations in the trace format, so each test states only what matters."""
import pytest

from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.detector import Detector
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.detector_settings import DetectorSettings


class Start:
    """A synthetic start: call poll() with what changed; counters accumulate like the probe's."""

    def __init__(self, gpus=8, poll_s=10.0, settings=None, observe_only=None, **overrides):
        settings = (settings or DetectorSettings()).with_overrides(overrides)
        self.det = Detector(settings, observe_only=observe_only)
        self.gpus, self.poll_s = gpus, poll_s
        self.t = 0.0
        self.cpu_s = 0.0
        self.read_bytes = 0
        self.write_bytes = 0
        self.mem = [1100] * gpus
        self.util = [1] * gpus
        self.power = None         # watts per GPU, or None: not reported
        self.comm = {"python3": gpus + 2}
        self.unit = {"active": "active", "sub": "running", "main_pid": 4242, "restarts": 0}
        self.http = {"health": None, "completion": None}

    def obs(self, log=(), cpu_pct=800.0, read_bps=0.0, write_bps=0.0, drop=(), extra=None, dt=None):
        """The next observation, `dt` (default poll_s) after the last. `log` items are messages
        (journal time 1 s before the observation) or whole records (dicts with "t")."""
        dt = self.poll_s if dt is None else dt
        self.t += dt
        self.cpu_s += cpu_pct / 100.0 * dt
        self.read_bytes += int(read_bps * dt)
        self.write_bytes += int(write_bps * dt)
        o = {"t": self.t, "unit": dict(self.unit),
             "procs": {"count": sum(self.comm.values()), "cpu_s": round(self.cpu_s, 2), "read_bytes": self.read_bytes,
                       "write_bytes": self.write_bytes, "comm": dict(self.comm)},
             "gpus": [dict({"index": i, "mem_used_mib": self.mem[i], "mem_total_mib": 97887, "util_pct": self.util[i]},
                           **({} if self.power is None else {"power_w": self.power[i]}))
                      for i in range(self.gpus)],
             "log": [m if isinstance(m, dict) else {"t": self.t - 1, "msg": m} for m in log],
             "http": dict(self.http)}
        for key in drop:
            o.pop(key, None)
        o.update(extra or {})
        return o

    def poll(self, *args, **kwargs):
        return self.det.observe(self.obs(*args, **kwargs))

    def polls(self, seconds, **kwargs):
        """Poll for `seconds`; the list of assessments."""
        out = []
        for dummy in range(int(round(seconds / self.poll_s))):
            out.append(self.poll(**kwargs))
        return out

    def loaded(self):
        """Init, load (one blob record with the finished bar) and the start of post-load."""
        self.poll(log=["[2026-11-29 10:00:00 TP0] Init torch distributed begin."])
        self.poll(log=["[2026-11-29 10:00:10 TP0] Load weight begin. avail mem=94.52 GB"])
        for step in range(1, 5):
            self.mem = [1100 + 18000 * step] * self.gpus
            self.poll(read_bps=2e9)
        frames = "".join("\rLoading safetensors checkpoint shards: %3d%% Completed | %d/64 [00:00<00:00]" % (n * 100 // 64, n)
                         for n in range(65))
        return self.poll(log=[frames])


@pytest.fixture
def start():
    return Start
