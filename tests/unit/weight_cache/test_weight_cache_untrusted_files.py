"""What the service user can plant beside the weight cache daemon is not trusted as a daemon
(issue 48): a FIFO in place of a ready file is refused without blocking, a ready file naming
a process that is not the daemon's (another user's, or outside the daemon's unit) is stale,
and a socket that is not a socket, not the daemon's user's, or that nobody accepts on is
unusable. Real FIFOs, processes of another user and Unix sockets."""
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading

import pytest

from ansible_collections.sglang_ops.serving.plugins.module_utils.host import weight_cache_state as wcs
from ansible_collections.sglang_ops.serving.plugins.module_utils.services import engine_cache_start

UUID = "GPU-aaaa-0000"
NOBODY = 65534


@pytest.fixture
def folder():
    # short: a Unix socket's path has at most 107 bytes
    path = tempfile.mkdtemp(prefix="wc-", dir="/tmp")
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def daemon():
    """A process below this test's process (the daemon's launcher), as this test's user."""
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    yield proc
    proc.kill()
    proc.wait()


def _templates(folder):
    return os.path.join(folder, "{device_uuid}.ready"), os.path.join(folder, "{device_uuid}.sock")


def _path(template):
    return template.replace("{device_uuid}", UUID.removeprefix("GPU-"))


def _write_ready(ready_t, pid):
    with open(_path(ready_t), "w") as fh:
        fh.write("pid=%d\nconfig={}\n" % pid)


def _identity(sock_t=None, unit=None):
    return wcs.DaemonIdentity(unit=unit, launcher_pid=None if unit else os.getpid(), socket_template=sock_t)


def _listening(sock_t, listen=True):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(_path(sock_t))
    if listen:
        s.listen(1)
    return s


def _health_within(seconds, *args, **kwargs):
    """daemon_health in a thread: None when it did not return within seconds (it blocks)."""
    out = []
    worker = threading.Thread(target=lambda: out.append(wcs.daemon_health(*args, **kwargs)), daemon=True)
    worker.start()
    worker.join(seconds)
    return out[0] if out else None


def test_a_fifo_in_place_of_a_ready_file_is_refused_without_blocking(folder, daemon):
    ready_t, sock_t = _templates(folder)
    os.mkfifo(_path(ready_t))
    try:
        health = _health_within(5, ready_t, [UUID])        # whoever asks: never blocks
        assert health is not None, "reading the ready file blocked on the FIFO"
        assert not health.healthy and health.faults == {UUID: wcs.READY_FILE_REFUSED}
        assert "a FIFO" in health.reason and _path(ready_t) in health.reason
        assert health.reload_cures() == (UUID,)
        assert wcs.read_ready_file(_path(ready_t)) is None
    finally:
        try:   # a reader still blocked in open() gets its writer and ends
            os.close(os.open(_path(ready_t), os.O_WRONLY | os.O_NONBLOCK))
        except OSError:
            pass


def test_a_ready_file_linked_elsewhere_is_refused(folder, daemon):
    ready_t, dummy = _templates(folder)
    target = os.path.join(folder, "elsewhere")
    with open(target, "w") as fh:
        fh.write("pid=%d\n" % daemon.pid)
    os.symlink(target, _path(ready_t))
    health = wcs.daemon_health(ready_t, [UUID], daemon=_identity())
    assert health.faults == {UUID: wcs.READY_FILE_REFUSED} and "symbolic link" in health.reason


def test_a_ready_file_naming_another_users_process_is_stale(folder):
    ready_t, dummy = _templates(folder)
    other = subprocess.Popen(["sleep", "60"], user=NOBODY)     # below this launcher, but not its user's
    try:
        _write_ready(ready_t, other.pid)
        health = wcs.daemon_health(ready_t, [UUID], daemon=_identity())
        assert not health.healthy and health.faults == {UUID: wcs.NOT_THE_DAEMON}
        assert "runs as uid %d" % NOBODY in health.reason and "stale" in health.reason
        assert health.pids == {} and health.reload_cures() == (UUID,)
        assert engine_cache_start.unusable_reason(health).startswith("daemon_not_healthy: ")
    finally:
        other.kill()
        other.wait()


def test_a_ready_file_naming_a_process_outside_the_daemons_unit_is_stale(folder, daemon):
    ready_t, dummy = _templates(folder)
    _write_ready(ready_t, daemon.pid)                 # this user's, but in no unit of that name
    health = wcs.daemon_health(ready_t, [UUID], daemon=_identity(unit="sglang-test-weights.service"))
    assert health.faults == {UUID: wcs.NOT_THE_DAEMON}
    assert "is no process of sglang-test-weights.service" in health.reason
    _write_ready(ready_t, os.getppid())               # alive, this user's, not below the launcher
    health = wcs.daemon_health(ready_t, [UUID], daemon=_identity())
    assert health.faults == {UUID: wcs.NOT_THE_DAEMON}


