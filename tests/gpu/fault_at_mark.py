#!/usr/bin/env python3
"""Do a fault to a start from outside it, at the moment its rank marks: wait until --mark
holds "time pid" (tests/gpu/tp_server.py writes it), wait --delay seconds more, then

  --do kill   SIGKILL that pid (as the kernel's OOM killer ends a process)
  --do stop   SIGSTOP that pid's whole process group (the start frozen)

and write the moment it acted (epoch seconds) and the pid to --done. Used by
record_real_traces.py and, for starts the supervisor runs, by the batch scripts.
"""
import argparse
import os
import signal
import time


def wait_for_mark(path, give_up_s, poll_s=0.2):
    end = time.monotonic() + give_up_s
    while time.monotonic() < end:
        try:
            with open(path) as f:
                fields = f.read().split()
            if len(fields) >= 2:
                return float(fields[0]), int(fields[1])
        except OSError:
            pass
        time.sleep(poll_s)
    raise SystemExit("%s: no mark after %.0f s" % (path, give_up_s))


def act(what, pid):
    if what == "kill":
        os.kill(pid, signal.SIGKILL)
    else:
        os.killpg(os.getpgid(pid), signal.SIGSTOP)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mark", required=True)
    ap.add_argument("--delay", type=float, default=0.0)
    ap.add_argument("--do", choices=("kill", "stop"), required=True)
    ap.add_argument("--done", required=True)
    ap.add_argument("--give-up-s", type=float, default=900.0, help="no mark by then: exit without acting")
    a = ap.parse_args(argv)
    _, pid = wait_for_mark(a.mark, a.give_up_s)
    time.sleep(a.delay)
    act(a.do, pid)
    with open(a.done, "w") as f:
        f.write("%.3f %d %s\n" % (time.time(), pid, a.do))


if __name__ == "__main__":
    main()
