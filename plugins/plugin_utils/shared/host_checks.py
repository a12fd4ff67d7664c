"""The restart's rules over what the probe reads of the host (sglang_probe's unit_state,
gpu_holders): which GPU holders are the unit's, its leftovers or another job's, when the
GPUs count as released, when a stop is over. Pure, so the preflight rules are unit-tested.
"""
from dataclasses import dataclass, field

from ansible_collections.sglang_ops.serving.plugins.module_utils.domain import sglang_dialect

NVIDIA_SMI_TIMEOUT_S = 20     # each nvidia-smi call of a GPU holder read


@dataclass
class Holder:
    pid: int
    gpu_uuid: str
    mem_mib: object
    in_unit: bool
    cmdline: str
    kind: str = ""  # unit | weight_cache | orphan | foreign (classify_holders)

    def describe(self):
        cmd = self.cmdline.strip() or "(command line unreadable)"
        return "PID %d (%s MiB on %s): %s" % (self.pid, self.mem_mib, self.gpu_uuid, cmd)


@dataclass
class GpuCheck:
    available: bool
    error: str = ""
    holders: list = field(default_factory=list)
    gpus: list = field(default_factory=list)  # (index, uuid, used_mib, total_mib)

    def of_kind(self, kind):
        return [h for h in self.holders if h.kind == kind]


def gpu_check(gpu_holders):
    """The probe's RV(gpu_holders) -> GpuCheck (kinds not yet assigned: classify_holders)."""
    if not gpu_holders.get("available"):
        return GpuCheck(available=False, error=gpu_holders.get("error") or "nvidia-smi did not answer")
    return GpuCheck(
        available=True,
        gpus=[(g["index"], g["uuid"], g["mem_used_mib"], g["mem_total_mib"]) for g in gpu_holders.get("gpus", ())],
        holders=[Holder(pid=h["pid"], gpu_uuid=h["gpu_uuid"], mem_mib=h["mem_mib"], in_unit=bool(h["in_unit"]),
                        cmdline=h.get("cmdline") or "") for h in gpu_holders.get("holders", ())])


def is_our_orphan(cmdline, venv):
    """A server process that escaped the unit: SGLang's process titles, or the unit's venv."""
    cmd = cmdline.strip()
    if sglang_dialect.is_server_title(cmd):
        return True
    if venv:
        argv0 = cmd.split(" ", 1)[0]
        return argv0.startswith(venv.rstrip("/") + "/")
    return False


def classify_holders(check, venv, expected_pids=()):
    """expected_pids: processes of the weight cache daemon's unit (weight_cache_step): they
    hold the weights on purpose, beside the engine unit, and are never its leftovers."""
    expected = set(expected_pids)
    for h in check.holders:
        if h.in_unit:
            h.kind = "unit"
        elif h.pid in expected:
            h.kind = "weight_cache"
        elif is_our_orphan(h.cmdline, venv):
            h.kind = "orphan"
        else:
            h.kind = "foreign"
    return check


def gpu_released(check, gpu_idle_mib):
    """(released, why not): no unit or orphan process holds GPU memory and each GPU uses no
    more than what foreign and weight cache holders account for plus gpu_idle_mib: a warm
    restart waits for the engine's own memory only."""
    if not check.available:
        return True, ""
    ours = [h for h in check.holders if h.kind in ("unit", "orphan")]
    if ours:
        return False, "still holding GPU memory: " + "; ".join(h.describe() for h in ours)
    accounted_by_uuid = {}
    for h in check.holders:   # only foreign and weight_cache holders are left here
        accounted_by_uuid[h.gpu_uuid] = accounted_by_uuid.get(h.gpu_uuid, 0) + (h.mem_mib or 0)
    high = ["GPU %d: %s MiB used" % (idx, used) for idx, uuid, used, _total in check.gpus
            if used is not None and used > accounted_by_uuid.get(uuid, 0) + gpu_idle_mib]
    if high:
        return False, "GPU memory above baseline (%d MiB idle allowance): %s" % (gpu_idle_mib, ", ".join(high))
    return True, ""


def restart_pending(unit_state):
    """systemd's Restart= is about to start the unit again by itself (probe's unit_state)."""
    return unit_state.get("sub") == "auto-restart"


def settled_after_stop(unit_state):
    """True once the stop job is over: no deactivating, no pending auto-restart."""
    return unit_state.get("active") in ("inactive", "failed")
