"""Read GPUs and their compute processes with nvidia-smi (the two query forms in
docs/architecture.md). Parsing is pure; `read_gpus` is the IO edge and never raises:
a missing binary, a hang or an error gives no data and a reason."""
from dataclasses import dataclass

from ansible_collections.sglang_ops.serving.plugins.module_utils.host.bounded_run import (
    bounded_run, find_executable)

# power.limit last: a reading from a tool or board without it (six columns) stays valid.
GPU_QUERY = ["--query-gpu=index,uuid,memory.used,memory.total,utilization.gpu,power.draw,power.limit",
             "--format=csv,noheader,nounits"]
APPS_QUERY = ["--query-compute-apps=pid,gpu_uuid,used_memory", "--format=csv,noheader,nounits"]
# Where drivers put the binary when it is not on PATH (container runtimes, the lent GPU host).
EXTRA_DIRS = ("/usr/local/nvidia/bin", "/usr/bin", "/usr/local/bin")


@dataclass
class GpuReading:
    index: int
    uuid: str
    mem_used_mib: object  # int, or None when the driver prints [N/A]
    mem_total_mib: object
    util_pct: object
    power_w: object = None
    power_limit_w: object = None  # the board's enforced limit: what a draw is a share of

    def to_obs(self):
        d = {"index": self.index, "mem_used_mib": self.mem_used_mib,
             "mem_total_mib": self.mem_total_mib, "util_pct": self.util_pct}
        if self.power_w is not None:
            d["power_w"] = self.power_w
        if self.power_limit_w is not None:
            d["power_limit_w"] = self.power_limit_w
        return d


@dataclass
class GpuProcess:
    pid: int
    gpu: object  # GPU index, or None when the uuid matches no GPU
    mem_mib: object
    gpu_uuid: str = ""   # not in the observation (trace format): the restart's holder check

    def to_obs(self):
        return {"pid": self.pid, "gpu": self.gpu, "mem_mib": self.mem_mib}


@dataclass
class GpuSnapshot:
    gpus: object = None        # list of GpuReading, or None when not read
    gpu_procs: object = None   # list of GpuProcess, or None when not read
    missing: dict = None       # field -> reason


def _number(text):
    """'73.52' -> 73.52, '4096' -> 4096, '[N/A]' / '[Not Supported]' / '' -> None."""
    t = text.strip()
    if not t or t.startswith("[") or t.upper() in ("N/A", "NA"):
        return None
    try:
        v = float(t)
    except ValueError:
        return None
    return int(v) if v.is_integer() else v


def _rows(text):
    for line in text.splitlines():
        line = line.strip()
        if not line or line.lower().startswith("no running"):
            continue
        yield [c.strip() for c in line.split(",")]


def _column(cols, i):
    return _number(cols[i]) if len(cols) > i else None


def parse_gpu_query(text):
    """Output of GPU_QUERY -> list of GpuReading; malformed rows are skipped."""
    gpus = []
    for cols in _rows(text):
        if len(cols) < 5:
            continue
        index = _number(cols[0])
        if not isinstance(index, int):
            continue
        gpus.append(GpuReading(index=index, uuid=cols[1], mem_used_mib=_number(cols[2]),
                               mem_total_mib=_number(cols[3]), util_pct=_number(cols[4]),
                               power_w=_column(cols, 5), power_limit_w=_column(cols, 6)))
    return gpus


def parse_apps_query(text, gpus):
    """Output of APPS_QUERY -> list of GpuProcess, GPU uuid mapped to its index."""
    index_by_uuid = {g.uuid: g.index for g in gpus}
    procs = []
    for cols in _rows(text):
        if len(cols) < 3:
            continue
        pid = _number(cols[0])
        if not isinstance(pid, int):
            continue
        procs.append(GpuProcess(pid=pid, gpu=index_by_uuid.get(cols[1]), mem_mib=_number(cols[2]),
                                gpu_uuid=cols[1]))
    return procs


def _failure_reason(res, what):
    if res.missing:
        return "nvidia-smi not runnable: %s" % res.stderr.strip()
    if res.timed_out:
        return "nvidia-smi %s timed out" % what
    detail = (res.stderr.strip() or res.stdout.strip()).splitlines()
    return "nvidia-smi %s exited %s: %s" % (what, res.rc, detail[0] if detail else "no output")


def read_gpus(timeout_s=5.0, binary="nvidia-smi", with_apps=True):
    """Both query forms; each field absent with a reason when it cannot be read."""
    missing = {}
    exe = find_executable(binary, EXTRA_DIRS)
    if exe is None:
        reason = "nvidia-smi not found (PATH, %s)" % ", ".join(EXTRA_DIRS)
        return GpuSnapshot(missing={"gpus": reason, "gpu_procs": reason})
    res = bounded_run([exe] + GPU_QUERY, timeout_s)
    if not res.ok:
        reason = _failure_reason(res, "--query-gpu")
        # After a hang, asking again for the apps would only hang a second time.
        return GpuSnapshot(missing={"gpus": reason, "gpu_procs": "skipped: " + reason})
    gpus = parse_gpu_query(res.stdout)
    if not gpus:
        missing["gpus"] = "nvidia-smi listed no GPU"
    snap = GpuSnapshot(gpus=gpus if gpus else None, missing=missing)
    if with_apps:
        apps = bounded_run([exe] + APPS_QUERY, timeout_s)
        if apps.ok:
            snap.gpu_procs = parse_apps_query(apps.stdout, gpus)
        else:
            missing["gpu_procs"] = _failure_reason(apps, "--query-compute-apps")
    return snap
