"""The shell commands the restart action runs on the target, and the parsing of their
output. Commands are built here (quoted) and run by the action through the connection;
parsing and classification are pure, so the preflight rules are unit-tested.
"""
import re
import shlex
from dataclasses import dataclass, field

from ansible_collections.sglang_ops.serving.plugins.module_utils import sglang_dialect
from ansible_collections.sglang_ops.serving.plugins.module_utils.systemd_unit import service_name

NVIDIA_SMI_TIMEOUT_S = 20     # one nvidia-smi call in a remote step
PYSPY_DUMP_TIMEOUT_S = 15     # one py-spy dump; the dumps run in parallel
SHOW_PROPERTIES = ("LoadState", "ActiveState", "SubState", "MainPID", "ExecStart", "ControlGroup",
                   "FragmentPath")
_NVSMI = ('smi=$(command -v nvidia-smi || { [ -x /usr/local/nvidia/bin/nvidia-smi ] && '
          'echo /usr/local/nvidia/bin/nvidia-smi; })')


def _cgroup_match(unit):
    """An extended regex matching the unit's line in /proc/PID/cgroup (any hierarchy)."""
    escaped = "".join("\\" + c if c in ".\\" else c for c in service_name(unit))
    return "/" + escaped + "(/|$)"


def show_cmd(unit):
    return "systemctl show --property=%s -- %s" % (",".join(SHOW_PROPERTIES), shlex.quote(service_name(unit)))


def unit_installed(props):
    return props.get("LoadState") not in (None, "", "not-found")


_VENV_PYTHON = re.compile(r"(/[^\s;'\"]+?)/bin/python[0-9.]*\b")


def venv_prefix(exec_start):
    """The venv the unit runs Python from, read off ExecStart (also inside `bash -c '...'`)."""
    m = _VENV_PYTHON.search(exec_start or "")
    return m.group(1) if m else None


def gpu_holders_cmd(unit):
    """Every process holding GPU memory with: GPU, MiB, whether it is in the unit's cgroup,
    its command line; then every GPU's memory. Lines: `HOLDER\\t...`, `GPU\\t...`, or
    `NOSMI` / `SMIFAIL rc` when nvidia-smi cannot answer."""
    return r"""%s
if [ -z "$smi" ]; then echo NOSMI; exit 0; fi
apps=$(timeout %d "$smi" --query-compute-apps=pid,gpu_uuid,used_memory --format=csv,noheader,nounits 2>&1) || { echo "SMIFAIL $?"; exit 0; }
gpus=$(timeout %d "$smi" --query-gpu=index,uuid,memory.used,memory.total --format=csv,noheader,nounits 2>&1) || { echo "SMIFAIL $?"; exit 0; }
printf '%%s\n' "$gpus" | while IFS=, read -r idx uuid used total; do
  printf 'GPU\t%%s\t%%s\t%%s\t%%s\n' $idx $uuid $used $total
done
printf '%%s\n' "$apps" | while IFS=, read -r pid uuid mem; do
  pid=$(echo $pid); case "$pid" in ''|*[!0-9]*) continue;; esac
  incg=no; grep -qsE %s /proc/$pid/cgroup && incg=yes
  cmd=$(tr '\0' ' ' < /proc/$pid/cmdline 2>/dev/null)
  printf 'HOLDER\t%%s\t%%s\t%%s\t%%s\t%%s\n' "$pid" $uuid $mem "$incg" "$cmd"
done
""" % (_NVSMI, NVIDIA_SMI_TIMEOUT_S, NVIDIA_SMI_TIMEOUT_S, shlex.quote(_cgroup_match(unit)))


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


def _int(text):
    try:
        return int(float(text))
    except (TypeError, ValueError):
        return None


def parse_gpu_holders(text):
    check = GpuCheck(available=True)
    for line in text.splitlines():
        if line.startswith("NOSMI"):
            return GpuCheck(available=False, error="nvidia-smi not found on the host")
        if line.startswith("SMIFAIL"):
            return GpuCheck(available=False, error="nvidia-smi failed (%s)" % line)
        cols = line.split("\t")
        if cols[0] == "GPU" and len(cols) >= 5 and _int(cols[1]) is not None:
            check.gpus.append((_int(cols[1]), cols[2], _int(cols[3]), _int(cols[4])))
        elif cols[0] == "HOLDER" and len(cols) >= 6 and _int(cols[1]) is not None:
            check.holders.append(Holder(pid=_int(cols[1]), gpu_uuid=cols[2], mem_mib=_int(cols[3]),
                                        in_unit=cols[4] == "yes", cmdline="\t".join(cols[5:])))
    return check


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


def parse_unit_pids(text):
    pids = []
    for line in text.splitlines():
        cols = line.split("\t")
        if cols and cols[0].isdigit():
            pids.append((int(cols[0]), cols[1] if len(cols) > 1 else "", cols[2] if len(cols) > 2 else ""))
    return pids


def active_state_cmd(unit):
    return "systemctl show --property=ActiveState,SubState -- %s" % shlex.quote(service_name(unit))


def restart_pending(props):
    """systemd's Restart= is about to start the unit again by itself."""
    return props.get("SubState") == "auto-restart"


def settled_after_stop(props):
    """True once the stop job is over: no deactivating, no pending auto-restart."""
    return props.get("ActiveState") in ("inactive", "failed")


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
