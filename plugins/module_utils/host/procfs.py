"""CPU time, storage I/O, names and states of a set of processes, from /proc.

Parsing of /proc/PID/stat and /proc/PID/io is pure; `read_procs` is the IO edge. A
process may exit between listing and reading: it is then simply not counted.
"""
import os
from dataclasses import dataclass, field

EXITED_STATES = ("Z", "X")   # zombie (not reaped yet), dead
CLOCK_TICKS_PER_S = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


@dataclass
class ProcStat:
    pid: int
    comm: str
    state: str
    ppid: int
    cpu_ticks: int  # utime + stime + cutime + cstime (reaped children's CPU stays counted)
    exit_code: object = None  # field 52: a zombie's wait status (its signal or exit status), else 0


@dataclass
class ProcIo:
    read_bytes: int
    write_bytes: int


@dataclass
class ProcsSummary:
    count: int = 0
    cpu_s: float = 0.0
    read_bytes: object = 0   # None when /proc/PID/io could not be read for any process
    write_bytes: object = 0
    comm: dict = field(default_factory=dict)
    states: dict = field(default_factory=dict)
    io_unreadable: int = 0
    tree: list = field(default_factory=list)   # [{"pid", "ppid", "name"}] of each process read

    def to_obs(self):
        d = {"count": self.count, "cpu_s": round(self.cpu_s, 2), "comm": dict(self.comm),
             "states": dict(self.states), "tree": [dict(p) for p in self.tree]}
        if self.read_bytes is not None:
            d["read_bytes"] = self.read_bytes
            d["write_bytes"] = self.write_bytes
        return d


def parse_stat(text):
    """One /proc/PID/stat line -> ProcStat. The name may hold spaces and ')' itself,
    so it is taken up to the last ')'."""
    open_i = text.index("(")
    close_i = text.rindex(")")
    pid = int(text[:open_i].strip())
    comm = text[open_i + 1:close_i]
    rest = text[close_i + 2:].split()
    # rest[0] is field 3 (state); utime..cstime are fields 14..17.
    state = rest[0]
    ppid = int(rest[1])
    ticks = sum(int(x) for x in rest[11:15])
    exit_code = int(rest[49]) if len(rest) > 49 else None
    return ProcStat(pid=pid, comm=comm, state=state, ppid=ppid, cpu_ticks=ticks, exit_code=exit_code)


def parse_io(text):
    """/proc/PID/io -> ProcIo (storage bytes, not rchar/wchar)."""
    vals = {}
    for line in text.splitlines():
        key, dummy_sep, value = line.partition(":")
        if value.strip().isdigit():
            vals[key.strip()] = int(value)
    return ProcIo(read_bytes=vals.get("read_bytes", 0), write_bytes=vals.get("write_bytes", 0))


def _read(path):
    with open(path, "rb") as f:
        return f.read().decode("utf-8", errors="replace")


def read_stat(pid, proc_root="/proc"):
    try:
        return parse_stat(_read("%s/%d/stat" % (proc_root, pid)))
    except (OSError, ValueError, IndexError):
        return None


def read_io(pid, proc_root="/proc"):
    try:
        return parse_io(_read("%s/%d/io" % (proc_root, pid)))
    except OSError:
        return None


def all_pids(proc_root="/proc"):
    try:
        return [int(n) for n in os.listdir(proc_root) if n.isdigit()]
    except OSError:
        return []


def descendants(root_pid, proc_root="/proc"):
    """root_pid and every process below it (by PPid), from one scan of /proc."""
    children = {}
    for pid in all_pids(proc_root):
        st = read_stat(pid, proc_root)
        if st is not None:
            children.setdefault(st.ppid, []).append(pid)
    if not os.path.exists("%s/%d" % (proc_root, root_pid)):
        return []
    found, todo = [], [root_pid]
    while todo:
        pid = todo.pop()
        if pid in found:
            continue
        found.append(pid)
        todo.extend(children.get(pid, ()))
    return sorted(found)


def read_cmdline(pid, proc_root="/proc"):
    try:
        raw = _read("%s/%d/cmdline" % (proc_root, pid))
    except OSError:
        return None
    return raw.replace("\0", " ").strip()


def process_name(comm, cmdline):
    """The name a process gave itself: a title it set (setproctitle writes it over the command
    line and its first 15 characters as comm, as SGLang titles its schedulers), else its comm."""
    first = (cmdline or "").split(" ")[0]
    return first if len(first) > len(comm) and first.startswith(comm) else comm


def summarize(stats, ios, clock_ticks_per_s=CLOCK_TICKS_PER_S, names=None):
    """Pure: per-process readings -> ProcsSummary. `ios` maps pid -> ProcIo or None; `names`
    pid -> the name process_name() gave it (default: its comm)."""
    s = ProcsSummary()
    any_io = False
    for st in stats:
        s.count += 1
        member = {"pid": st.pid, "ppid": st.ppid, "name": (names or {}).get(st.pid, st.comm), "state": st.state}
        if st.state in EXITED_STATES and st.exit_code is not None:
            member["exit_code"] = st.exit_code   # a zombie its parent has not reaped: how it ended
        s.tree.append(member)
        s.cpu_s += st.cpu_ticks / float(clock_ticks_per_s)
        s.comm[st.comm] = s.comm.get(st.comm, 0) + 1
        s.states[st.state] = s.states.get(st.state, 0) + 1
        io = ios.get(st.pid)
        if io is None:
            s.io_unreadable += 1
            continue
        any_io = True
        s.read_bytes += io.read_bytes
        s.write_bytes += io.write_bytes
    if stats and not any_io:
        s.read_bytes = s.write_bytes = None
    return s


def read_procs(pids, proc_root="/proc"):
    """Summary over the given PIDs; processes gone by the time they are read are skipped."""
    stats, ios, names = [], {}, {}
    for pid in pids:
        st = read_stat(pid, proc_root)
        if st is None:
            continue
        stats.append(st)
        ios[pid] = read_io(pid, proc_root)
        names[pid] = process_name(st.comm, read_cmdline(pid, proc_root))
    return summarize(stats, ios, names=names)
