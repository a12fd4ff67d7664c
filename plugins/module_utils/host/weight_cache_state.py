"""Whether the weight cache daemon is healthy on this host: every GPU the unit uses has
its ready file, and the pid each file names is a live process (SGLang's own test:
sglang/srt/weight_cache/protocol.py). The file's format and path are
domain/weight_cache.py; this module reads the files and /proc.
"""
import os
from dataclasses import dataclass, field

from ansible_collections.sglang_ops.serving.plugins.module_utils.host import nvidia_smi, procfs
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain import weight_cache

_DEAD_STATES = ("Z", "X")   # a zombie holds no GPU memory and serves nothing
_READY_FILE_MAX_BYTES = 64 * 1024


@dataclass(frozen=True)
class DaemonHealth:
    healthy: bool
    pids: dict = field(default_factory=dict)      # nvidia-smi uuid -> live daemon pid
    missing: tuple = ()                            # nvidia-smi uuids without a live daemon
    reason: str = ""                               # why not healthy ('' when healthy)
    configs: dict = field(default_factory=dict)   # nvidia-smi uuid -> the ready file's config


def pid_alive(pid, proc_root="/proc"):
    """A process with this pid exists and is not a zombie."""
    if not isinstance(pid, int) or pid <= 0:
        return False
    stat = procfs.read_stat(pid, proc_root)
    return stat is not None and stat.state not in _DEAD_STATES


def read_ready_file(path):
    """The ReadyFile at path, or None when it does not exist or cannot be read."""
    try:
        with open(path, "rb") as f:
            return weight_cache.parse_ready_file(f.read(_READY_FILE_MAX_BYTES).decode("utf-8", errors="replace"))
    except OSError:
        return None


def daemon_health(ready_template, gpu_uuids, proc_root="/proc"):
    """DaemonHealth of the daemons serving gpu_uuids (nvidia-smi's uuids, `GPU-` prefix or
    not). Never raises for what it finds on the host; ValueError for a template without
    {device_uuid} or no GPUs at all (a settings fault, not a host state)."""
    uuids = list(gpu_uuids or ())
    if not uuids:
        raise ValueError("daemon_health needs the uuids of the GPUs the unit uses")
    pids, configs, problems = {}, {}, []
    for uuid in uuids:
        path = weight_cache.ready_path(ready_template, uuid)
        ready = read_ready_file(path)
        if ready is None:
            problems.append((uuid, "no ready file %s" % path))
        elif ready.pid is None:
            problems.append((uuid, "ready file %s names no pid" % path))
        elif not pid_alive(ready.pid, proc_root):
            problems.append((uuid, "daemon pid %s of %s is gone" % (ready.pid, path)))
        else:
            pids[uuid] = ready.pid
            configs[uuid] = ready.config
    if not problems:
        return DaemonHealth(True, pids, (), "", configs)
    missing = tuple(uuid for uuid, dummy_why in problems)
    reason = "%d of %d GPUs without a live weight cache daemon: %s" % (
        len(problems), len(uuids), "; ".join(why for dummy_uuid, why in problems[:3]))
    if len(problems) > 3:
        reason += "; ..."
    return DaemonHealth(False, pids, missing, reason, configs)


def unit_gpu_uuids(readings, cuda_visible_devices=None):
    """The nvidia-smi uuids of the GPUs a unit uses: those CUDA_VISIBLE_DEVICES names (by
    index or by uuid, in its order), all of readings when it is unset. ValueError when it
    names a GPU nvidia-smi does not report (the daemons could never all be ready)."""
    by_index = {r.index: r.uuid for r in readings}
    if cuda_visible_devices is None or not cuda_visible_devices.strip():
        return [by_index[i] for i in sorted(by_index)]
    by_uuid = {device_uuid: device_uuid for device_uuid in by_index.values()}
    chosen = []
    for item in (x.strip() for x in cuda_visible_devices.split(",")):
        if item.isdigit() and int(item) in by_index:
            chosen.append(by_index[int(item)])
        elif item in by_uuid or "GPU-" + item in by_uuid:
            chosen.append(by_uuid.get(item) or by_uuid["GPU-" + item])
        else:
            raise ValueError("CUDA_VISIBLE_DEVICES=%s names %r, a GPU nvidia-smi does not report" % (cuda_visible_devices, item))
    return chosen


def read_unit_gpu_uuids(nvidia_smi_binary="nvidia-smi", env=None, timeout_s=10.0):
    """(uuids, why): the GPUs this unit uses (unit_gpu_uuids over one nvidia-smi reading);
    ([], why) when nvidia-smi cannot answer or CUDA_VISIBLE_DEVICES names an unknown GPU."""
    snap = nvidia_smi.read_gpus(timeout_s, nvidia_smi_binary, with_apps=False)
    if not snap.gpus:
        return [], (snap.missing or {}).get("gpus") or "nvidia-smi reported no GPU"
    try:
        return unit_gpu_uuids(snap.gpus, (env if env is not None else os.environ).get("CUDA_VISIBLE_DEVICES")), ""
    except ValueError as e:
        return [], str(e)
