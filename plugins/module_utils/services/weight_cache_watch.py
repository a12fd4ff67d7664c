"""The supervisor's side of SGLang's weight cache daemon (domain/weight_cache.py): which
GPUs the unit uses, whether every one has a live daemon (host/weight_cache_state.py),
that state as the observation's `weight_cache` field, and what an engine decides before
it starts, as the restart playbook does (plugin_utils/restart/weight_cache_step.py):

- warm or cold: domain/warm_cold.decide over the engine's previous start (a warm start
  that failed, one whose class implicates the weights, a fallback to disk) and the daemon's
  delivery budget makes this start cold (engine_cache_start.py); a daemon loaded before that
  start ended is stopped so that its own supervisor and systemd load the weights again
  (loaded_since, daemon_pids_to_stop);
- how long to wait for the daemon: while its supervisor's newest start record moves (a
  load in progress) or says ready, and no longer than DAEMON_GRACE_S once the daemon shows
  no evidence of starting (no start record, a start that ended, a supervisor that stopped
  writing): the engine then starts and loads from disk itself (DaemonWait).

A daemon is a process of the daemon's unit running as its user, and a GPU's daemon serves
only where its socket is a socket of that user that listens (weight_cache_state.DaemonIdentity);
an engine finding a ready file refused (a FIFO), naming another process, or an unusable
socket starts cold (EngineCacheStart). For the daemon's own supervisor the same faults are
warnings, not a dead daemon, while the daemon still serves (WeightCacheWatch.check with
launcher_pid): a ready file that names no pid, no daemon or cannot be read beside a socket
that listens in a process of the launcher, or a live daemon whose socket was replaced (the
engines attached to it keep their weights; the next engine start reloads it).
"""
import os
import stat

from ansible_collections.sglang_ops.serving.plugins.module_utils.host import cgroup, procfs, weight_cache_state
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain import weight_cache
from ansible_collections.sglang_ops.serving.plugins.module_utils.records import start_records

# An engine with no start timeout of its own waits this long for its daemon at most: the
# daemons' own bound on their load (sglang.srt.weight_cache.daemon --timeout).
DEFAULT_WAIT_S = 1800.0
# How long an engine waits for a daemon that shows no sign of starting (no start record, its
# newest start ended, its supervisor no longer writes it): systemd's RestartSec (30 s by
# default) and the daemon supervisor's first polls fit in it.
DAEMON_GRACE_S = 120.0
SOCKET_TEMPLATE_ENV = "SGLANG_WEIGHT_CACHE_SOCKET_TEMPLATE"
# Why an engine start is cold when no rule asked for it: the daemon was loaded again after
# the engine's previous start ended (a cold restart run stopped the engine and restarted the
# daemon, or systemd restarted the daemon), so this start's weights came from disk.
REASON_DAEMON_RELOADED = "daemon_reloaded"
# Faults of a GPU's ready file its daemon's own supervisor tolerates while the daemon listens.
_TOLERATED_READY_FAULTS = (weight_cache_state.NO_PID, weight_cache_state.READY_FILE_REFUSED,
                           weight_cache_state.NOT_THE_DAEMON)
listening_unix_sockets = weight_cache_state.listening_unix_sockets


