"""The playbooks' load balancer task files (playbooks/tasks/lb_drain.yml, lb_ready.yml) run by
ansible-playbook against a real HAProxy, with the SGLang stand-in (the test double of the
server, tests/standin) behind it answering completions that take a while."""
import json
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import yaml

from .conftest import NO_HAPROXY

pytestmark = NO_HAPROXY

ROOT = Path(__file__).resolve().parents[3]
ANSIBLE_PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"
DECODE_S_PER_TOKEN = 0.2


@pytest.fixture
def sglang(tmp_path):
    """A ready stand-in with metrics on; each completion takes max_tokens * 0.2 s."""
    # One port allocator for every real server the tests run (the stand-in's tests).
    from standin.conftest import SRC, StandIn, free_port, kill_by_state_dir
    sys.path.insert(0, SRC)
    from sglang.standin.make_model import make_model
    model = tmp_path / "model"
    make_model(str(model), shards=2, shard_mib=1)
    state_dir = str(tmp_path / "state")
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": SRC, "PYTHONUNBUFFERED": "1",
           "SGLANG_STANDIN_CONFIG": str(tmp_path / "config.json"), "SGLANG_STANDIN_STATE_DIR": state_dir,
           "SGLANG_STANDIN_FAULTS_FILE": str(tmp_path / "faults.json"), "SGLANG_STANDIN_GPUS": "1",
           "SGLANG_STANDIN_TIME_SCALE": "0.04", "SGLANG_STANDIN_CUDA_GRAPH_BATCHES": "2",
           "SGLANG_STANDIN_SPIN_DUTY": "0.3", "SGLANG_DG_CACHE_DIR": str(tmp_path / "dg"),
           "SGLANG_STANDIN_DECODE_S_PER_TOKEN": str(DECODE_S_PER_TOKEN)}
    port = free_port()
    server = StandIn(str(tmp_path), env, ["--model-path", str(model), "--tp", "1", "--host", "127.0.0.1",
                                          "--port", str(port), "--enable-metrics"], port).start()
    try:
        server.wait_ready()
        yield server
    finally:
        server.kill()
        kill_by_state_dir(state_dir)


def in_flight(server, tokens):
    """Send a completion of `tokens` tokens in the background; wait until /metrics counts it."""
    answers = []
    body = {"model": "default", "prompt": "drain me", "max_tokens": tokens}

    def complete():
        try:
            answers.append(server.http("/v1/completions", "POST", body, timeout=tokens * DECODE_S_PER_TOKEN + 10)[0])
        except OSError as e:          # the server killed at the end of a test that left it busy
            answers.append(e)
    thread = threading.Thread(target=complete, daemon=True)
    thread.start()
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        if running(server) >= 1:
            return thread, answers
        time.sleep(0.05)
    raise AssertionError("the completion never showed in /metrics")


def running(server):
    for line in server.http("/metrics")[1].decode().splitlines():
        if line.startswith("sglang:num_running_reqs{"):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError("no sglang:num_running_reqs in /metrics")


def run_tasks(tmp_path, task_file, host_vars, check=False):
    """ansible-playbook lb_tasks.yml with the host gpu-a (connection local); the completed run."""
    inventory = tmp_path / "inventory.yml"
    variables = dict(host_vars, ansible_connection="local", ansible_python_interpreter=sys.executable)
    inventory.write_text(yaml.safe_dump({"sglang": {"hosts": {"gpu-a": variables}}}))
    cmd = [str(ANSIBLE_PLAYBOOK), "-i", str(inventory), str(Path(__file__).parent / "lb_tasks.yml"),
           "-e", json.dumps({"repo_root": str(ROOT), "task_file": task_file})]
    if check:
        cmd.append("--check")
    env = {"PATH": "%s:/usr/bin:/bin:/usr/sbin" % Path(sys.executable).parent, "HOME": str(tmp_path),
           "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"), "ANSIBLE_NOCOLOR": "1",
           "ANSIBLE_LOCALHOST_WARNING": "0", "ANSIBLE_INVENTORY_UNPARSED_WARNING": "0"}
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=180, check=False)


def haproxy_lb(haproxy):
    return {"type": "haproxy", "socket": haproxy.admin_socket, "backend": haproxy.backend}


