"""The processes holding GPU memory, each with whether it is in a unit's cgroup, and every
GPU's memory: what the restart checks around a stop (its own leftovers, other jobs, memory
back to baseline). Built from one nvidia-smi snapshot (nvidia_smi.read_gpus)."""
from ansible_collections.sglang_ops.serving.plugins.module_utils.host import cgroup, procfs


def holders_of(snap, service, proc_root="/proc", expected_units=()):
    """GpuSnapshot -> {"available", "error", "gpus": [{index, uuid, mem_used_mib,
    mem_total_mib}], "holders": [{pid, gpu_uuid, mem_mib, in_unit, expected, cmdline}]};
    available is false, with the reason in error, when nvidia-smi could not answer.
    expected_units: units whose GPU memory the service expects beside its own (the weight
    cache daemon's unit, `<unit>-weights`): their holders are `expected`, never orphans or
    foreign, and a stop of the service waits for its own memory only."""
    if snap.gpu_procs is None:
        missing = snap.missing or {}
        why = missing.get("gpu_procs") or missing.get("gpus") or "nvidia-smi gave no process list"
        return {"available": False, "error": why.replace("skipped: ", "", 1), "gpus": [], "holders": []}
    gpus = [{"index": g.index, "uuid": g.uuid, "mem_used_mib": g.mem_used_mib, "mem_total_mib": g.mem_total_mib}
            for g in snap.gpus or ()]
    holders = [{"pid": p.pid, "gpu_uuid": p.gpu_uuid, "mem_mib": p.mem_mib,
                "in_unit": cgroup.in_unit(p.pid, service, proc_root),
                "expected": any(cgroup.in_unit(p.pid, unit, proc_root) for unit in expected_units),
                "cmdline": procfs.read_cmdline(p.pid, proc_root) or ""} for p in snap.gpu_procs]
    return {"available": True, "error": "", "gpus": gpus, "holders": holders}