class WeightCacheWatch:
    def __init__(self, ready_template, nvidia_smi="nvidia-smi", env=None,
                 read_uuids=weight_cache_state.read_unit_gpu_uuids, health=weight_cache_state.daemon_health,
                 daemon_unit=None):
        self.ready_template = ready_template
        self.daemon_unit = daemon_unit    # the daemon's unit, for an engine's supervisor (its own: launcher_pid)
        self.nvidia_smi, self.env = nvidia_smi, env
        self._read_uuids, self._health = read_uuids, health
        self.uuids = []
        self.last = None
        self.warnings = ()    # GPUs served by a daemon whose ready file or socket is at fault (check with launcher_pid)
        self.dead = ()        # GPUs whose ready file names a pid that is gone

    def socket_template(self):
        return (self.env if self.env is not None else os.environ).get(SOCKET_TEMPLATE_ENV)

    def check(self, launcher_pid=None):
        """DaemonHealth now; the unit's GPUs are read once, when first known. launcher_pid:
        the daemon's launcher (the daemon's own supervisor passes its child): its daemons are
        the processes below it, and a GPU whose ready file names no pid, no daemon or cannot
        be read counts as served while its socket listens in a process below the launcher, as
        does a live daemon whose socket is unusable; both are named in self.warnings."""
        self.warnings = ()
        self.dead = ()
        if not self.uuids:
            self.uuids, why = self._read_uuids(self.nvidia_smi, self.env)
            if not self.uuids:
                self.last = weight_cache_state.DaemonHealth(False, reason="the unit's GPUs are not known: %s" % why)
                return self.last
        daemon = weight_cache_state.DaemonIdentity(unit=self.daemon_unit, launcher_pid=launcher_pid,
                                                   socket_template=self.socket_template())
        health = self._health(self.ready_template, self.uuids, daemon=daemon)
        self.dead = tuple(uuid for uuid, fault in health.faults.items() if fault == weight_cache_state.DAEMON_GONE)
        if not health.healthy and launcher_pid is not None:
            health = self._tolerate_malformed(health, launcher_pid)
        self.last = health
        return health

    def _tolerate_malformed(self, health, launcher_pid):
        template = self.socket_template()
        if not template:
            return health
        listening = listening_unix_sockets()
        below = procfs.descendants(launcher_pid)
        warnings = []
        for uuid in health.missing:
            path = weight_cache.ready_path(self.ready_template, uuid)
            sock = weight_cache.ready_path(template, uuid)
            fault = health.faults.get(uuid)
            if fault == weight_cache_state.SOCKET_UNUSABLE:
                # the daemon lives and keeps serving the engines attached to it
                warnings.append("%s; the next engine start reloads the daemon" % health.words[uuid])
                continue
            if fault not in _TOLERATED_READY_FAULTS or not socket_answers(sock, listening, below):
                return health        # no file, a pid that is gone, or no daemon listens: a daemon is missing
            if fault == weight_cache_state.NO_PID:
                warnings.append("ready file %s names no pid, but its daemon listens on %s" % (path, sock))
            else:
                warnings.append("%s, but its daemon listens on %s" % (health.words[uuid], sock))
        self.warnings = tuple(warnings)
        return weight_cache_state.DaemonHealth(True, health.pids, (), "", health.configs)

    def clear_planted(self):
        """The daemon's own supervisor, before it launches the daemon: removes ready files its
        launcher would block on or refuse to start beside (weight_cache_state.clear_planted_ready_files);
        [words for the journal]. Nothing when the unit's GPUs are not known."""
        if not self.uuids:
            self.uuids, dummy_why = self._read_uuids(self.nvidia_smi, self.env)
        return weight_cache_state.clear_planted_ready_files(self.ready_template, self.uuids)

    def observation(self, health=None):
        """The trace's `weight_cache` field: {"healthy", "gpus", "ready", "reason"}."""
        health = health or self.last or self.check()
        ready = len(self.uuids) if health.healthy and self.uuids else len(health.pids)
        return {"healthy": health.healthy, "gpus": len(self.uuids), "ready": ready,
                "reason": health.reason or "; ".join(self.warnings)}

    def ready_mtimes(self):
        """{uuid: mtime of its ready file} for the GPUs known, those that can be read."""
        out = {}
        for uuid in self.uuids:
            try:
                out[uuid] = os.stat(weight_cache.ready_path(self.ready_template, uuid)).st_mtime
            except OSError:
                pass
        return out


def _holds_inode(pid, inode, proc_root="/proc"):
    want = "socket:[%d]" % inode
    fd_dir = "%s/%d/fd" % (proc_root, pid)
    try:
        names = os.listdir(fd_dir)
    except OSError:
        return False
    for name in names:
        try:
            if os.readlink(os.path.join(fd_dir, name)) == want:
                return True
        except OSError:
            continue
    return False


def socket_answers(path, listening, pids):
    """The path is a Unix socket (not a link, not a regular file) that listens, and one of
    pids holds it: a daemon that answers there."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    if not stat.S_ISSOCK(st.st_mode) or path not in listening:
        return False
    return any(_holds_inode(pid, listening[path]) for pid in pids)


# ---- an engine before it starts ------------------------------------------------------------
def previous_start(starts_dir, current_name):
    """The engine's start record before the current one, or None."""
    for record in start_records.recent_starts(starts_dir, limit=2):
        if os.path.basename(record.get("dir") or "") != current_name:
            return record
    return None


