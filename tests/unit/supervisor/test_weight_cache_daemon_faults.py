"""The weight cache paths that run unattended decide as the restart playbook does (issue 37,
item 4): a malformed ready file beside a daemon that listens is a warning, not a kill; a
warm start that failed makes the next engine start cold (the daemon's processes stopped so
that its unit loads the weights again); the engine's wait for its daemon lasts while the
daemon shows a load in progress, not a fixed half hour. Real processes, Unix sockets,
ready files and start records; the supervisor runs as in the unit (conftest.py)."""
import json
import os
import signal
import subprocess
import shutil
import sys
import tempfile
import time

import pytest

from ansible_collections.sglang_ops.serving.plugins.module_utils.domain import warm_cold
from ansible_collections.sglang_ops.serving.plugins.module_utils.host.weight_cache_state import DaemonHealth
from ansible_collections.sglang_ops.serving.plugins.module_utils.records import start_records
from ansible_collections.sglang_ops.serving.plugins.module_utils.services import weight_cache_watch
from ansible_collections.sglang_ops.serving.plugins.module_utils.services.weight_cache_watch import DaemonWait
from ansible_collections.sglang_ops.serving.tests.unit.supervisor.conftest import IN_UNIT, SRC

# A daemon launcher as SGLang's: one child per GPU that binds its Unix socket (listening) and
# then writes its ready file naming itself; the launcher exits when a child dies.
LISTENING_LAUNCHER = r"""
import os, socket, subprocess, sys, time
sys.path.insert(0, %r)
from sglang.standin.gpustate import gpu_uuid
ready_t = os.environ["SGLANG_WEIGHT_CACHE_READY_TEMPLATE"]
sock_t = os.environ["SGLANG_WEIGHT_CACHE_SOCKET_TEMPLATE"]
CHILD = '''
import os, socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(sys.argv[1]); s.listen(4)
with open(sys.argv[2], "w") as f:
    f.write("pid=%%d\\nconfig={}\\n" %% os.getpid())
time.sleep(600)
'''
kids = []
for g in range(int(os.environ["SGLANG_STANDIN_GPUS"])):
    uuid = gpu_uuid(g).removeprefix("GPU-")
    kids.append(subprocess.Popen([sys.executable, "-c", CHILD, sock_t.replace("{device_uuid}", uuid),
                                  ready_t.replace("{device_uuid}", uuid)]))
print("All %%d weight cache daemons on node 0 are ready" %% len(kids), flush=True)
while all(k.poll() is None for k in kids):
    time.sleep(0.2)
sys.exit(1)
""" % SRC


def _uuids(n=2):
    sys.path.insert(0, SRC)
    from sglang.standin.gpustate import gpu_uuid
    return [gpu_uuid(g).removeprefix("GPU-") for g in range(n)]


def _templates(tmp_path):
    # a short folder of its own: a Unix socket's path has at most 107 bytes
    folder = tempfile.mkdtemp(prefix="wc-", dir="/tmp")
    (tmp_path / "run-weights").symlink_to(folder)
    return os.path.join(folder, "{device_uuid}.ready"), os.path.join(folder, "{device_uuid}.sock")


@pytest.fixture(autouse=True)
def _remove_short_folders(tmp_path):
    yield
    link = tmp_path / "run-weights"
    if link.is_symlink():
        shutil.rmtree(os.readlink(link), ignore_errors=True)


def _listening_daemon(supervise, tmp_path):
    ready_t, sock_t = _templates(tmp_path)
    env = {"SGLANG_WEIGHT_CACHE_READY_TEMPLATE": ready_t, "SGLANG_WEIGHT_CACHE_SOCKET_TEMPLATE": sock_t}
    run = supervise(settings={"serves": "weight_cache", "weight_cache_ready_template": ready_t},
                    standin=env, server=[sys.executable, "-c", LISTENING_LAUNCHER])
    run.wait_for(lambda: run.notify.values("READY"), what="READY=1")
    return run, ready_t, sock_t


def _watchdogs(run):
    return len(run.notify.values("WATCHDOG"))


