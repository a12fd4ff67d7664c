"""The supervisor must never be the fault: an exception in it, a disk it cannot write, a key
changed under a running server, a log flood and a wall clock that steps each end as the
server's state says, never as a traceback, a stopped healthy server or a wrong duration."""
import json
import os
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler

from ansible_collections.sglang_ops.serving.plugins.module_utils.domain import failure_classes as fc
from ansible_collections.sglang_ops.serving.plugins.module_utils.services import serving_liveness
from ansible_collections.sglang_ops.serving.plugins.module_utils.services import supervisor as sup_mod
from ansible_collections.sglang_ops.serving.plugins.module_utils.services.supervisor_settings import SupervisorSettings
from ansible_collections.sglang_ops.serving.plugins.module_utils.records.trace_format import read_trace
from ansible_collections.sglang_ops.serving.tests.unit.probe.conftest import LoopbackHTTP

from .conftest import API_KEY

FAULT_IN_THE_WATCH = """
from ansible_collections.sglang_ops.serving.plugins.module_utils.services import supervisor as _sup
_on_poll = _sup.Supervisor._on_poll
def _failing_on_poll(self, obs, a):
    _on_poll(self, obs, a)
    if self.record.record["polls"] >= 3:
        raise RuntimeError("injected fault in the watch")
_sup.Supervisor._on_poll = _failing_on_poll
"""

# The wall clock steps an hour ahead 1.5 s into the start (an NTP step, a VM resumed).
WALL_CLOCK_STEP = """
import time
_wall = time.time
_began = _wall()
time.time = lambda: _wall() + (3600.0 if _wall() - _began > 1.5 else 0.0)
"""

# 1 MB lines at 25 MB/s, then 100k short lines per second, then quiet.
FLOOD = """
import os, sys, time
big = b"x" * (1 << 20) + b"\\n"
end = time.monotonic() + 3
while time.monotonic() < end:
    os.write(1, big)
    time.sleep(0.04)
short = b"".join(b"flood line %06d\\n" % i for i in range(1000))
end = time.monotonic() + 3
while time.monotonic() < end:
    os.write(1, short)
    time.sleep(0.01)
time.sleep(60)
"""


def test_an_exception_in_the_watch_stops_the_server_and_exits_with_one_line_and_the_fault_status(supervise):
    run = supervise(prelude=FAULT_IN_THE_WATCH)
    status = run.wait(60)
    out = run.output()
    assert status == fc.exit_code("supervisor_fault") and status in fc.restart_prevent_exit_statuses(), out[-2000:]
    assert "Traceback" not in out
    faults = [line for line in out.splitlines() if "supervisor_fault: RuntimeError: injected fault in the watch" in line]
    assert len(faults) == 1 and "the server is stopped" in faults[0], out[-2000:]
    assert run.server_pids() and not run.server_alive()
    record = run.record()
    assert (record["verdict"], record["reason_code"], record["exit_code"]) == ("failed", "supervisor_fault", 65)


def test_a_start_whose_folders_cannot_be_written_is_watched_to_ready_with_one_warning_per_file(supervise, tmp_path):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a regular file where the folders should be\n")
    run = supervise(settings={"starts_dir": str(blocker / "starts"), "metrics_dir": str(blocker / "metrics")})
    run.wait_for(lambda: run.notify.values("READY"), what="READY=1 without its records")
    run.wait_for(lambda: run.notify.values("WATCHDOG"), timeout=20, what="WATCHDOG=1")
    os.kill(run.proc.pid, signal.SIGTERM)
    assert run.wait(30) == 0
    assert not run.server_alive()
    lines = run.output().splitlines()
    warned = [line for line in lines if "cannot write" in line or "metrics file not written" in line]
    assert len(warned) == len(set(warned)), warned                       # once per file, not every poll
    for name in ("verdict.json", "trace.jsonl", "sglang_ops_sglang_test.prom"):
        assert len([w for w in warned if name in w]) == 1, (name, warned)
    assert "Traceback" not in run.output()


def test_a_key_changed_under_a_running_server_does_not_stop_it(supervise, tmp_path):
    run = supervise(api_key=API_KEY)
    run.wait_for(lambda: run.notify.values("READY"), what="READY=1 with an API key")
    (tmp_path / "unit.yaml").write_text('api-key: "sk-the-next-key"\n')   # converge rewrote it; no restart yet
    fed = len(run.notify.values("WATCHDOG"))
    run.wait_for(lambda: len(run.notify.values("WATCHDOG")) >= fed + 4, timeout=30, what="four more WATCHDOG=1")
    assert run.proc.poll() is None and "liveness check missed" not in run.output()
    os.kill(run.proc.pid, signal.SIGTERM)
    assert run.wait(30) == 0


class _Recorder:
    """The systemd end of sd_notify, in process: every message sent."""
    enabled = False

    def __init__(self):
        self.sent = []

    def send(self, **fields):
        self.sent.append(fields)
        return True

    def status(self, line):
        return self.send(STATUS=line)


