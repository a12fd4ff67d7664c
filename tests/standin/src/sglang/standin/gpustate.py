"""The SGLang stand-in's "GPU": per-process memory records in the state directory.

Each process that holds stand-in GPU memory writes state_dir/holders/<pid>-gpu<i>.json
({pid, start_ticks, gpu, mem_mib, util: [lo, hi], updated}). A reader (the nvidia-smi
stand-in) counts a record only while that process is alive (same pid and start time,
not a zombie): memory is released when the holder dies, and a stopped holder
(state T) keeps its memory but shows 0 % utilisation.
"""
import hashlib
import json
import os
import time
from dataclasses import dataclass

from sglang.standin.procs import proc_start_ticks, proc_state


def holders_dir(state_dir):
    return os.path.join(state_dir, "holders")


def gpu_uuid(index):
    h = hashlib.sha256(f"sglang-standin-gpu-{os.uname().nodename}-{index}".encode()).hexdigest()
    return f"GPU-{h[0:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def _write_atomic(path, data):
    tmp = f"{path}.{os.getpid()}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(json.dumps(data))
    os.chmod(tmp, 0o644)
    os.replace(tmp, path)


class Holder:
    """This process's hold on one stand-in GPU."""

    def __init__(self, state_dir, gpu, owner):
        self.owner = owner
        self.dir = holders_dir(state_dir)
        os.makedirs(self.dir, exist_ok=True)
        self.pid = os.getpid()
        self.gpu = gpu
        self.path = os.path.join(self.dir, f"{self.pid}-gpu{gpu}.json")
        self.mem_mib = 0
        self.util = (0, 2)

    def set(self, mem_mib=None, util=None):
        if mem_mib is not None:
            self.mem_mib = int(mem_mib)
        if util is not None:
            self.util = (int(util[0]), int(util[1]))
        _write_atomic(self.path, {
            "pid": self.pid, "owner": self.owner, "start_ticks": proc_start_ticks(self.pid), "gpu": self.gpu,
            "mem_mib": self.mem_mib, "util": list(self.util), "updated": time.time()})


@dataclass(frozen=True)
class HeldMemory:
    pid: int
    owner: int
    gpu: int
    mem_mib: int
    util_pct: int
    stopped: bool


@dataclass(frozen=True)
class GpuView:
    index: int
    uuid: str
    mem_used_mib: int
    mem_total_mib: int
    util_pct: int
    power_w: float


def _jitter(lo, hi, salt):
    if hi <= lo:
        return lo
    bucket = int(time.time())
    h = int(hashlib.md5(f"{salt}-{bucket}".encode()).hexdigest()[:8], 16)
    return lo + h % (hi - lo + 1)


def read_holders(state_dir):
    held = []
    d = holders_dir(state_dir)
    try:
        names = sorted(os.listdir(d))
    except FileNotFoundError:
        return held
    for name in names:
        if not name.endswith(".json"):
            continue
        path = os.path.join(d, name)
        try:
            with open(path, encoding="utf-8") as f:
                rec = json.load(f)
        except (OSError, ValueError):
            continue
        pid = int(rec["pid"])
        state = proc_state(pid)
        if state is None or state in "ZX" or proc_start_ticks(pid) != rec.get("start_ticks"):
            try:
                os.unlink(path)
            except OSError:
                pass
            continue
        stopped = state in "Tt"
        lo, hi = rec.get("util", [0, 0])
        util = 0 if stopped else _jitter(int(lo), int(hi), f"{pid}-{rec['gpu']}")
        held.append(HeldMemory(pid=pid, owner=int(rec.get("owner", pid)), gpu=int(rec["gpu"]), mem_mib=int(rec["mem_mib"]),
                               util_pct=util, stopped=stopped))
    return held


def gpu_views(settings, held):
    views = []
    for i in range(settings.gpus):
        mine = [h for h in held if h.gpu == i]
        used = min(settings.gpu_mem_mib, settings.gpu_idle_mem_mib + sum(h.mem_mib for h in mine))
        util = max([h.util_pct for h in mine] or [_jitter(0, 0, i)])
        span = settings.gpu_power_limit_w - settings.gpu_idle_power_w
        power = settings.gpu_idle_power_w + span * util / 100.0 + (hash((i, int(time.time()))) % 300) / 100.0
        views.append(GpuView(index=i, uuid=gpu_uuid(i), mem_used_mib=used,
                             mem_total_mib=settings.gpu_mem_mib, util_pct=util, power_w=power))
    return views
