"""The unit's supervisor, as systemd runs it: a real process, a real notify socket, the
SGLang stand-in as its child (conftest.py)."""
import json
import os
import signal

from ansible_collections.sglang_ops.serving.plugins.module_utils.domain import failure_classes as fc
from ansible_collections.sglang_ops.serving.plugins.module_utils.records.trace_format import read_trace

from .conftest import API_KEY


def test_a_healthy_start_reports_its_phases_and_is_ready_only_after_a_completion(supervise):
    run = supervise()
    run.wait_for(lambda: run.notify.values("READY"), what="READY=1")
    statuses = run.notify.values("STATUS")
    # the progress line of the phases before ready, as `systemctl status` shows it
    before_ready = [s for s in statuses if not s.startswith("ready")]
    assert before_ready and all(" \u00b7 GPU " in s for s in before_ready), statuses
    assert run.notify.values("EXTEND_TIMEOUT_USEC") and all(v == "30000000" for v in run.notify.values("EXTEND_TIMEOUT_USEC"))
    # READY comes with the completion that proved it, and never before one succeeded
    ready_msg = [m for dummy_t, m in run.notify.messages if "READY" in m][0]
    assert "completion succeeded" in ready_msg["STATUS"]
    record = run.record()
    assert record["verdict"] == "ready" and record["ready_after_s"] > 0
    durations = record["phase_durations"]   # the phases the polls saw, up to ready
    assert durations and "ready" not in durations
    assert abs(sum(durations.values()) - record["ready_after_s"]) < 1.5, record
    header, observations = read_trace(os.path.join(run.current_dir(), "trace.jsonl"))
    assert header["unit"] == "sglang-test" and observations[-1]["http"]["completion"]["ok"] is True
    # serving: the liveness completion answers, so systemd's watchdog is fed
    run.wait_for(lambda: run.notify.values("WATCHDOG"), timeout=20, what="WATCHDOG=1")
    os.kill(run.proc.pid, signal.SIGTERM)
    assert run.wait(30) == 0
    assert not run.server_alive()
    record = run.record()
    assert record["verdict"] == "ready" and record["ended_at"] >= record["started_at"]


def test_a_stall_is_diagnosed_then_the_server_stopped_and_the_class_status_returned(supervise):
    run = supervise(fault={"kind": "stall", "phase": "weight_load", "mode": "idle", "at": 2})
    status = run.wait(90)
    record = run.record()
    assert record["verdict"] == "stalled" and record["phase"] == "weight_load", record
    assert status == fc.exit_code(record["reason_code"]) and status not in fc.restart_prevent_exit_statuses()
    assert record["exit_code"] == status
    diagnostics = os.listdir(os.path.join(run.current_dir(), "diagnostics"))
    assert {"log-tail.txt", "processes.txt", "nvidia-smi.txt", "py-spy.txt", "assessment.txt"} <= set(diagnostics)
    assert "Load weight begin" in open(os.path.join(run.current_dir(), "diagnostics", "log-tail.txt")).read()
    assert not run.server_alive()
    assert not run.notify.values("READY")
    assert any(v.startswith("stalled in weight_load") for v in run.notify.values("STATUS")), run.notify.values("STATUS")


def _metrics_lines(run):
    """The metrics file the supervisor keeps for node_exporter, as its sample lines."""
    with open(os.path.join(run.tmp, "metrics", "sglang_ops_sglang_test.prom"), encoding="utf-8") as fh:
        return [line for line in fh.read().splitlines() if line and not line.startswith("#")]


def test_a_failure_a_restart_cannot_help_exits_with_a_status_systemd_will_not_restart(supervise, tmp_path):
    (tmp_path / "metrics").mkdir()
    run = supervise(fault={"kind": "fatal", "phase": "cuda_graph", "line": "oom", "ranks": [1], "then": "exit"},
                    settings={"metrics_dir": str(tmp_path / "metrics")})
    status = run.wait(90)
    assert status == fc.exit_code("fatal_oom") and status in fc.restart_prevent_exit_statuses()
    record = run.record()
    assert (record["verdict"], record["reason_code"]) == ("failed", "fatal_oom")
    assert "out of memory" in record["reason"]
    # on-call's view: the unit's tries ended and a human is needed, no restart counted
    lines = _metrics_lines(run)
    assert 'sglang_last_start_info{outcome="gave_up",reason_code="fatal_oom",unit="sglang-test"} 1' in lines, lines
    assert 'sglang_last_start_needed_human{unit="sglang-test"} 1' in lines, lines
    restarts = [line for line in lines if line.startswith("sglang_restarts_total{")]
    assert restarts and all(line.endswith(" 0") for line in restarts), restarts


