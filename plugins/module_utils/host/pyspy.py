"""py-spy stack samples of each rank: `py-spy dump --pid P` under a timeout, parsed to
{pid, rank, frames: [function names, innermost first]} of the main thread."""
import os
import re

from ansible_collections.sglang_ops.serving.plugins.module_utils.host.bounded_run import (
    bounded_run, find_executable)

_THREAD = re.compile(r'^Thread (\S+)(?: \((\w+)\))?:? ?"?([^"]*)"?')
_FRAME = re.compile(r"^\s+(\S+?) \((.*)\)\s*$")


def parse_dump(text):
    """py-spy dump output -> [{"thread", "state", "name", "frames"}] in printed order."""
    threads, cur = [], None
    for line in text.splitlines():
        m = _THREAD.match(line)
        if m:
            cur = {"thread": m.group(1), "state": m.group(2), "name": m.group(3).strip(),
                   "frames": []}
            threads.append(cur)
            continue
        f = _FRAME.match(line)
        if f and cur is not None:
            cur["frames"].append(f.group(1))
    return threads


def main_frames(threads):
    """Frames of the MainThread (the scheduler loop), else of the first thread."""
    for t in threads:
        if t["name"] == "MainThread":
            return t["frames"]
    return threads[0]["frames"] if threads else []


def find_pyspy(venv_bin=None):
    if venv_bin:
        cand = os.path.join(venv_bin, "py-spy")
        if os.access(cand, os.X_OK):
            return cand
    return find_executable("py-spy")


def dump_argv(exe, pid, stopped):
    # py-spy pauses the target with ptrace while it reads; on a process already stopped
    # (SIGSTOP, state T) that fails ("Failed to suspend process: unexpected waitpid
    # result"), seen with py-spy 0.4.3. A stopped process cannot change under the read,
    # so reading without pausing is exact there. Inside the unit's sandbox (no ptrace)
    # the pause fails too, and dump_stacks reads without it.
    argv = [exe, "dump", "--pid", str(pid)]
    return argv + ["--nonblocking"] if stopped else argv


def _is_stopped(pid):
    try:
        with open("/proc/%d/stat" % pid) as f:
            text = f.read()
        return text[text.rindex(")") + 2:].split()[0] in ("T", "t")
    except (OSError, ValueError, IndexError):
        return False


def dump_stacks(targets, venv_bin=None, timeout_s=5.0):
    """targets: [(pid, rank)] -> (samples, None) or (None, reason). A process that
    cannot be dumped is left out; if none can, the reason says why."""
    exe = find_pyspy(venv_bin)
    if exe is None:
        return None, "py-spy not found (service venv bin, PATH)"
    samples, errors = [], []
    for pid, rank in targets:
        res = bounded_run(dump_argv(exe, pid, _is_stopped(pid)), timeout_s)
        if not res.ok and "suspend" in res.stderr:
            res = bounded_run(dump_argv(exe, pid, True), timeout_s)
        if not res.ok:
            errors.append("pid %d: %s" % (pid, "timed out" if res.timed_out
                                          else (res.stderr.strip() or res.stdout.strip())[:120]))
            continue
        samples.append({"pid": pid, "rank": rank, "frames": main_frames(parse_dump(res.stdout))})
    if not samples and errors:
        return None, "py-spy dump failed: " + "; ".join(errors[:3])
    return samples, None
