"""Whether the weight cache daemon is healthy on this host: every GPU the unit uses has
its ready file, the pid each file names is a live process of the daemon (SGLang's own test,
sglang/srt/weight_cache/protocol.py, asks only that the pid lives), and where the socket
template is known, each GPU's socket is a socket of the daemon's user that accepts
connections. The file's format and path are domain/weight_cache.py; this module reads the
files, the sockets and /proc.

The ready files and sockets live in a folder the service user writes, so what is there is
not trusted: a ready file is read without following a link, bounded, a FIFO refused without
blocking (records/safe_files.py); a pid counts only when it is a process of the daemon's
unit (its cgroup names the unit, or it runs below the launcher of the unit's own
supervisor) and runs as the daemon's user; a socket only when it is one, owned by that
user, and listening.
"""
import os
import stat
from dataclasses import dataclass, field

from ansible_collections.sglang_ops.serving.plugins.module_utils.host import cgroup, nvidia_smi, procfs
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain import weight_cache
from ansible_collections.sglang_ops.serving.plugins.module_utils.records import safe_files

_DEAD_STATES = ("Z", "X")   # a zombie holds no GPU memory and serves nothing
_READY_FILE_MAX_BYTES = 64 * 1024
_PROC_NET_UNIX_MAX_BYTES = 4 * 2**20
_UNIX_LISTENING = 0x10000   # __SO_ACCEPTCON in /proc/net/unix's Flags: the socket accepts connections

# What is wrong with one GPU's daemon (DaemonHealth.faults).
NO_READY_FILE = "no_ready_file"
READY_FILE_REFUSED = "ready_file_refused"   # a FIFO, a link, a device, too large: not read
NO_PID = "no_pid"
DAEMON_GONE = "daemon_gone"
NOT_THE_DAEMON = "not_the_daemon"           # the pid lives but is no process of the daemon's unit and user
SOCKET_UNUSABLE = "socket_unusable"         # not a socket, another owner, or nobody accepts on it
# Faults an engine cannot attach past but a reload of the daemon cures: its start is cold.
RELOAD_CURES = (READY_FILE_REFUSED, NOT_THE_DAEMON, SOCKET_UNUSABLE)


@dataclass(frozen=True)
class DaemonHealth:
    healthy: bool
    pids: dict = field(default_factory=dict)      # nvidia-smi uuid -> live daemon pid (its socket may still be unusable)
    missing: tuple = ()                            # nvidia-smi uuids without a healthy daemon
    reason: str = ""                               # why not healthy ('' when healthy)
    configs: dict = field(default_factory=dict)   # nvidia-smi uuid -> the ready file's config
    faults: dict = field(default_factory=dict)    # nvidia-smi uuid -> its fault (NO_READY_FILE, ...)
    words: dict = field(default_factory=dict)     # nvidia-smi uuid -> its fault in words

    def reload_cures(self):
        """The GPUs whose daemon an engine cannot attach to but a reload of the daemon cures
        (a refused ready file, one naming another process, an unusable socket)."""
        return tuple(uuid for uuid, fault in self.faults.items() if fault in RELOAD_CURES)


@dataclass(frozen=True)
class DaemonIdentity:
    """Who the daemon is. unit: its systemd unit (a pid counts when its cgroup names it);
    launcher_pid: the daemon's launcher, for the unit's own supervisor (a pid counts when it
    runs below it); neither: any process of the daemon's user counts; uid: the daemon's user (the supervisors run as it: SGLang's client
    refuses a socket another user owns); socket_template: its sockets (None: not checked)."""
    unit: object = None
    launcher_pid: object = None
    uid: int = field(default_factory=os.geteuid)
    socket_template: object = None


def pid_alive(pid, proc_root="/proc"):
    """A process with this pid exists and is not a zombie."""
    if not isinstance(pid, int) or pid <= 0:
        return False
    stat_ = procfs.read_stat(pid, proc_root)
    return stat_ is not None and stat_.state not in _DEAD_STATES


def read_ready(path):
    """(ReadyFile or None, why): None with why '' when there is no file; with why when it is
    not a regular file to read (records/safe_files.py: no link, no FIFO, bounded; never blocks)."""
    try:
        data = safe_files.read_file(path, _READY_FILE_MAX_BYTES)
    except safe_files.UnsafeEntry as e:
        return None, str(e)
    except FileNotFoundError:
        return None, ""
    except OSError as e:
        return None, "cannot read %s: %s" % (path, e.strerror)
    return weight_cache.parse_ready_file(data.decode("utf-8", errors="replace")), ""


def read_ready_file(path):
    """The ReadyFile at path, or None when it does not exist or cannot be read safely."""
    return read_ready(path)[0]


def is_daemon_process(pid, daemon, proc_root="/proc"):
    """'' when pid is a live process of the daemon (DaemonIdentity), else why not."""
    if not pid_alive(pid, proc_root):
        return "is gone"
    try:
        uid = os.stat("%s/%d" % (proc_root, pid)).st_uid
    except OSError:
        return "is gone"
    if uid != daemon.uid:
        return "runs as uid %d, not the daemon's uid %d" % (uid, daemon.uid)
    if daemon.unit is None and daemon.launcher_pid is None:
        return ""    # no unit named (a reader outside both units): its user is all that is known
    if daemon.launcher_pid is not None and pid in procfs.descendants(daemon.launcher_pid, proc_root):
        return ""
    if daemon.unit and cgroup.in_unit(pid, daemon.unit):
        return ""
    return "is no process of %s" % (daemon.unit or "the daemon's launcher %s" % daemon.launcher_pid)