def test_drain_waits_for_the_request_in_flight_and_leaves_the_server_drained(tmp_path, haproxy, sglang):
    # 20 s of decoding: on a loaded machine ansible-playbook can take 8 s to reach the wait,
    # and the retry line below is only printed when the request is still in flight then
    thread, answers = in_flight(sglang, 100)
    run = run_tasks(tmp_path, "lb_drain.yml", {"sglang_lb": haproxy_lb(haproxy), "sglang_service_port": sglang.port,
                                                 "sglang_lb_poll_s": 1, "sglang_lb_drain_timeout_s": 60})
    assert run.returncode == 0, run.stdout + run.stderr
    assert "FAILED - RETRYING: [gpu-a]: Wait until the server runs and queues nothing" in run.stdout
    # the wait ended once the completion was answered
    assert answers == [200] and running(sglang) == 0
    assert haproxy.status("gpu-a") == "DRAIN" and haproxy.status("gpu-b") == "no check"
    back = run_tasks(tmp_path, "lb_ready.yml", {"sglang_lb": haproxy_lb(haproxy)})
    assert back.returncode == 0, back.stdout + back.stderr
    assert haproxy.status("gpu-a") == "no check"


def test_a_server_that_never_goes_idle_is_put_back_and_the_host_fails(tmp_path, haproxy, sglang):
    # 60 s of decoding, longer than the wait and than ansible-playbook's run on a loaded machine
    # (the server is killed at the end of the test, the request with it)
    in_flight(sglang, 300)
    run = run_tasks(tmp_path, "lb_drain.yml", {"sglang_lb": haproxy_lb(haproxy), "sglang_service_port": sglang.port,
                                                 "sglang_lb_poll_s": 1, "sglang_lb_drain_timeout_s": 2})
    assert run.returncode == 2, run.stdout + run.stderr
    assert ("gpu-a: left alone, nothing was stopped, and it is back in the load balancer: "
            "it still ran 1 request(s) with 0 queued 2 s after the drain (sglang_lb_drain_timeout_s)") in run.stdout
    assert haproxy.status("gpu-a") == "no check"
    assert running(sglang) == 1


def test_check_mode_and_no_load_balancer_change_nothing(tmp_path, haproxy):
    run = run_tasks(tmp_path, "lb_drain.yml", {"sglang_lb": haproxy_lb(haproxy), "sglang_service_port": 9}, check=True)
    assert run.returncode == 0, run.stdout + run.stderr
    assert "changed: [gpu-a -> localhost]" in run.stdout        # what it would do
    assert haproxy.status("gpu-a") == "no check"
    run = run_tasks(tmp_path, "lb_drain.yml", {"sglang_service_port": 9})
    assert run.returncode == 0, run.stdout + run.stderr
    assert "changed=0" in run.stdout and "failed=0" in run.stdout and "localhost" not in run.stdout
    assert haproxy.status("gpu-a") == "no check"


def test_a_command_load_balancer_runs_its_argv_and_a_server_not_listening_counts_as_idle(tmp_path):
    marker = tmp_path / "drained"
    lb = {"type": "command", "drain": ["touch", str(marker)], "ready": ["rm", str(marker)]}
    run = run_tasks(tmp_path, "lb_drain.yml", {"sglang_lb": lb, "sglang_service_port": 9})
    assert run.returncode == 0, run.stdout + run.stderr
    assert marker.exists()
    run = run_tasks(tmp_path, "lb_ready.yml", {"sglang_lb": lb})
    assert run.returncode == 0 and not marker.exists()


def test_a_malformed_load_balancer_description_fails_before_anything(tmp_path):
    run = run_tasks(tmp_path, "lb_drain.yml", {"sglang_lb": {"type": "nginx"}, "sglang_service_port": 9})
    assert run.returncode == 2
    assert "sglang_lb must be {type: haproxy, socket: PATH or HOST:PORT, backend: NAME" in run.stdout


def test_an_unknown_server_fails_the_drain_with_the_modules_one_line(tmp_path, haproxy):
    lb = dict(haproxy_lb(haproxy), server="gpu-z")
    run = run_tasks(tmp_path, "lb_drain.yml", {"sglang_lb": lb, "sglang_service_port": 9})
    assert run.returncode == 2
    assert "Module failed: HAProxy backend 'sglang' has no server 'gpu-z' (it has: gpu-a, gpu-b)\n" in run.stdout
    assert haproxy.status("gpu-a") == "no check" and haproxy.status("gpu-b") == "no check"