def loaded_since(ready_mtimes, previous):
    """Every GPU's daemon wrote its ready file after the previous start ended: the weights
    on the GPUs are newer than that start (a cold restart already happened)."""
    ended = (previous or {}).get("ended_at") or (previous or {}).get("started_at")
    if not ready_mtimes or not isinstance(ended, (int, float)):
        return False
    return min(ready_mtimes.values()) > ended


def daemon_pids_to_stop(health, engine_unit):
    """The live daemon pids of the ready files that are processes of the daemon's unit
    (a ready file can name any pid: only the daemon unit's own are signalled)."""
    unit = weight_cache.daemon_unit(engine_unit)
    return sorted({pid for pid in health.pids.values() if cgroup.in_unit(pid, unit)})


def daemon_starts_dir(engine_starts_dir):
    """Where the daemon's supervisor records its starts: the engine's folder with the
    daemon unit's suffix (the role's _sglang_service_weights_starts_state_directory)."""
    return engine_starts_dir.rstrip("/") + weight_cache.DAEMON_UNIT_SUFFIX


def _supervisor_pid(record):
    name = os.path.basename(record.get("dir") or "")
    tail = name.rsplit("-", 1)[-1]
    return int(tail) if tail.isdigit() else None


class DaemonWait:
    """What an engine waiting for its daemon decides at each check: "go" (the daemon is
    ready), "wait" (it is loading: its supervisor's newest start moves) or "give_up" (no
    evidence it will be ready: DAEMON_GRACE_S without a moving or ready start, or the
    ceiling reached), with words for the journal, STATUS= and the start record."""

    def __init__(self, daemon_starts, ceiling_s, grace_s=DAEMON_GRACE_S, read=start_records.recent_starts,
                 alive=weight_cache_state.pid_alive, since=None):
        self.daemon_starts = daemon_starts
        self.ceiling_s, self.grace_s = ceiling_s, grace_s
        self._read, self._alive = read, alive
        self.since = since              # epoch s: only a daemon start begun after it counts (a requested reload)
        self._seen = None               # (start folder, polls) last seen
        self._evidence_t = 0.0          # waited_s of the last evidence of a load in progress

    def newest(self):
        starts = self._read(self.daemon_starts, limit=1)
        return starts[0] if starts else None

    def judge(self, health, waited_s, files_fresh=False, dead=False):
        """(decision, words) after waited_s of waiting with the daemon's health now;
        files_fresh: its ready files were written after `since` (a reload happened); dead: a
        ready file names a pid that is gone (its supervisor's "ready" is then out of date)."""
        record = self.newest()
        fresh = record is not None and (self.since is None or (record.get("started_at") or 0) >= self.since)
        if health.healthy and (self.since is None or fresh or files_fresh):
            return "go", "the weight cache daemon is ready"
        verdict = record.get("verdict") if fresh else None
        if verdict == "ready" and not dead and self._alive(_supervisor_pid(record)):
            # its supervisor checks every GPU's daemon after ready and vouches for them (the
            # playbook's test too); this unit may not see them (no nvidia-smi, a malformed file)
            return "go", "the weight cache daemon's supervisor says ready (here: %s)" % health.reason
        if verdict in ("running", "ready"):
            seen = (record.get("dir"), record.get("polls"))
            if seen != self._seen and self._alive(_supervisor_pid(record)):
                self._seen, self._evidence_t = seen, waited_s
            words = ("the daemon loads: %s" % (record.get("progress") or record.get("phase"))) if verdict == "running" \
                else "the daemon's newest start says ready but its supervisor is gone"
        elif record is None:
            words = "the daemon has no start recorded in %s" % self.daemon_starts
        elif not fresh:
            words = "the daemon has not started again since its reload was asked"
        else:
            words = "the daemon's newest start is %s (%s: %s)" % (
                verdict, record.get("reason_code"), (record.get("reason") or "")[:200])
        words = "%s; %s" % (health.reason or "not ready", words)
        if waited_s >= self.ceiling_s:
            return "give_up", "%s; waited the longest allowed (%.0f s)" % (words, self.ceiling_s)
        if waited_s - self._evidence_t >= self.grace_s:
            return "give_up", "%s; no sign of a load in progress for %.0f s" % (words, waited_s - self._evidence_t)
        return "wait", words


def ready_words(health, gpus=None):
    return "weight cache ready on %d GPUs" % (gpus if gpus is not None and health.healthy else len(health.pids))