def test_a_malformed_ready_file_beside_a_listening_daemon_is_a_warning_not_a_kill(supervise, tmp_path):
    run, ready_t, dummy_sock_t = _listening_daemon(supervise, tmp_path)
    path = ready_t.replace("{device_uuid}", _uuids()[0])
    with open(path) as fh:
        pid = int(fh.readline().split("=")[1])
    with open(path, "w") as fh:
        fh.write("garbage \x00\xff no pid here\n")
    run.wait_for(lambda: "names no pid, but its daemon listens" in run.output(), timeout=20, what="the warning")
    before = _watchdogs(run)
    time.sleep(3)                                        # six liveness checks
    assert run.proc.poll() is None                       # the daemon's supervisor did not end its start
    assert _watchdogs(run) > before                      # and still tells systemd it is alive
    assert any("1 GPU(s) with a ready file or socket at fault" in s for s in run.notify.values("STATUS"))
    assert run.record()["verdict"] == "ready"
    # the daemon itself dying is still a death, malformed file or not
    os.kill(pid, signal.SIGKILL)
    assert run.wait(30) == 79
    assert run.record()["reason_code"] == "weight_cache_daemon_died"


def test_a_malformed_ready_file_without_a_listening_socket_is_a_dead_daemon(supervise, tmp_path):
    run, ready_t, sock_t = _listening_daemon(supervise, tmp_path)
    uuid = _uuids()[1]
    os.unlink(sock_t.replace("{device_uuid}", uuid))
    with open(sock_t.replace("{device_uuid}", uuid), "w") as fh:
        fh.write("a regular file where the socket was\n")   # not a socket: no daemon answers there
    with open(ready_t.replace("{device_uuid}", uuid), "w") as fh:
        fh.write("garbage\n")
    assert run.wait(30) == 79
    assert "names no pid" in run.record()["reason"]


def test_a_regular_file_in_place_of_a_live_daemons_socket_is_a_warning_to_its_supervisor(supervise, tmp_path):
    # the daemon still serves the engine attached to it; the next engine start reloads it
    run, dummy_ready_t, sock_t = _listening_daemon(supervise, tmp_path)
    path = sock_t.replace("{device_uuid}", _uuids()[1])
    os.unlink(path)
    with open(path, "w") as fh:
        fh.write("planted\n")
    run.wait_for(lambda: "is a regular file, not a socket; the next engine start reloads the daemon" in run.output(),
                 timeout=20, what="the warning")
    time.sleep(2)
    assert run.proc.poll() is None and run.record()["verdict"] == "ready"


def test_a_fifo_planted_in_place_of_a_ready_file_is_removed_before_the_daemons_launch(supervise, tmp_path):
    # the launcher writes its ready files with open(): on a FIFO it would block forever
    ready_t, sock_t = _templates(tmp_path)
    planted = ready_t.replace("{device_uuid}", _uuids()[0])
    os.mkfifo(planted)
    env = {"SGLANG_WEIGHT_CACHE_READY_TEMPLATE": ready_t, "SGLANG_WEIGHT_CACHE_SOCKET_TEMPLATE": sock_t}
    run = supervise(settings={"serves": "weight_cache", "weight_cache_ready_template": ready_t},
                    standin=env, server=[sys.executable, "-c", LISTENING_LAUNCHER])
    try:
        run.wait_for(lambda: run.notify.values("READY"), timeout=30, what="READY=1")
        assert "removed the planted ready file %s before the daemon's launch" % planted in run.output()
        assert "a FIFO" in run.output()
    finally:
        try:   # a writer still blocked in open() gets its reader and ends
            os.close(os.open(planted, os.O_RDONLY | os.O_NONBLOCK))
        except OSError:
            pass


