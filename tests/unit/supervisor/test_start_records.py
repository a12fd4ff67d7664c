"""The per-start folders: written by the supervisor, read by status, restart and metrics."""
import json
import os
import subprocess

from ansible_collections.sglang_ops.serving.plugins.module_utils import start_records as sr
from ansible_collections.sglang_ops.serving.plugins.module_utils import systemd_unit
from ansible_collections.sglang_ops.serving.plugins.plugin_utils import supervised_restart


def test_a_start_points_current_at_itself_and_keeps_the_last_n(tmp_path):
    root = str(tmp_path)
    names = []
    for i in range(4):
        rec = sr.StartRecord(root, 1796000000 + i, 100 + i, keep=3)
        rec.update(verdict="ready", ready_after_s=10.0 + i)
        names.append(rec.name)
    assert sr.start_dirs(root) == names[1:]
    assert sr.current_name(root) == names[-1]
    assert [r["ready_after_s"] for r in sr.recent_starts(root, 2)] == [13.0, 12.0]


def test_a_start_left_running_by_a_killed_supervisor_reads_as_interrupted(tmp_path):
    root = str(tmp_path)
    killed = sr.StartRecord(root, 1796000000, 1)
    killed.update(phase="weight_load")
    sr.StartRecord(root, 1796000100, 2).update(phase="starting")
    newest, older = sr.recent_starts(root, 5)
    assert newest["verdict"] == "running"        # the current start is still running
    assert older["verdict"] == "interrupted" and "killed" in older["reason"]


def test_diagnostics_are_redacted(tmp_path):
    rec = sr.StartRecord(str(tmp_path), 1796000000, 1)
    path = rec.write_diagnostic("log-tail", "--api-key sk-abcdefghijkl --port 1\n")
    assert "sk-abcdefghijkl" not in open(path).read()


def test_phase_durations_end_at_ready():
    entries = [("starting", 0.0), ("weight_load", 2.0), ("post_load", 62.0), ("ready", 70.0)]
    assert sr.time_in_phases(entries, 90.0) == {"starting": 2.0, "weight_load": 60.0, "post_load": 8.0}


def test_the_host_reader_the_restart_action_runs_reads_the_records(tmp_path):
    """read_cmd's Python part, run by a real python3 -I against a real folder."""
    rec = sr.StartRecord(str(tmp_path / "starts"), 1796000000, 7)
    rec.update(verdict="stalled", phase="weight_load", reason_code="stall_idle", exit_code=76, ended_at=1796000090)
    # the folder holding ansible_collections/, in a checkout and in an installed collection alike
    repo_collections = os.path.abspath(os.path.join(os.path.dirname(sr.__file__), *[".."] * 5))
    cmd = supervised_restart.read_cmd("sglang-x", str(tmp_path / "starts"))
    script = cmd.split("echo '---'; ", 1)[1].replace(supervised_restart.LIB_DIR, os.path.abspath(repo_collections))
    out = subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=True).stdout
    props, state = supervised_restart.parse_read("ActiveState=failed\nSubState=failed\n---\n" + out)
    assert props["ActiveState"] == "failed" and supervised_restart.unit_gave_up(props)
    (record,) = state["starts"]
    assert state["current"] == rec.name and record["exit_code"] == 76
    line = supervised_restart.start_summary(record)
    assert line.startswith(rec.name) and "stalled in weight_load after 1m30s: stall_idle (exit 76)" in line


def test_a_supervised_unit_is_known_by_its_exec_start_and_its_venv_read_after_the_separator():
    exec_start = ("{ path=/usr/bin/python3 ; argv[]=/usr/bin/python3 -I /usr/lib/sglang-ops/sglang-supervisor "
                  "--settings /etc/sglang/u.supervisor.json -- /opt/sglang/venv/bin/python -m sglang.launch_server ; }")
    assert supervised_restart.is_supervised(exec_start)
    assert systemd_unit.venv_prefix(exec_start) == "/opt/sglang/venv"
    assert not supervised_restart.is_supervised("{ path=/bin/bash ; argv[]=/bin/bash -c exec ; }")
    assert not supervised_restart.unit_gave_up({"ActiveState": "activating", "SubState": "auto-restart"})
    assert json.loads(json.dumps(supervised_restart.restart_cmd("a b"))).endswith("'a b.service'")
