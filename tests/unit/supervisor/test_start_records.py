"""The per-start folders: written by the supervisor, read by status, restart and metrics."""
import json

from ansible_collections.sglang_ops.serving.plugins.module_utils.records import start_records as sr
from ansible_collections.sglang_ops.serving.plugins.module_utils.host import systemd_unit
from ansible_collections.sglang_ops.serving.plugins.module_utils.host.probe import ProbeRequest, probe
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.restart import supervised_restart


def test_a_start_points_current_at_itself_and_keeps_the_last_n(tmp_path):
    root = str(tmp_path)
    names = []
    for i in range(4):
        rec = sr.StartRecord(root, 1796000000 + i, 100 + i, keep=3)
        rec.update(verdict="ready", ready_after_s=10.0 + i)
        rec.prune_step()
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


def test_the_probe_reads_the_records_and_one_starts_files(tmp_path):
    """What the restart action asks the probe for on a supervised host."""
    root = str(tmp_path / "starts")
    older = sr.StartRecord(root, 1796000000, 7)
    older.update(verdict="running", phase="weight_load")
    rec = sr.StartRecord(root, 1796000100, 8)
    rec.update(verdict="stalled", phase="weight_load", reason_code="stall_idle", exit_code=76, ended_at=1796000190)
    rec.write_diagnostic("py-spy", "Thread 1 (idle)\n")
    result = probe(ProbeRequest(observation=False, starts=5, start_files=rec.name, starts_dir=root))
    newest, killed = result["starts"]["starts"]
    assert result["starts"]["current"] == rec.name and newest["exit_code"] == 76
    assert killed["verdict"] == "interrupted"            # left running by a supervisor that is gone
    files = result["start_files"]
    assert json.loads(files["verdict.json"])["reason_code"] == "stall_idle"
    assert files["diagnostics/py-spy.txt"] == "Thread 1 (idle)\n" and files["trace.jsonl"] is None
    line = supervised_restart.start_summary(newest)
    assert line.startswith(rec.name) and "stalled in weight_load after 1m30s: stall_idle (exit 76)" in line


def test_a_starts_phases_are_listed_in_the_order_a_start_goes_through_them():
    record = {"dir": "/x/20261130T120000Z-1", "verdict": "ready", "ready_after_s": 40,
              "phase_durations": {"cuda_graph": 6, "distributed_init": 2, "weight_load": 20, "warmup": 2, "starting": 1}}
    line = supervised_restart.start_summary(record)
    assert line.endswith("[starting 1s, distributed_init 2s, weight_load 20s, cuda_graph 6s, warmup 2s]"), line


def test_the_probe_names_a_folder_that_is_not_a_start_instead_of_reading_it(tmp_path):
    result = probe(ProbeRequest(observation=False, start_files="../../etc", starts_dir=str(tmp_path)))
    assert "start_files" not in result and "not the folder of a start" in result["missing"]["start_files"]


def test_a_supervised_unit_is_known_by_its_exec_start_and_its_venv_read_after_the_separator():
    exec_start = ("{ path=/usr/bin/python3 ; argv[]=/usr/bin/python3 -I /usr/lib/sglang-ops/sglang-supervisor "
                  "--settings /etc/sglang/u.supervisor.json -- /opt/sglang/venvs/0.5.23/bin/python -m sglang.launch_server ; }")
    assert systemd_unit.is_supervised(exec_start)
    assert systemd_unit.venv_prefix(exec_start) == "/opt/sglang/venvs/0.5.23"
    assert not systemd_unit.is_supervised("{ path=/bin/bash ; argv[]=/bin/bash -c exec ; }")
    assert not supervised_restart.unit_gave_up({"active": "activating", "sub": "auto-restart"})
    assert supervised_restart.unit_gave_up({"active": "failed", "sub": "failed"})