def test_socket_answers_needs_a_listening_socket_held_by_the_given_processes(tmp_path):
    import socket
    path = str(tmp_path / "s.sock")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(path)
    try:
        assert not weight_cache_watch.socket_answers(path, weight_cache_watch.listening_unix_sockets(), [os.getpid()])
        s.listen(1)
        listening = weight_cache_watch.listening_unix_sockets()
        assert path in listening
        assert weight_cache_watch.socket_answers(path, listening, [os.getpid()])
        assert not weight_cache_watch.socket_answers(path, listening, [os.getppid()])
        plain = tmp_path / "plain.sock"
        plain.write_text("x")
        assert not weight_cache_watch.socket_answers(str(plain), listening, [os.getpid()])
    finally:
        s.close()


# ---- the engine: cold after a failed warm start ---------------------------------------------
def _previous_start(starts, verdict, code, kind, ended_at):
    rec = start_records.StartRecord(str(starts), ended_at - 30, 4242)
    rec.update(verdict=verdict, reason_code=code, restart_kind=kind, ended_at=ended_at)
    return rec


def _sleeper():
    return subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])


def _write_ready(ready_t, pid, mtime=None):
    for uuid in _uuids():
        path = ready_t.replace("{device_uuid}", uuid)
        with open(path, "w") as fh:
            fh.write("pid=%d\nconfig={}\n" % pid)
        if mtime is not None:
            os.utime(path, (mtime, mtime))


def test_after_a_failed_warm_start_the_engine_stops_an_older_daemon_and_starts_cold(supervise, tmp_path):
    ready_t, dummy = _templates(tmp_path)
    old_daemon = _sleeper()
    _write_ready(ready_t, old_daemon.pid, mtime=time.time() - 600)      # loaded long before
    _previous_start(tmp_path / "starts", "failed", "fatal_error", "warm", time.time() - 5)
    run = supervise(settings={"weight_cache_ready_template": ready_t, "start_timeout_s": 120}, prelude=IN_UNIT)
    try:
        run.wait_for(lambda: "stopping the weight cache daemon's processes %d" % old_daemon.pid in run.output(),
                     timeout=30, what="the daemon stopped")
        assert old_daemon.wait(10) == -signal.SIGTERM
        assert not run.server_pids()                    # the engine waits for the reloaded daemon
        time.sleep(1.5)
        assert not run.server_pids()                    # the old, healthy-looking files do not count
        new_daemon = _sleeper()
        try:
            _write_ready(ready_t, new_daemon.pid)       # the daemon's unit loaded again
            run.wait_for(lambda: run.notify.values("READY"), timeout=90, what="READY=1")
            record = run.record()
            assert (record["restart_kind"], record["restart_kind_reason"]) == ("cold", "warm_start_failed")
            assert "cold start" in [m for dummy_t, m in run.notify.messages if "READY" in m][0]["STATUS"]
        finally:
            new_daemon.kill()
            new_daemon.wait()
    finally:
        old_daemon.kill()
        old_daemon.wait()


def test_a_daemon_loaded_after_the_failed_start_is_kept_and_the_start_is_cold(supervise, tmp_path):
    ready_t, dummy = _templates(tmp_path)
    daemon = _sleeper()
    try:
        _previous_start(tmp_path / "starts", "stalled", "stall_idle", "warm", time.time() - 60)
        _write_ready(ready_t, daemon.pid)               # written after that start ended: reloaded since
        run = supervise(settings={"weight_cache_ready_template": ready_t, "start_timeout_s": 120}, prelude=IN_UNIT)
        run.wait_for(lambda: run.notify.values("READY"), timeout=90, what="READY=1")
        assert daemon.poll() is None
        assert "the weight cache daemon was loaded since" in run.output()
        assert run.record()["restart_kind"] == "cold"
    finally:
        daemon.kill()
        daemon.wait()


