"""The sglang_probe module run for real through Ansible against a PID on this machine."""
import json
import os
import signal
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
ANSIBLE = os.path.join(os.path.dirname(sys.executable), "ansible")

pytestmark = pytest.mark.skipif(not os.path.exists(ANSIBLE), reason="ansible not in this interpreter's venv")


def run_module(args, check=False):
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_STDOUT_CALLBACK="json",
               ANSIBLE_LOAD_CALLBACK_PLUGINS="1", ANSIBLE_NOCOLOR="1")
    cmd = [ANSIBLE, "localhost", "-c", "local", "-i", "localhost,",
           "-e", "ansible_python_interpreter=%s" % sys.executable,
           "-m", "sglang_ops.serving.sglang_probe", "-a", json.dumps(args)]
    if check:
        cmd.append("--check")
    p = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=180)
    out = json.loads(p.stdout)
    return out["plays"][0]["tasks"][0]["hosts"]["localhost"], p.stdout + p.stderr


@pytest.fixture
def target(child, tmp_path):
    log = tmp_path / "stderr.log"
    p = child("""
        import sys, time
        with open(sys.argv[1], "w") as f:
            f.write("[2026-11-29 21:00:00 TP0] Load weight begin. avail mem=80.00 GB\\n")
            f.write("\\rLoading shards: 50%\\rLoading shards: 100%\\n")
        sys.stdout.write("up\\n"); sys.stdout.flush()
        time.sleep(120)
        """, str(log), "--tp-rank", "0")
    assert p.stdout.readline() == b"up\n"
    return p, str(log)


def test_pid_mode_observation_with_hanging_nvidia_smi_and_secret_kept(target, script_dir):
    p, log = target
    fake = script_dir("nvidia-smi", "/bin/sleep 30\n")
    res, raw = run_module({"pid": p.pid, "log_file": log, "nvidia_smi": fake, "gpu_timeout_s": 0.5,
                           "base_url": "http://127.0.0.1:9", "api_key": "top-secret-value",
                           "completion": "always"})
    assert res.get("failed") is not True, raw
    assert res["changed"] is False
    obs = res["observation"]
    assert obs["procs"]["count"] == 1 and sum(obs["procs"]["comm"].values()) == 1
    assert obs["procs"]["read_bytes"] >= 0 and obs["procs"]["cpu_s"] >= 0
    assert [r["msg"] for r in obs["log"]] == [
        "[2026-11-29 21:00:00 TP0] Load weight begin. avail mem=80.00 GB", "\rLoading shards: 50%\rLoading shards: 100%"]
    assert all(isinstance(r["ts"], float) for r in obs["log"]) and isinstance(obs["ts"], float)
    assert "gpus" not in obs and "timed out" in res["missing"]["gpus"]
    assert "unit" not in obs and "pid mode" in res["missing"]["unit"]
    assert obs["http"]["health"] is None and obs["http"]["completion"]["ok"] is False
    assert res["cursor"].startswith("offset:")
    assert set(res["cost"]) == {"cpu_s", "wall_s"}
    assert "top-secret-value" not in raw


def test_missing_nvidia_smi_and_stopped_process_in_check_mode(target):
    p, log = target
    os.kill(p.pid, signal.SIGSTOP)
    res, raw = run_module({"pid": p.pid, "nvidia_smi": "/nonexistent/nvidia-smi"}, check=True)
    assert res.get("failed") is not True, raw
    assert res["observation"]["procs"]["states"] == {"T": 1}
    assert "nvidia-smi not found" in res["missing"]["gpus"]
    assert "log" in res["missing"]


def test_bad_arguments_fail_before_anything_is_read():
    res, raw = run_module({"pid": 1, "unit": "x"})
    assert res["failed"] is True and "mutually exclusive" in res["msg"]
    res, raw = run_module({"unit": "x", "log_file": "/tmp/x"})
    assert res["failed"] is True and "log_file" in res["msg"]
    res, raw = run_module({"pid": 1, "holders": True, "unit_processes": True})
    assert res["failed"] is True and res["msg"] == "holders, unit_processes need unit (a systemd unit's cgroup), not pid"


def test_restart_action_argument_names_and_py_spy_beside_the_interpreter(target):
    # The restart action passes port/host, want_stacks and completion_model; py-spy is
    # found beside the service's interpreter (here the test venv, which has it).
    p, log = target
    res, raw = run_module({"pid": p.pid, "host": "127.0.0.1", "port": 9, "want_stacks": True,
                           "completion_model": "m", "cursor": None, "since_epoch_s": None,
                           "nvidia_smi": "/nonexistent/nvidia-smi"})
    assert res.get("failed") is not True, raw
    obs = res["observation"]
    assert obs["http"] == {"health": None, "completion": None}
    assert obs["stacks"][0]["pid"] == p.pid and obs["stacks"][0]["rank"] == "TP0"
    assert obs["stacks"][0]["frames"][-1] == "<module>"


def test_running_requests_read_alone_through_the_module(target):
    from ansible_collections.sglang_ops.serving.tests.unit.probe.test_running_requests import _Metrics
    p, log = target
    server = _Metrics()
    try:
        port = int(server.url.rsplit(":", 1)[1])
        res, raw = run_module({"pid": p.pid, "port": port, "observation": False, "running_requests": True})
        assert res.get("failed") is not True, raw
        assert res["running_requests"] == {"running": 5, "queued": 1} and "observation" not in res
        server.status = 404
        res, raw = run_module({"pid": p.pid, "port": port, "observation": False, "running_requests": True})
        assert res["running_requests"] is None and "metrics are off" in res["missing"]["running_requests"]
    finally:
        server.close()
