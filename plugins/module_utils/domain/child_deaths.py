"""A child that vanished: a process of the server leaving the unit while the start goes on. Pure, no I/O.

What a process was decides what its leaving means:
- a **rank**: SGLang titles its schedulers (sglang_dialect.is_rank_name: the title, or the first
  15 characters the kernel keeps as its comm), py-spy sampled it as a rank, or a death line names it
  (the launcher's `Subprocess NAME (pid=N) crashed with exit code C`, the kernel's OOM killer). A
  rank lives as long as the server: leaving a start that goes on is a death, decided at once;
- a **GPU holder** SGLang did not name (a process of the unit in `gpu_procs`): an autotune's
  benchmark subprocess or a loader helper holds GPU memory and exits when done. Its leaving is a
  death only when the start freezes after it (CPU idle, the GPUs idle or unread, nothing moving)
  for `child_freeze_min_s` within `line_confirm_window_s`; a sign of life after it (a line, a bar,
  a burst, a busy CPU or GPU) says it left normally;
- any other process (compile workers, download helpers, tokenizer threads' helpers) comes and goes
  as it likes: rule 2's `children` channel.
How it left, where the host tells it, is the rest: a holder that exited 0 finished its job, one a
signal killed did not (a zombie's wait status in `procs.tree`, a death line).
The pids and names come from the probe's `procs.tree`; without it a holder leaving still shows:
its pid gone from `gpu_procs` after the unit's process count fell.
"""
from dataclasses import dataclass

from ansible_collections.sglang_ops.serving.plugins.module_utils.domain import sglang_dialect

EXITED_STATES = ("Z", "X")           # a zombie its parent has not reaped still has a pid, not a life
SIGNAL_NAMES = {1: "SIGHUP", 2: "SIGINT", 3: "SIGQUIT", 6: "SIGABRT", 7: "SIGBUS", 9: "SIGKILL", 11: "SIGSEGV", 15: "SIGTERM"}


def wait_status_words(status):
    """A wait status (a zombie's /proc/PID/stat field 52) in words; "" when unknown."""
    if not isinstance(status, int):
        return ""
    sig = status & 0x7F
    if sig:
        return "killed by signal %d%s" % (sig, " (%s)" % SIGNAL_NAMES[sig] if sig in SIGNAL_NAMES else "")
    return "exited with status %d" % ((status >> 8) & 0xFF)


@dataclass
class Departure:
    pid: object          # None: a rank left whose pid no reading gave
    name: str
    rank: bool
    gpu_mib: int         # the GPU memory it held at its last listing, 0 when none
    gpus: tuple
    seen_t: float        # the observation that found it gone
    how: str = ""        # what the host told of its end
    frozen_t: object = None

    def words(self):
        who = "rank" if self.rank else "GPU holder"
        pid = "pid %s" % self.pid if self.pid is not None else "pid unknown"
        text = "%s %s (%s) left the unit while the start went on" % (who, self.name or "?", pid)
        text += ": %s" % (self.how or "the host did not say how")
        if self.gpu_mib:
            text += "; it held %d MiB on GPU %s" % (self.gpu_mib, ",".join(str(g) for g in self.gpus))
        return text

    def to_evidence(self):
        return {"pid": self.pid, "name": self.name, "rank": self.rank, "gpu_mib": self.gpu_mib,
                "gpus": list(self.gpus), "how": self.how or None}