def test_a_start_after_the_daemon_was_reloaded_is_recorded_cold_and_the_daemon_kept(supervise, tmp_path):
    ready_t, dummy = _templates(tmp_path)
    daemon = _sleeper()
    try:
        _previous_start(tmp_path / "starts", "ready", "ready", "warm", time.time() - 60)   # stopped by a run
        _write_ready(ready_t, daemon.pid)               # then the run restarted the daemon (cold)
        run = supervise(settings={"weight_cache_ready_template": ready_t, "start_timeout_s": 120}, prelude=IN_UNIT)
        run.wait_for(lambda: run.notify.values("READY"), timeout=90, what="READY=1")
        assert daemon.poll() is None and "stopping the weight cache daemon" not in run.output()
        assert (run.record()["restart_kind"], run.record()["restart_kind_reason"]) == ("cold", "daemon_reloaded")
    finally:
        daemon.kill()
        daemon.wait()


def test_after_a_ready_or_cold_start_the_engine_starts_warm(supervise, tmp_path):
    ready_t, dummy = _templates(tmp_path)
    daemon = _sleeper()
    try:
        _write_ready(ready_t, daemon.pid, mtime=time.time() - 600)
        _previous_start(tmp_path / "starts", "stalled", "stall_idle", "cold", time.time() - 5)
        run = supervise(settings={"weight_cache_ready_template": ready_t, "start_timeout_s": 120}, prelude=IN_UNIT)
        run.wait_for(lambda: run.notify.values("READY"), timeout=90, what="READY=1")
        assert daemon.poll() is None and "cold start" not in run.output()
        header_kind = json.loads(open(os.path.join(run.current_dir(), "trace.jsonl")).readline())["weight_cache"]
        assert header_kind["restart_kind"] == "warm"
    finally:
        daemon.kill()
        daemon.wait()


def test_a_regular_file_in_place_of_the_socket_makes_the_first_start_cold(supervise, tmp_path):
    # the daemon's supervisor says ready and its daemon lives, but a GPU's socket is a plain
    # file: the engine starts cold at once (the daemon reloaded), never warm on that socket
    import socket
    ready_t, sock_t = _templates(tmp_path)
    old_daemon = _sleeper()
    _write_ready(ready_t, old_daemon.pid, mtime=time.time() - 600)
    for uuid in _uuids():
        with open(sock_t.replace("{device_uuid}", uuid), "w") as fh:
            fh.write("planted\n")
    _previous_start(tmp_path / "starts", "ready", "ready", "warm", time.time() - 60)
    daemon_start = start_records.StartRecord(str(tmp_path / "starts-weights"), time.time() - 700, os.getpid())
    daemon_start.update(verdict="ready", reason_code="ready")
    run = supervise(settings={"weight_cache_ready_template": ready_t, "start_timeout_s": 120}, prelude=IN_UNIT,
                    standin={"SGLANG_WEIGHT_CACHE_SOCKET_TEMPLATE": sock_t})
    listeners = []
    try:
        run.wait_for(lambda: "stopping the weight cache daemon's processes %d" % old_daemon.pid in run.output(),
                     timeout=30, what="the daemon stopped")
        assert old_daemon.wait(10) == -signal.SIGTERM
        assert "is a regular file, not a socket" in run.output()
        assert not run.server_pids()
        new_daemon = _sleeper()
        for uuid in _uuids():                            # the daemon's unit loaded again: real sockets
            path = sock_t.replace("{device_uuid}", uuid)
            os.unlink(path)
            listeners.append(socket.socket(socket.AF_UNIX, socket.SOCK_STREAM))
            listeners[-1].bind(path)
            listeners[-1].listen(1)
        try:
            _write_ready(ready_t, new_daemon.pid)
            run.wait_for(lambda: run.notify.values("READY"), timeout=90, what="READY=1")
            record = run.record()
            assert record["restart_kind"] == "cold"
            assert record["restart_kind_reason"].startswith("daemon_not_healthy: ")
            assert "is a regular file, not a socket" in record["restart_kind_reason"]
        finally:
            new_daemon.kill()
            new_daemon.wait()
    finally:
        for listener in listeners:
            listener.close()
        old_daemon.kill()
        old_daemon.wait()


