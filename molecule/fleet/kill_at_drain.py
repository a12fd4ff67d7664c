"""Runs a command (an ansible-playbook run, in a session of its own) and kills it with all its
processes, as a controller that dies, once HAProxy shows a server drained.

  python kill_at_drain.py SOCKET BACKEND SERVER LOG TIMEOUT_S -- COMMAND...

Reads the server's state through HAProxy's runtime API every 50 ms (the collection's own
reader, plugins/module_utils/host/haproxy_runtime.py); the command's output goes to LOG.
Prints one JSON line: {"killed": true, "after_s", "state", "status"} once it killed the run
at the drain, or {"killed": false, "rc" or "timed_out"} and exits 1 when the run ended, or
TIMEOUT_S passed, before the server was drained.
"""
import json
import os
import signal
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "collections"))

from ansible_collections.sglang_ops.serving.plugins.module_utils.host import haproxy_runtime  # noqa: E402


def main(argv):
    split = argv.index("--")
    (address, backend, server, log, timeout_s), command = argv[1:split], argv[split + 1:]
    started = time.monotonic()
    with open(log, "wb") as out:
        run = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                               start_new_session=True)
    while run.poll() is None:
        if time.monotonic() - started > float(timeout_s):
            os.killpg(run.pid, signal.SIGKILL)
            run.wait()
            print(json.dumps({"killed": False, "timed_out": True}))
            return 1
        try:
            state = haproxy_runtime.server_state(address, backend, server, timeout_s=2.0)
        except haproxy_runtime.RuntimeApiError:
            state = {}
        if state.get("state") == "drain":
            os.killpg(run.pid, signal.SIGKILL)
            run.wait()
            print(json.dumps({"killed": True, "after_s": round(time.monotonic() - started, 1),
                              "state": state["state"], "status": state.get("status")}))
            return 0
        time.sleep(0.05)
    print(json.dumps({"killed": False, "rc": run.returncode}))
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
