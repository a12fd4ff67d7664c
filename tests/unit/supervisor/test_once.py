"""--once: the supervisor as a plain process around one start (no systemd, no
$NOTIFY_SOCKET), as on a GPU test machine: it exits by itself once the start is decided,
with the server stopped, and its live verdict is the replay of the trace it wrote."""
import json
import os
import subprocess
import sys

from ansible_collections.sglang_ops.serving.plugins.module_utils.domain import failure_classes as fc

from .conftest import ROOT, SUPERVISOR


def _replay(run):
    """bin/sglang-ops replay of the trace the supervisor wrote: its final verdict."""
    out = subprocess.run([sys.executable, os.path.join(ROOT, "bin", "sglang-ops"), "replay",
                          os.path.join(run.current_dir(), "trace.jsonl")],
                         capture_output=True, text=True, timeout=120, check=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def test_a_healthy_start_ends_the_run_ready_with_the_server_stopped(supervise):
    run = supervise(plain=True)
    assert run.wait(90) == 0, run.output()[-3000:]
    assert not run.server_alive()
    assert not run.notify.messages   # nothing went to a notify socket: there is none
    record = run.record()
    assert record["verdict"] == "ready" and record["exit_code"] == 0 and record["ready_after_s"] > 0
    assert "--once: the start is decided (ready); stopping the server" in run.output()
    replayed = _replay(run)
    assert replayed["verdict"] == "ready" and replayed["reason_code"] == record["reason_code"]


def test_a_stalled_start_exits_with_its_class_and_the_replay_agrees(supervise):
    run = supervise(plain=True, fault={"kind": "stall", "phase": "weight_load", "mode": "idle", "at": 2})
    status = run.wait(90)
    record = run.record()
    assert record["verdict"] == "stalled" and status == fc.exit_code(record["reason_code"]), run.output()[-3000:]
    assert not run.server_alive()
    replayed = _replay(run)
    assert (replayed["verdict"], replayed["reason_code"], replayed["phase"]) == \
        (record["verdict"], record["reason_code"], record["phase"])


def test_once_in_the_wrong_place_is_a_usage_error_before_anything_starts(tmp_path):
    marker = tmp_path / "started"
    proc = subprocess.run([sys.executable, "-I", "-S", SUPERVISOR, "--once", "--settings", str(tmp_path / "s.json"),
                           "--", "/bin/touch", str(marker)], capture_output=True, text=True, timeout=30)
    assert proc.returncode == fc.exit_code("supervisor_config")
    assert "usage: sglang-supervisor --settings FILE.json [--once] -- SERVER ARGV..." in proc.stderr
    assert not marker.exists()
