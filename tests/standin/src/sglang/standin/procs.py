"""Process plumbing of the SGLang stand-in: titled children, names, parent-death.

A child is started by exec'ing the Python interpreter with argv = [title] and its
bootstrap script on stdin, so /proc/PID/cmdline reads exactly the title (as
setproctitle makes it for real SGLang); the child then sets its comm with
prctl(PR_SET_NAME) and asks for SIGKILL when its parent dies.
"""
import base64
import ctypes
import json
import os
import signal
import subprocess
import sys
import time

PR_SET_PDEATHSIG = 1
PR_SET_NAME = 15

_libc = None


def _prctl(option, arg):
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None, use_errno=True)
    return _libc.prctl(option, arg, 0, 0, 0)


def set_comm(name):
    _prctl(PR_SET_NAME, ctypes.c_char_p(name.encode()[:15]))


def kill_itself_when_parent_died():
    _prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def die_with_parent(parent_pid):
    kill_itself_when_parent_died()
    if os.getppid() != parent_pid:
        os._exit(1)


def _stat_fields(pid):
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read().decode("utf-8", "replace")
    except OSError:
        return None
    # comm may contain spaces and parentheses: split after the last ')'
    return data[data.rindex(")") + 2:].split()


def proc_state(pid):
    f = _stat_fields(pid)
    return f[0] if f else None


def proc_start_ticks(pid):
    f = _stat_fields(pid)
    return int(f[19]) if f else None


_BOOT = ("import base64,json,sys\n"
         "spec=json.loads(base64.b64decode({blob!r}))\n"
         "sys.path[:0]=spec['sys_path']\n"
         "import importlib\n"
         "importlib.import_module(spec['module']).child_main(spec)\n")


def spawn(title, module, spec, pass_fds=(), new_session=False, stdout=None):
    """Start `module.child_main(spec)` in a process whose cmdline is `title`."""
    spec = dict(spec, module=module, title=title, parent_pid=os.getpid(),
                sys_path=[p for p in sys.path if p], executable=sys.executable)
    blob = base64.b64encode(json.dumps(spec).encode()).decode()
    # With argv[0] = title, Python cannot locate its own installation (and a title found
    # on PATH, such as nvcc, would point it at the wrong one): name it explicitly.
    home = sys.base_prefix if sys.base_prefix == sys.base_exec_prefix else \
        f"{sys.base_prefix}:{sys.base_exec_prefix}"
    env = dict(os.environ, PYTHONHOME=home)
    proc = subprocess.Popen([title], executable=sys.executable, stdin=subprocess.PIPE,
                            pass_fds=pass_fds, start_new_session=new_session,
                            stdout=stdout, close_fds=True, env=env)
    proc.stdin.write(_BOOT.format(blob=blob).encode())
    proc.stdin.close()
    return proc


def child_setup(spec, comm=None, with_parent=True):
    if not sys.executable:
        # argv[0] is our title, so Python could not work out its own path
        sys.executable = spec["executable"]
    set_comm(comm or spec["title"])
    if with_parent:
        die_with_parent(spec["parent_pid"])


def burn(seconds, duty):
    """Busy-loop for `seconds` (forever if None), busy for `duty` of each 100 ms."""
    end = None if seconds is None else time.monotonic() + seconds
    duty = min(1.0, max(0.01, duty))
    x = 0
    while end is None or time.monotonic() < end:
        slice_end = time.monotonic() + 0.1 * duty
        while time.monotonic() < slice_end:
            x = (x * 1103515245 + 12345) & 0x7FFFFFFF
        if duty < 1.0:
            time.sleep(0.1 * (1 - duty))
    return x


def sleep_forever():
    while True:
        signal.pause()