def listening_unix_sockets(path="/proc/net/unix"):
    """{socket path: inode} of the listening Unix sockets of this network namespace."""
    try:
        with open(path, "rb") as fh:     # the kernel's file, nothing anyone can plant
            text = fh.read(_PROC_NET_UNIX_MAX_BYTES).decode("utf-8", "replace")
    except OSError:
        return {}
    out = {}
    for line in text.splitlines()[1:]:
        parts = line.split(None, 7)
        if len(parts) < 8:
            continue
        try:
            flags, inode = int(parts[3], 16), int(parts[6])
        except ValueError:
            continue
        if flags & _UNIX_LISTENING:
            out[parts[7]] = inode
    return out


def socket_problem(path, uid, listening):
    """'' when path is a Unix socket owned by uid that accepts connections (listening: as
    listening_unix_sockets reads them), else why not. Nothing connects to it: the daemon
    sees no stray client."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return "no socket at %s" % path
    except OSError as e:
        return "cannot read the socket %s: %s" % (path, e.strerror)
    if not stat.S_ISSOCK(st.st_mode):
        return "%s is %s, not a socket" % (path, safe_files.describe(st.st_mode))
    if st.st_uid != uid:
        return "the socket %s is owned by uid %d, not the daemon's uid %d" % (path, st.st_uid, uid)
    if path not in listening:
        return "nobody accepts on the socket %s" % path
    return ""


def _gpu_fault(path, ready, why, daemon, proc_root):
    """(fault, words) of one GPU's ready file, or (None, '') when it names a daemon's pid."""
    if ready is None:
        return (READY_FILE_REFUSED, why) if why else (NO_READY_FILE, "no ready file %s" % path)
    if ready.pid is None:
        return NO_PID, "ready file %s names no pid" % path
    if not pid_alive(ready.pid, proc_root):
        return DAEMON_GONE, "daemon pid %s of %s is gone" % (ready.pid, path)
    not_it = is_daemon_process(ready.pid, daemon, proc_root) if daemon is not None else ""
    if not_it:
        return NOT_THE_DAEMON, "ready file %s names pid %s, which %s: stale" % (path, ready.pid, not_it)
    return None, ""


def daemon_health(ready_template, gpu_uuids, proc_root="/proc", daemon=None):
    """DaemonHealth of the daemons serving gpu_uuids (nvidia-smi's uuids, `GPU-` prefix or
    not); daemon: the DaemonIdentity a pid and a socket must match (None: a live pid is
    enough, no socket checked). Never raises for what it finds on the host; ValueError for a
    template without {device_uuid} or no GPUs at all (a settings fault, not a host state)."""
    uuids = list(gpu_uuids or ())
    if not uuids:
        raise ValueError("daemon_health needs the uuids of the GPUs the unit uses")
    sockets = daemon is not None and bool(daemon.socket_template)
    listening = listening_unix_sockets() if sockets else {}
    pids, configs, problems, faults, words_of = {}, {}, [], {}, {}
    for uuid in uuids:
        path = weight_cache.ready_path(ready_template, uuid)
        ready, why = read_ready(path)
        fault, words = _gpu_fault(path, ready, why, daemon, proc_root)
        if fault is None:
            pids[uuid] = ready.pid
            configs[uuid] = ready.config
            words = socket_problem(weight_cache.ready_path(daemon.socket_template, uuid), daemon.uid,
                                   listening) if sockets else ""
            fault = SOCKET_UNUSABLE if words else None
        if fault is not None:
            problems.append((uuid, words))
            faults[uuid], words_of[uuid] = fault, words
    if not problems:
        return DaemonHealth(True, pids, (), "", configs)
    missing = tuple(uuid for uuid, dummy_why in problems)
    reason = "%d of %d GPUs without a live weight cache daemon: %s" % (
        len(problems), len(uuids), "; ".join(why for dummy_uuid, why in problems[:3]))
    if len(problems) > 3:
        reason += "; ..."
    return DaemonHealth(False, pids, missing, reason, configs, faults, words_of)


def clear_planted_ready_files(ready_template, gpu_uuids, uid=None):
    """Before the daemon's launch (no daemon of its unit runs yet): removes each GPU's ready
    file that is no file of a daemon SGLang could serve from, so that its launcher neither
    blocks on it (it opens a FIFO with plain open()) nor refuses to start beside the
    process it names ("already running"): a FIFO, a link or a device at its path, or a file
    naming a live process of another user than the daemon's (uid, this user by default).
    The entry itself is removed, never what a link points at. [words for each removal]."""
    identity = DaemonIdentity(uid=os.geteuid() if uid is None else uid)
    removed = []
    for uuid in gpu_uuids or ():
        path = weight_cache.ready_path(ready_template, uuid)
        ready, why = read_ready(path)
        if ready is None and not why:
            continue
        if ready is not None:
            if ready.pid is None or not pid_alive(ready.pid):
                continue              # SGLang's launcher removes the files of a dead daemon itself
            why = is_daemon_process(ready.pid, identity)
            if not why:
                continue              # this user's process: SGLang's own refusal stands
            why = "names pid %s, which %s" % (ready.pid, why)
        try:
            os.unlink(path)
        except OSError as e:
            removed.append("cannot remove the planted ready file %s (%s): %s" % (path, why, e.strerror))
            continue
        removed.append("removed the planted ready file %s before the daemon's launch: %s" % (path, why))
    return removed


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