def _refusing_server():
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *a):
            pass

        def _send(self, code):
            body = b'{"error": "Unauthorized"}'
            self.send_response(code)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            self._send(401)

        def do_POST(self):
            self.rfile.read(int(self.headers["Content-Length"]))
            self._send(401)
    return LoopbackHTTP(Handler)


def test_a_liveness_completion_refused_for_its_key_is_auth_mismatch_never_a_miss(tmp_path):
    server = _refusing_server()
    try:
        _check_auth_mismatch(server, tmp_path)
    finally:
        server.close()


def _check_auth_mismatch(server, tmp_path):
    settings = SupervisorSettings(base_url=server.url, liveness_interval_s=0.05, liveness_timeout_s=2.0,
                                  liveness_misses=2, api_key_file=str(tmp_path / "unit.yaml"))
    out_path = tmp_path / "journal.txt"
    with open(out_path, "wb") as out:
        sup = sup_mod.Supervisor(settings, [], notifier=_Recorder(), out_fd=out.fileno())
        sup.server.child = subprocess.Popen(["sleep", "30"])
        sup.api_key = "sk-the-key-it-started-with"
        ended = []
        thread = threading.Thread(target=lambda: ended.append(_serve_until_stopped(sup)))
        thread.start()
        deadline = time.monotonic() + 10
        while len(sup.notify.sent) < 6 and time.monotonic() < deadline:
            time.sleep(0.05)
        sup.stop_requested.set()
        thread.join(10)
        sup.server.kill()
    assert ended == ["stopped"]                                  # never hang_after_ready
    assert len(sup.notify.sent) >= 6 and all(m.get("WATCHDOG") == 1 for m in sup.notify.sent)
    assert all("auth_mismatch: completion refused with 401" in m["STATUS"] for m in sup.notify.sent)
    journal = out_path.read_text()
    assert journal.count("warning: auth_mismatch") == 1 and "missed" not in journal, journal
    assert serving_liveness.liveness_state({"ok": False, "status": 403}, False) == "auth_mismatch"
    assert serving_liveness.liveness_state({"ok": False, "status": 503}, False) == "miss"


def _serve_until_stopped(sup):
    try:
        return sup._serve()[0]
    except sup_mod._Stopped:
        return "stopped"


def test_a_wall_clock_step_mid_start_changes_no_duration(supervise, tmp_path):
    (tmp_path / "metrics").mkdir()
    run = supervise(prelude=WALL_CLOCK_STEP, settings={"metrics_dir": str(tmp_path / "metrics")})
    run.wait_for(lambda: run.notify.values("READY"), what="READY=1")
    os.kill(run.proc.pid, signal.SIGTERM)
    assert run.wait(30) == 0
    record = run.record()
    assert 0 < record["ready_after_s"] < 120, record
    assert sum(record["phase_durations"].values()) < 120, record
    assert record["ended_at"] - record["started_at"] > 3600          # the wall clock, shown to people, did step
    dummy_header, observations = read_trace(os.path.join(run.current_dir(), "trace.jsonl"))
    times = [o["t"] for o in observations]
    assert times == sorted(times) and times[-1] < 120, times
    assert all(r["t"] < 120 for o in observations for r in o.get("log", [])), "a log record's t took the step"
    with open(os.path.join(tmp_path, "metrics", "sglang_ops_sglang_test.prom"), encoding="utf-8") as fh:
        ready = [line for line in fh if line.startswith("sglang_last_start_time_to_ready_seconds{")]
    assert ready and float(ready[0].split()[-1]) < 120, ready
    said = [line for line in run.output().splitlines() if "sglang-supervisor: ready after" in line]
    assert said and "h" not in said[0].split("ready after ")[1].split(":")[0], said


def test_a_log_flood_keeps_the_supervisor_within_its_memory_bound(supervise, tmp_path):
    run = supervise(server=[sys.executable, "-c", FLOOD], settings={"poll_s": 0.5})
    run.wait_for(lambda: os.path.exists(os.path.join(run.starts, "current", "verdict.json")), what="a record")
    time.sleep(7.5)
    record = run.record()
    os.kill(run.proc.pid, signal.SIGTERM)
    assert run.wait(30) == 0
    assert record["supervisor"]["max_rss_mib"] <= 60, record["supervisor"]
    dummy_header, observations = read_trace(os.path.join(run.current_dir(), "trace.jsonl"))
    records = [r for o in observations for r in o.get("log", [])]
    assert any(r.get("line_break") == "line-max" for r in records)
    assert max(len(r["msg"].encode()) for r in records) <= 48 * 1024
    truncated = [o["missing"]["log_truncated"] for o in observations if "log_truncated" in o.get("missing", {})]
    assert truncated and all(int(t.split()[0]) > 0 for t in truncated), truncated
    assert "lines of the server's output were not kept for the detector" in run.output()
    with open(run.out_path, "rb") as fh:                       # the journal got every line of the flood
        assert fh.read().count(b"flood line 000999\n") >= 100
    assert json.dumps(record)   # the record stayed readable throughout