def test_the_supervisors_rule_is_the_playbooks_decision():
    def reason(previous):
        planned = warm_cold.decide(previous, True)
        return planned.reason if planned.cold else None
    assert reason(None) is None
    assert reason({"verdict": "failed", "reason_code": "fatal_error", "restart_kind": "warm"}) == "warm_start_failed"
    assert reason({"verdict": "failed", "reason_code": "fatal_packing",
                   "restart_kind": "cold"}) == "implicates_weights: fatal_packing"
    assert reason({"verdict": "ready", "restart_kind": "cold_fallback"}) == "fallback_to_disk"
    assert reason({"verdict": "stopped", "restart_kind": "warm"}) is None
    assert reason({"verdict": "stalled", "reason_code": "stall_idle", "restart_kind": "cold"}) is None


def test_only_the_daemon_units_own_processes_are_stopped():
    # this test's process is no process of the daemon's unit, whatever a ready file says
    health = DaemonHealth(True, {"u1": os.getpid(), "u2": os.getppid()})
    assert weight_cache_watch.daemon_pids_to_stop(health, "sglang-test") == []


# ---- the engine's wait: bounded by the daemon's own evidence ----------------------------------
NOT_READY = DaemonHealth(False, reason="1 of 2 GPUs without a live weight cache daemon: no ready file")
NO_GPUS = DaemonHealth(False, reason="the unit's GPUs are not known: nvidia-smi not found")


def _daemon_start(root, verdict, polls, pid=None, started_at=None):
    rec = start_records.StartRecord(str(root), started_at or time.time(), pid or os.getpid())
    rec.update(verdict=verdict, polls=polls, phase="weight_load", progress="weight_load 2/8 shards",
               reason_code="stall_idle" if verdict == "stalled" else verdict, reason="")
    return rec


def test_a_daemon_whose_start_moves_is_waited_for_past_the_grace(tmp_path):
    root = tmp_path / "starts-weights"
    rec = _daemon_start(root, "running", 1)
    wait = DaemonWait(str(root), ceiling_s=1000, grace_s=10)
    for t in range(0, 60, 5):
        rec.update(polls=t + 2)                          # its supervisor writes every poll
        decision, words = wait.judge(NOT_READY, float(t))
        assert decision == "wait", (t, words)
    assert "the daemon loads: weight_load 2/8 shards" in words
    assert wait.judge(NOT_READY, 1000.0)[0] == "give_up"   # never past the ceiling


def test_a_daemon_whose_start_stopped_moving_is_given_up_after_the_grace(tmp_path):
    root = tmp_path / "starts-weights"
    _daemon_start(root, "running", 7)
    wait = DaemonWait(str(root), ceiling_s=1000, grace_s=10)
    assert wait.judge(NOT_READY, 0.0)[0] == "wait"
    assert wait.judge(NOT_READY, 5.0)[0] == "wait"
    decision, words = wait.judge(NOT_READY, 11.0)
    assert decision == "give_up" and "no sign of a load in progress" in words


def test_a_daemon_without_a_start_or_whose_start_failed_is_given_up_after_the_grace(tmp_path):
    root = tmp_path / "starts-weights"
    wait = DaemonWait(str(root), ceiling_s=1000, grace_s=10)
    assert wait.judge(NOT_READY, 9.0)[0] == "wait"
    decision, words = wait.judge(NOT_READY, 10.0)
    assert decision == "give_up" and "no start recorded" in words
    _daemon_start(root, "stalled", 30)
    wait = DaemonWait(str(root), ceiling_s=1000, grace_s=10)
    decision, words = wait.judge(NOT_READY, 10.0)
    assert decision == "give_up" and "newest start is stalled (stall_idle" in words


def test_a_daemon_whose_supervisor_is_gone_shows_no_evidence(tmp_path):
    root = tmp_path / "starts-weights"
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    rec = _daemon_start(root, "running", 1, pid=gone.pid)
    wait = DaemonWait(str(root), ceiling_s=1000, grace_s=10)
    for t in range(0, 10, 2):
        rec.update(polls=t)     # a planted record that changes, of a supervisor that is not running
        wait.judge(NOT_READY, float(t))
    assert wait.judge(NOT_READY, 10.0)[0] == "give_up"


