"""The supervised server's process: spawned in a process group of its own with its output
on a pipe into the log pump (log_pump.py), read as the detector reads a unit, and stopped
(SIGTERM to the group, SIGKILL after the stop timeout) on every way out of the supervisor."""
import os
import signal
import subprocess

from ansible_collections.sglang_ops.serving.plugins.module_utils.services import log_pump

# How long the last resort's SIGKILL waits for the process to be reaped.
KILL_REAP_S = 30


class ServerProcess:
    """The server's child process and the pump of its output; child and pump are None
    until spawn."""

    def __init__(self, argv, out_fd, clock, warn, stop_timeout_s):
        self.argv = list(argv)
        self.out_fd, self.clock, self.warn = out_fd, clock, warn
        self.stop_timeout_s = stop_timeout_s
        self.child = None
        self.pump = None

    def spawn(self, blank):
        """Start the server without systemd's notify and watchdog variables (the supervisor
        is the unit's notifier); its output goes through the pump, blank: what it hides."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("NOTIFY_SOCKET", "WATCHDOG_"))}
        read_fd, write_fd = os.pipe()
        try:
            self.child = subprocess.Popen(self.argv, stdin=subprocess.DEVNULL, stdout=write_fd, stderr=write_fd,
                                          env=env, process_group=0)
        except BaseException:
            os.close(read_fd)
            raise
        finally:
            os.close(write_fd)
        self.pump = log_pump.LogPump(read_fd, blank, self.out_fd, clock=self.clock, warn=self.warn)
        self.pump.start()

    def stop(self):
        """SIGTERM to the server's process group, SIGKILL after stop_timeout_s; safe to call
        on every exit path, twice included."""
        child = self.child
        if child is None or child.poll() is not None:
            return
        try:
            os.killpg(child.pid, signal.SIGTERM)
        except OSError:
            pass
        try:
            child.wait(self.stop_timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()

    def kill(self):
        """SIGKILL to the server's process group, and reap it (the last resort's stop)."""
        child = self.child
        if child is None:
            return
        try:
            os.killpg(child.pid, signal.SIGKILL)
        except OSError:
            pass
        try:
            child.wait(KILL_REAP_S)
        except (subprocess.TimeoutExpired, OSError):
            pass

    def unit_view(self):
        """The server process as the detector reads a unit: running, or gone with its status."""
        status = self.child.poll()
        if status is None:
            return {"active": "active", "sub": "running", "main_pid": self.child.pid}
        return {"active": "inactive", "sub": "exited", "main_pid": 0, "exec_main_status": status}
