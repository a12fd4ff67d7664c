"""/proc parsing on captured text, and the reader against real processes."""
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from ansible_collections.sglang_ops.serving.plugins.module_utils.host import procfs
from ansible_collections.sglang_ops.serving.tests.unit.probe.conftest import data


def test_stat_with_spaces_and_parentheses_in_the_name():
    st = procfs.parse_stat(data("proc-stat-odd-comm.txt"))
    assert (st.pid, st.comm, st.state, st.ppid) == (5248, "odd (name) x", "S", 5247)
    assert st.cpu_ticks == 0


def test_stat_cpu_ticks_add_user_system_and_reaped_children():
    line = "42 (python3) R 1 42 42 0 -1 4194304 10 0 0 0 300 45 7 3 20 0 9 0 100 0 0"
    assert procfs.parse_stat(line).cpu_ticks == 300 + 45 + 7 + 3


def test_io_takes_storage_bytes_not_rchar():
    io = procfs.parse_io(data("proc-io-sleep.txt"))
    text = data("proc-io-sleep.txt")
    assert "rchar" in text
    assert (io.read_bytes, io.write_bytes) == (
        int(text.split("read_bytes: ")[1].split()[0]), int(text.split("\nwrite_bytes: ")[1].split()[0]))


def test_summary_counts_names_and_states_and_converts_ticks():
    stats = [procfs.ProcStat(1, "python3", "S", 0, 250), procfs.ProcStat(2, "python3", "T", 1, 50),
             procfs.ProcStat(3, "cc1plus", "R", 1, 100)]
    ios = {1: procfs.ProcIo(4096, 0), 2: None, 3: procfs.ProcIo(0, 8192)}
    s = procfs.summarize(stats, ios, clock_ticks_per_s=100)
    assert (s.count, s.cpu_s, s.read_bytes, s.write_bytes) == (3, 4.0, 4096, 8192)
    assert s.comm == {"python3": 2, "cc1plus": 1} and s.states == {"S": 1, "T": 1, "R": 1}


def test_summary_without_any_readable_io_leaves_bytes_out():
    s = procfs.summarize([procfs.ProcStat(1, "x", "S", 0, 0)], {1: None})
    assert "read_bytes" not in s.to_obs()


def test_vanished_processes_are_skipped(child):
    p = child("pass")
    p.wait()
    s = procfs.read_procs([os.getpid(), p.pid])
    assert s.count == 1


def _wait_for(pred, timeout_s=20.0):
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(0.1)
    return False


def test_cpu_and_storage_reads_of_a_real_process_move(child, tmp_path):
    big = tmp_path / "shard.bin"
    big.write_bytes(os.urandom(4 * 1024 * 1024))
    fd = os.open(big, os.O_RDONLY)
    os.fsync(fd)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)
    p = child("""
        import sys, time
        sys.stdout.write("go\\n"); sys.stdout.flush()
        sys.stdin = None
        time.sleep(0.3)
        with open(sys.argv[1], "rb") as f:
            while f.read(1 << 20):
                pass
        end = time.process_time() + 1.0  # CPU time, so a busy machine cannot shorten it
        while time.process_time() < end:
            pass
        sys.stdout.write("done\\n"); sys.stdout.flush()
        time.sleep(60)
        """, str(big))
    assert p.stdout.readline() == b"go\n"
    before = procfs.read_procs(procfs.descendants(p.pid))
    assert p.stdout.readline() == b"done\n"
    after = procfs.read_procs(procfs.descendants(p.pid))
    assert after.cpu_s - before.cpu_s >= 0.5
    assert after.read_bytes - before.read_bytes >= 4 * 1024 * 1024


def test_stopped_process_shows_state_t(child):
    p = child("import time\ntime.sleep(60)")
    os.kill(p.pid, signal.SIGSTOP)
    assert _wait_for(lambda: procfs.read_procs([p.pid]).states.get("T") == 1)
    os.kill(p.pid, signal.SIGCONT)
    assert _wait_for(lambda: "T" not in procfs.read_procs([p.pid]).states)


def test_descendants_include_grandchildren(child):
    p = child("""
        import subprocess, sys, time
        c = subprocess.Popen(["sleep", "60"])
        sys.stdout.write("%d\\n" % c.pid); sys.stdout.flush()
        time.sleep(60)
        """)
    grandchild = int(p.stdout.readline())
    try:
        pids = procfs.descendants(p.pid)
        assert pids == sorted([p.pid, grandchild])
        assert procfs.read_procs(pids).comm.get("sleep") == 1
    finally:
        os.kill(grandchild, signal.SIGKILL)


def test_descendants_of_a_missing_pid_is_empty():
    assert procfs.descendants(2 ** 22 + 12345) == []


def test_a_process_title_is_its_name_and_a_plain_command_its_comm():
    assert procfs.process_name("sglang::schedul", "sglang::scheduler_TP3") == "sglang::scheduler_TP3"
    assert procfs.process_name("python3", "python3 -m sglang.launch_server") == "python3"
    assert procfs.process_name("python3", "/usr/bin/python3 -m x") == "python3"
    assert procfs.process_name("sleep", None) == "sleep"


TITLED_CHILD = """
    import ctypes, subprocess, sys, time
    code = "import ctypes, time; ctypes.CDLL(None).prctl(15, b'sglang::schedul', 0, 0, 0); time.sleep(60)"
    c = subprocess.Popen(["bash", "-c", 'exec -a sglang::scheduler_TP0 "$0" -c "$1"', sys.executable, code])
    sys.stdout.write("%d\\n" % c.pid); sys.stdout.flush()
    sys.stdin.readline()     # the launcher waits without reaping its child
    c.wait()
    sys.stdout.write("reaped\\n"); sys.stdout.flush()
    time.sleep(60)
    """


def _titled_scheduler(child):
    p = subprocess.Popen([sys.executable, "-c", textwrap.dedent(TITLED_CHILD)], stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    child.append(p)
    rank = int(p.stdout.readline())
    assert _wait_for(lambda: "sglang::scheduler_TP0" in _names(p.pid))
    return p, rank


def _names(root):
    return {m["name"] for m in procfs.read_procs(procfs.descendants(root)).to_obs()["tree"]}


@pytest.fixture
def spawned():
    procs = []
    yield procs
    for p in procs:
        p.kill()
        p.wait()


def test_a_sigkilled_child_reads_as_a_zombie_with_its_signal_then_leaves_the_tree(spawned):
    p, rank = _titled_scheduler(spawned)
    members = {m["pid"]: m for m in procfs.read_procs(procfs.descendants(p.pid)).to_obs()["tree"]}
    assert members[rank]["name"] == "sglang::scheduler_TP0" and members[rank]["ppid"] == p.pid
    os.kill(rank, signal.SIGKILL)

    def zombie():
        m = {m["pid"]: m for m in procfs.read_procs(procfs.descendants(p.pid)).to_obs()["tree"]}.get(rank)
        return m is not None and m["state"] == "Z"
    assert _wait_for(zombie)
    member = [m for m in procfs.read_procs(procfs.descendants(p.pid)).to_obs()["tree"] if m["pid"] == rank][0]
    assert member["exit_code"] & 0x7F == signal.SIGKILL
    p.stdin.write(b"\n")
    p.stdin.flush()
    assert p.stdout.readline() == b"reaped\n"
    assert rank not in {m["pid"] for m in procfs.read_procs(procfs.descendants(p.pid)).to_obs()["tree"]}