def test_a_daemon_of_the_launcher_with_its_listening_socket_is_healthy(folder, daemon):
    ready_t, sock_t = _templates(folder)
    _write_ready(ready_t, daemon.pid)
    s = _listening(sock_t)
    try:
        health = wcs.daemon_health(ready_t, [UUID], daemon=_identity(sock_t))
        assert health.healthy and health.pids == {UUID: daemon.pid} and health.faults == {}
        assert engine_cache_start.unusable_reason(health) is None
    finally:
        s.close()


def test_a_regular_file_in_place_of_the_socket_is_unusable(folder, daemon):
    ready_t, sock_t = _templates(folder)
    _write_ready(ready_t, daemon.pid)
    with open(_path(sock_t), "w") as fh:
        fh.write("planted\n")
    health = wcs.daemon_health(ready_t, [UUID], daemon=_identity(sock_t))
    assert not health.healthy and health.faults == {UUID: wcs.SOCKET_UNUSABLE}
    assert "is a regular file, not a socket" in health.reason
    assert health.pids == {UUID: daemon.pid}          # the daemon lives: its reload can stop it
    assert engine_cache_start.unusable_reason(health) == "daemon_not_healthy: " + health.reason


def test_a_socket_nobody_accepts_on_is_unusable(folder, daemon):
    ready_t, sock_t = _templates(folder)
    _write_ready(ready_t, daemon.pid)
    bound = _listening(sock_t, listen=False)          # bound, never listening
    try:
        health = wcs.daemon_health(ready_t, [UUID], daemon=_identity(sock_t))
        assert health.faults == {UUID: wcs.SOCKET_UNUSABLE} and "nobody accepts on the socket" in health.reason
    finally:
        bound.close()
    with pytest.raises(OSError):                      # its file stays; nothing answers there
        socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).connect(_path(sock_t))
    health = wcs.daemon_health(ready_t, [UUID], daemon=_identity(sock_t))
    assert health.faults == {UUID: wcs.SOCKET_UNUSABLE} and "nobody accepts" in health.reason


def test_a_socket_of_another_user_is_unusable(folder, daemon):
    ready_t, sock_t = _templates(folder)
    _write_ready(ready_t, daemon.pid)
    s = _listening(sock_t)
    try:
        os.chown(_path(sock_t), NOBODY, NOBODY)
        health = wcs.daemon_health(ready_t, [UUID], daemon=_identity(sock_t))
        assert health.faults == {UUID: wcs.SOCKET_UNUSABLE}
        assert "owned by uid %d, not the daemon's uid %d" % (NOBODY, os.geteuid()) in health.reason
    finally:
        s.close()


def test_a_missing_socket_is_unusable(folder, daemon):
    ready_t, sock_t = _templates(folder)
    _write_ready(ready_t, daemon.pid)
    health = wcs.daemon_health(ready_t, [UUID], daemon=_identity(sock_t))
    assert health.faults == {UUID: wcs.SOCKET_UNUSABLE} and "no socket at" in health.reason


def test_a_gone_daemon_is_no_reload_fault(folder):
    ready_t, sock_t = _templates(folder)
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    _write_ready(ready_t, proc.pid)
    health = wcs.daemon_health(ready_t, [UUID], daemon=_identity(sock_t))
    assert health.faults == {UUID: wcs.DAEMON_GONE} and health.reload_cures() == ()
    assert engine_cache_start.unusable_reason(health) is None


# ---- before the daemon's launch: what its launcher would block on or refuse beside ------------
def test_planted_ready_files_are_removed_before_the_launch_and_nothing_else(folder, daemon):
    ready_t = os.path.join(folder, "{device_uuid}.ready")
    uuids = ["GPU-fifo", "GPU-link", "GPU-other", "GPU-mine", "GPU-dead", "GPU-none"]
    paths = {u: ready_t.replace("{device_uuid}", u.removeprefix("GPU-")) for u in uuids}
    os.mkfifo(paths["GPU-fifo"])
    target = os.path.join(folder, "target")
    with open(target, "w") as fh:
        fh.write("pid=1\n")
    os.symlink(target, paths["GPU-link"])
    other = subprocess.Popen(["sleep", "60"], user=NOBODY)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    try:
        for uuid, pid in (("GPU-other", other.pid), ("GPU-mine", daemon.pid), ("GPU-dead", dead.pid)):
            with open(paths[uuid], "w") as fh:
                fh.write("pid=%d\n" % pid)
        words = wcs.clear_planted_ready_files(ready_t, uuids)
        assert not os.path.lexists(paths["GPU-fifo"]) and not os.path.lexists(paths["GPU-link"])
        assert not os.path.exists(paths["GPU-other"])
        assert open(target).read() == "pid=1\n"                    # the link's target untouched
        assert os.path.exists(paths["GPU-mine"])                   # this user's: SGLang's own refusal stands
        assert os.path.exists(paths["GPU-dead"])                   # a dead daemon's: its launcher cleans up
        assert len(words) == 3 and all("before the daemon's launch" in w for w in words)
        assert any("a FIFO" in w for w in words) and any("runs as uid %d" % NOBODY in w for w in words)
    finally:
        other.kill()
        other.wait()