def test_a_ready_daemon_by_its_supervisor_is_gone_to_when_this_unit_cannot_see_the_gpus(tmp_path):
    root = tmp_path / "starts-weights"
    _daemon_start(root, "ready", 12)
    decision, words = DaemonWait(str(root), ceiling_s=1000, grace_s=10).judge(NO_GPUS, 0.0)
    assert decision == "go" and "supervisor says ready" in words and "nvidia-smi not found" in words


def test_a_ready_start_of_the_daemon_does_not_count_once_a_ready_file_names_a_dead_pid(tmp_path):
    root = tmp_path / "starts-weights"
    _daemon_start(root, "ready", 12)         # its supervisor has not noticed yet
    decision, words = DaemonWait(str(root), ceiling_s=1000, grace_s=10).judge(NOT_READY, 0.0, dead=True)
    assert decision == "wait"


def test_the_watch_names_ready_files_of_dead_pids(tmp_path):
    ready_t, dummy = _templates(tmp_path)
    gone = subprocess.Popen([sys.executable, "-c", "pass"])
    gone.wait()
    uuids = _uuids()
    _write_ready(ready_t, gone.pid)
    watch = weight_cache_watch.WeightCacheWatch(ready_t, read_uuids=lambda *a: (["GPU-" + u for u in uuids], ""))
    assert not watch.check().healthy
    assert len(watch.dead) == 2
    _write_ready(ready_t, os.getpid())
    assert watch.check().healthy and watch.dead == ()


def test_after_a_reload_was_asked_only_a_newer_daemon_counts(tmp_path):
    root = tmp_path / "starts-weights"
    _daemon_start(root, "ready", 12, started_at=time.time() - 100)
    wait = DaemonWait(str(root), ceiling_s=1000, grace_s=10, since=time.time() - 10)
    assert wait.judge(DaemonHealth(True, {"u": 1}), 0.0)[0] == "wait"
    assert wait.judge(DaemonHealth(True, {"u": 1}), 1.0, files_fresh=True)[0] == "go"
    _daemon_start(root, "running", 1, started_at=time.time())
    assert wait.judge(NOT_READY, 2.0)[0] == "wait"


GRACE = ("from ansible_collections.sglang_ops.serving.plugins.module_utils.services import weight_cache_watch\n"
         "weight_cache_watch.DAEMON_GRACE_S = 3.0\n")


def test_without_nvidia_smi_and_no_daemon_the_engine_waits_a_bounded_time_and_says_why(supervise, tmp_path):
    ready_t, dummy = _templates(tmp_path)
    run = supervise(settings={"weight_cache_ready_template": ready_t, "start_timeout_s": 1800,
                              "nvidia_smi": str(tmp_path / "no-nvidia-smi")}, prelude=GRACE)
    run.wait_for(lambda: "waiting for the weight cache daemon:" in run.output(), timeout=20, what="the wait")
    run.wait_for(lambda: "waiting for the weight cache daemon" in run.record().get("progress", ""),
                 timeout=20, what="the wait in the start record")
    reason = run.record()["reason"]
    assert "the unit's GPUs are not known" in reason and "no start recorded" in reason
    run.wait_for(run.server_pids, timeout=30, what="the engine started")
    assert "starts without the weight cache daemon after" in run.output()
    assert run.record()["restart_kind"] == "cold"
    run.wait_for(lambda: run.notify.values("READY"), timeout=90, what="READY=1")


def test_without_nvidia_smi_the_engine_goes_when_the_daemons_supervisor_says_ready(supervise, tmp_path):
    ready_t, dummy = _templates(tmp_path)
    _daemon_start(tmp_path / "starts-weights", "ready", 12)     # this test process plays its supervisor
    run = supervise(settings={"weight_cache_ready_template": ready_t, "start_timeout_s": 1800,
                              "nvidia_smi": str(tmp_path / "no-nvidia-smi")})
    run.wait_for(run.server_pids, timeout=20, what="the engine started")
    assert "supervisor says ready" in run.output()
    assert run.record()["restart_kind"] == "warm"
