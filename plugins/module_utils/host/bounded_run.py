"""Run a command on the host with a hard time limit that also holds for hung children.

subprocess.run(timeout=...) kills only the direct child and then waits for the pipes to
close; a grandchild (a shell wrapper's `sleep`, a driver call stuck in the kernel) keeps
them open and the wait never ends. Here the command gets its own process group, the
whole group is killed on timeout, and the pipes are abandoned after a short grace.
"""
import os
import shutil
import signal
import subprocess
from dataclasses import dataclass


@dataclass
class RunResult:
    rc: object  # int exit status, or None when it did not finish
    stdout: str
    stderr: str
    timed_out: bool = False
    missing: bool = False  # the executable was not found

    @property
    def ok(self):
        return self.rc == 0 and not self.timed_out and not self.missing


def find_executable(name, extra_dirs=()):
    """PATH first, then the given folders (e.g. /usr/local/nvidia/bin); None if absent."""
    if os.sep in name:
        return name if os.access(name, os.X_OK) else None
    found = shutil.which(name)
    if found:
        return found
    for d in extra_dirs:
        cand = os.path.join(d, name)
        if os.access(cand, os.X_OK):
            return cand
    return None


def _kill_group(proc):
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        try:
            proc.kill()
        except ProcessLookupError:
            pass


def bounded_run(argv, timeout_s, env=None):
    """Run argv (argv[0] already resolved or on PATH); never raises for a missing binary or a hang."""
    try:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True, env=env)
    except (FileNotFoundError, PermissionError, NotADirectoryError) as e:
        return RunResult(None, "", str(e), missing=True)
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        try:
            out, err = proc.communicate(timeout=1.0)
        except subprocess.TimeoutExpired:
            # Something outside our group still holds the pipes; give up on them.
            out, err = b"", b""
        return RunResult(None, _text(out), _text(err), timed_out=True)
    return RunResult(proc.returncode, _text(out), _text(err))


def _text(b):
    return (b or b"").decode("utf-8", errors="replace")