def test_a_hang_after_ready_is_caught_by_the_liveness_completions(supervise, tmp_path):
    (tmp_path / "metrics").mkdir()
    run = supervise(fault={"kind": "hang_after_ready", "after_s": 1.5}, settings={"metrics_dir": str(tmp_path / "metrics")})
    status = run.wait(90)
    assert status == fc.exit_code("hang_after_ready")
    record = run.record()
    assert (record["verdict"], record["reason_code"], record["phase"]) == ("failed", "hang_after_ready", "ready")
    assert record["ready_after_s"] > 0
    assert run.notify.values("READY") and run.notify.values("WATCHDOG")
    assert any("liveness check missed 1/2" in v for v in run.notify.values("STATUS"))
    assert not run.server_alive()
    # counted for on-call: the hang, and the restart systemd makes next
    lines = _metrics_lines(run)
    assert 'sglang_hangs_after_ready_total{unit="sglang-test"} 1' in lines, lines
    assert 'sglang_restarts_total{reason_code="hang_after_ready",unit="sglang-test"} 1' in lines, lines


def test_a_server_busy_with_long_prefills_after_ready_is_kept_up(supervise):
    # Six seconds of prefill-only saturation: the liveness completions go unanswered for four
    # times the two misses that make a hang, while /metrics shows prompts being prefilled.
    run = supervise(fault={"kind": "prefill_saturation", "after_s": 1.0, "seconds": 6})
    run.wait_for(lambda: run.notify.values("READY"), what="READY=1")
    run.wait_for(lambda: any("busy: completion unanswered" in v for v in run.notify.values("STATUS")),
                 timeout=20, what="a busy liveness check")
    busy = [v for v in run.notify.values("STATUS") if "busy:" in v]
    assert "prompt tokens +" in busy[-1] or "tokens processed +" in busy[-1], busy
    run.wait_for(lambda: "the liveness completion is answered again" in run.output(), timeout=30,
                 what="the completions answered after the saturation")
    assert run.proc.poll() is None and run.server_alive()
    assert "liveness check missed" not in run.output()
    assert "the server is working (" in run.output()
    assert run.record()["verdict"] == "ready"
    os.kill(run.proc.pid, signal.SIGTERM)
    assert run.wait(30) == 0


def test_a_silent_busy_phase_is_left_alone(supervise):
    # Eight seconds of log silence while compilers work: twice the idle-stall window.
    run = supervise(fault={"kind": "long_jit", "seconds": 8, "compilers": 1})
    run.wait_for(lambda: run.notify.values("READY"), timeout=60, what="READY=1")
    assert max(run.record()["phase_durations"].values()) >= 6   # the silent phase, waited out
    os.kill(run.proc.pid, signal.SIGTERM)
    assert run.wait(30) == 0


def test_the_api_key_never_leaves_the_supervisor(supervise):
    run = supervise(api_key=API_KEY)
    run.wait_for(lambda: run.notify.values("READY"), what="READY=1 with an API key")
    os.kill(run.proc.pid, signal.SIGTERM)
    run.wait(30)
    output = run.output()
    assert "server_args=" in output and "<api-key>" in output
    assert API_KEY not in output and "sk-supervisor-test-key" not in output
    with open(os.path.join(run.current_dir(), "trace.jsonl")) as fh:
        assert "sk-supervisor-test-key" not in fh.read()


def test_tqdm_frames_reach_the_journal_as_lines(supervise):
    run = supervise()
    run.wait_for(lambda: run.notify.values("READY"), what="READY=1")
    os.kill(run.proc.pid, signal.SIGTERM)
    run.wait(30)
    frames = [line for line in run.output().split("\n") if "shards:" in line]
    assert len(frames) >= 4 and not any("\r" in line for line in frames)


def test_only_the_last_starts_are_kept(supervise, tmp_path):
    starts = tmp_path / "starts"
    for i in range(3):
        old = starts / ("20200101T00000%dZ-1" % i)
        old.mkdir(parents=True)
        (old / "verdict.json").write_text(json.dumps({"verdict": "ready"}))
    run = supervise(settings={"keep_starts": 2}, fault={"kind": "exit", "phase": "kv_cache", "code": 0})
    status = run.wait(60)
    assert status == fc.exit_code("process_exited")
    names = sorted(n for n in os.listdir(str(starts)) if n != "current")
    assert len(names) == 2 and names[0] == "20200101T000002Z-1" and os.path.basename(run.current_dir()) == names[1]


def test_bad_settings_are_refused_with_one_line_and_the_config_status(tmp_path):
    import subprocess
    import sys
    from .conftest import SUPERVISOR
    bad = tmp_path / "s.json"
    bad.write_text(json.dumps({"poll_s": 0, "unit": "x"}))
    res = subprocess.run([sys.executable, "-I", SUPERVISOR, "--settings", str(bad), "--", "/bin/true"],
                         capture_output=True, text=True, check=False)
    assert res.returncode == fc.exit_code("supervisor_config") == 64
    assert res.stderr.count("\n") == 1 and "poll_s" in res.stderr
    bad.write_text(json.dumps({"no_such": 1}))
    res = subprocess.run([sys.executable, "-I", SUPERVISOR, "--settings", str(bad), "--", "/bin/true"],
                         capture_output=True, text=True, check=False)
    assert res.returncode == 64 and "no_such" in res.stderr