class ChildDeaths:
    """The unit's processes poll by poll, and the ones that left as a death or normally."""

    def __init__(self, settings):
        self.settings = settings
        self._tree = None       # {pid: name} of the last procs.tree
        self._names = {}        # pid -> name, every process seen
        self._ranks = set()     # pids known to be ranks
        self._held = {}         # pid -> {gpu: MiB} of the unit's GPU holders at their last listing
        self._count = None      # the unit's process count at the last reading
        self._lost = 0          # processes lost since gpu_procs was last read (no tree)
        self._schedulers = None  # count of scheduler comms (no tree)
        self.open = []          # Departures awaiting the start's answer
        self.left_normally = []  # "name (pid N)" of processes that left and the start went on

    def read(self, obs, t, main_pid, death_lines):
        """Take in one observation; `death_lines`: {pid: how} the log has told so far."""
        procs = obs.get("procs") if isinstance(obs.get("procs"), dict) else {}
        holders = obs.get("gpu_procs") if isinstance(obs.get("gpu_procs"), list) else None
        for s in obs.get("stacks") or ():
            if isinstance(s, dict) and isinstance(s.get("pid"), int) and s.get("rank") is not None and s["pid"] != main_pid:
                self._ranks.add(s["pid"])
        tree = procs.get("tree")
        gone = self._gone_by_tree(tree) if isinstance(tree, list) else self._gone_by_holders(procs, holders)
        self._note_holders(holders)
        for pid, status in gone:
            if pid == main_pid:
                continue
            name = self._names.get(pid, "")
            rank = pid in self._ranks or sglang_dialect.is_rank_name(name) or pid in death_lines
            held = self._held.pop(pid, {})
            how = death_lines.get(pid) or wait_status_words(status)
            # a holder that exited 0 finished its job; one a signal killed did not
            if rank or (held and status != 0):
                self.open.append(Departure(pid, name, rank or (how or "").startswith("killed"), sum(held.values()),
                                           tuple(sorted(held)), t, how))
            else:
                self.left_normally.append("%s (pid %s)" % (name or "?", pid))
        for d in self.open:
            if not d.how and d.pid in death_lines:
                d.how, d.rank = death_lines[d.pid], True

    def _gone_by_tree(self, tree):
        """[(pid, wait status or None)] of the processes that left since the last tree."""
        now, exited = {}, {}
        for entry in tree:
            if isinstance(entry, dict) and isinstance(entry.get("pid"), int):
                if entry.get("state") in EXITED_STATES:
                    exited[entry["pid"]] = entry.get("exit_code")
                    continue
                now[entry["pid"]] = str(entry.get("name") or "")
        for pid, name in now.items():
            self._names[pid] = name
            if sglang_dialect.is_rank_name(name):
                self._ranks.add(pid)
        gone = [] if self._tree is None else [(pid, exited.get(pid)) for pid in self._tree if pid not in now]
        self._tree = now
        return gone

    def _gone_by_holders(self, procs, holders):
        """Without a tree: the unit's holders no longer listed once its process count fell; a
        scheduler comm that went away marks them ranks."""
        count, comm = procs.get("count"), procs.get("comm")
        if isinstance(count, int):
            if self._count is not None and count < self._count:
                self._lost += self._count - count
            self._count = count
        if isinstance(comm, dict):
            schedulers = sum(n for c, n in comm.items() if isinstance(n, int) and c.startswith(sglang_dialect.SCHEDULER_COMM))
            fell = self._schedulers is not None and schedulers < self._schedulers
            self._schedulers = schedulers
        else:
            fell = False
        if holders is None or not self._lost:
            return []
        listed = {p.get("pid") for p in holders if isinstance(p, dict)}
        gone = [pid for pid in self._held if pid not in listed]
        self._lost = 0
        if fell:
            self._ranks.update(gone)
        return [(pid, None) for pid in gone]

    def _note_holders(self, holders):
        """The GPU memory of the unit's holders (with a tree: its processes only; without one every
        holder may be the unit's, and only a holder leaving as the unit's count falls is read as its)."""
        if holders is None:
            return
        for p in holders:
            if not isinstance(p, dict) or not isinstance(p.get("pid"), int):
                continue
            pid = p["pid"]
            if self._tree is not None and pid not in self._tree:
                continue
            mib = p.get("mem_mib") if isinstance(p.get("mem_mib"), (int, float)) else 0
            self._held.setdefault(pid, {})[p.get("gpu")] = int(mib)

    def judge(self, t, signs_after, gpus_busy):
        """The Departure that is a death by now, or None. signs_after(since_t) -> (life, frozen) of
        this poll (line_verdicts.py); gpus_busy: a fresh GPU reading shows a board at work."""
        for d in list(self.open):
            if d.rank:
                return d
            if t - d.seen_t > self.settings.line_confirm_window_s:
                self._left(d)
                continue
            if t <= d.seen_t:
                continue
            life, frozen = signs_after(d.seen_t)
            # its own memory freed and its own leaving are the departure, not life after it
            life = [x for x in life if x not in ("gpu_mem", "children")]
            if life or frozen is False or gpus_busy:
                self._left(d)
            elif frozen:
                d.frozen_t = d.seen_t if d.frozen_t is None else d.frozen_t
                if t - d.frozen_t >= self.settings.child_freeze_min_s:
                    return d
        return None

    def _left(self, d):
        self.open.remove(d)
        self.left_normally.append("%s (pid %s)" % (d.name or "?", d.pid))
