"""The restart's rules over what the probe reads of the host (sglang_probe's unit_state,
gpu_holders): which GPU holders are the unit's, its leftovers or another job's, when the
GPUs count as released, when a stop is over. Pure, so the preflight rules are unit-tested.
Also the shell commands of the diagnostics bundle, and the splitting of their output.
"""
import shlex
from dataclasses import dataclass, field

from ansible_collections.sglang_ops.serving.plugins.module_utils import sglang_dialect
from ansible_collections.sglang_ops.serving.plugins.module_utils.systemd_unit import service_name

NVIDIA_SMI_TIMEOUT_S = 20     # one nvidia-smi call in a remote step
PYSPY_DUMP_TIMEOUT_S = 15     # one py-spy dump; the dumps run in parallel
_NVSMI = ('smi=$(command -v nvidia-smi || { [ -x /usr/local/nvidia/bin/nvidia-smi ] && '
          'echo /usr/local/nvidia/bin/nvidia-smi; })')


def _cgroup_match(unit):
    """An extended regex matching the unit's line in /proc/PID/cgroup (any hierarchy)."""
    escaped = "".join("\\" + c if c in ".\\" else c for c in service_name(unit))
    return "/" + escaped + "(/|$)"


@dataclass
class Holder:
    pid: int
    gpu_uuid: str
    mem_mib: object
    in_unit: bool
    cmdline: str
    kind: str = ""  # unit | orphan | foreign (classify_holders)

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


def classify_holders(check, venv):
    for h in check.holders:
        if h.in_unit:
            h.kind = "unit"
        elif is_our_orphan(h.cmdline, venv):
            h.kind = "orphan"
        else:
            h.kind = "foreign"
    return check


def gpu_released(check, gpu_idle_mib):
    """(released, why not): no unit or orphan process holds GPU memory and each GPU uses no
    more than what foreign holders account for plus gpu_idle_mib."""
    if not check.available:
        return True, ""
    ours = [h for h in check.holders if h.kind in ("unit", "orphan")]
    if ours:
        return False, "still holding GPU memory: " + "; ".join(h.describe() for h in ours)
    foreign_by_uuid = {}
    for h in check.holders:
        foreign_by_uuid[h.gpu_uuid] = foreign_by_uuid.get(h.gpu_uuid, 0) + (h.mem_mib or 0)
    high = ["GPU %d: %s MiB used" % (idx, used) for idx, uuid, used, _total in check.gpus
            if used is not None and used > foreign_by_uuid.get(uuid, 0) + gpu_idle_mib]
    if high:
        return False, "GPU memory above baseline (%d MiB idle allowance): %s" % (gpu_idle_mib, ", ".join(high))
    return True, ""


def _each_unit_pid(unit, body):
    """A shell loop over the PIDs in the unit's cgroup ($p: PID, $cmd: command line)."""
    return r"""for f in /proc/[0-9]*/cgroup; do
  grep -qsE %s "$f" || continue
  p=${f#/proc/}; p=${p%%/cgroup}
  cmd=$(tr '\0' ' ' < /proc/$p/cmdline 2>/dev/null)
%s
done
""" % (shlex.quote(_cgroup_match(unit)), body)


def unit_pids_cmd(unit):
    """`pid<TAB>state<TAB>command line` for every process in the unit's cgroup."""
    return _each_unit_pid(unit, r"""  st=$(awk '{print $3}' /proc/$p/stat 2>/dev/null)
  printf '%s\t%s\t%s\n' "$p" "$st" "$cmd"
""")


def restart_pending(unit_state):
    """systemd's Restart= is about to start the unit again by itself (probe's unit_state)."""
    return unit_state.get("sub") == "auto-restart"


def settled_after_stop(unit_state):
    """True once the stop job is over: no deactivating, no pending auto-restart."""
    return unit_state.get("active") in ("inactive", "failed")


def diagnostics_cmds(unit, since_epoch_s, venv):
    """name -> shell command; each output becomes attempt-<n>/diagnostics/<name>.txt."""
    q = shlex.quote(service_name(unit))
    pyspy = "py-spy"
    if venv:
        pyspy = '$( [ -x %s/bin/py-spy ] && echo %s/bin/py-spy || echo py-spy)' % (
            shlex.quote(venv), shlex.quote(venv))
    return {
        "unit-status": "systemctl status --no-pager --full --lines=0 -- %s; echo; "
                       "systemctl show --property=ActiveState,SubState,Result,MainPID,NRestarts,"
                       "ExecMainStatus,ExecMainCode,ControlGroup -- %s" % (q, q),
        "journal": "journalctl -u %s --since @%d --no-pager -a -o short-iso-precise | tail -n 5000"
                   % (q, int(since_epoch_s)),
        "nvidia-smi": "%s\nif [ -z \"$smi\" ]; then echo 'nvidia-smi not found'; exit 0; fi\n"
                      "timeout %d \"$smi\"; echo; echo '# compute apps (pid, gpu_uuid, used_memory MiB)'; "
                      "timeout %d \"$smi\" --query-compute-apps=pid,gpu_uuid,used_memory "
                      "--format=csv,noheader,nounits" % (_NVSMI, NVIDIA_SMI_TIMEOUT_S, NVIDIA_SMI_TIMEOUT_S),
        "ports": "ss -ltnp 2>&1 || netstat -ltnp 2>&1",
        "processes": "echo 'pid state command'; " + unit_pids_cmd(unit),
        # One dump per Python process, in parallel so a stopped or wedged process costs
        # one timeout, not one per rank.
        "py-spy": "PYSPY=%s\nd=$(mktemp -d)\n" % pyspy + _each_unit_pid(unit, _PYSPY_EACH % (
            sglang_dialect.SERVER_TITLE_PREFIX, PYSPY_DUMP_TIMEOUT_S)) +
        "wait\ncat \"$d\"/* 2>/dev/null\nrm -rf \"$d\"\n",
    }


# The loop body of the py-spy capture: Python processes and SGLang's titled children only.
_PYSPY_EACH = r"""  case "$cmd" in *python*|%s*) ;; *) continue;; esac
  ( echo "=== PYSPY $p $cmd"; timeout %d $PYSPY dump --nonblocking --pid $p 2>&1 || echo "(py-spy exited $?)" ) > "$d/$p" &"""


def split_pyspy(text):
    """The py-spy diagnostics output -> {label: text}; label `rank<n>` for scheduler ranks,
    `pid<N>` for other Python processes (the launcher, the detokenizer)."""
    parts, label, buf = {}, None, []
    for line in text.splitlines():
        if line.startswith("=== PYSPY "):
            if label:
                parts[label] = "\n".join(buf) + "\n"
            dummy_marker, dummy_word, pid, *cmd = line.split(" ")
            cmdline = " ".join(cmd)
            rank = sglang_dialect.tp_rank(sglang_dialect.rank_of(cmdline)) if sglang_dialect.is_server_title(cmdline) else None
            label = "rank%d" % rank if rank is not None else "pid%s" % pid
            buf = [line[4:]]
        elif label:
            buf.append(line)
    if label:
        parts[label] = "\n".join(buf) + "\n"
    return parts
