"""`bin/sglang-ops status` (playbooks/status.yml) against a real HAProxy: each host's state in
the load balancer, a host left drained named with the command that puts it back, and that
command run as printed. The hosts are this machine (connection local); where it boots no
systemd the observation after the load balancer read fails, which the exit status shows."""
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import yaml

from sglang_ops_cli import playbook_run
from sglang_ops_cli.cli import main

from .conftest import NO_HAPROXY

ROOT = Path(__file__).resolve().parents[3]
PUT_BACK = re.compile(r"gpu-a is drained in the load balancer \(sglang/gpu-a\): put it back with (ansible .*?) once it serves")


def inventory(tmp_path, lb):
    host = {"ansible_connection": "local", "ansible_python_interpreter": sys.executable, "sglang_restart_become": False,
            "sglang_service_port": 9, "sglang_lb": lb}
    path = tmp_path / "inventory.yml"
    path.write_text(yaml.safe_dump({"sglang": {"hosts": {"gpu-a": host, "gpu-b": host}}}))
    return path


def status(tmp_path, capsys, lb):
    code = main(["status", "-i", str(inventory(tmp_path, lb)),
                 "-e", json.dumps({"sglang_restart_artifacts_dir": str(tmp_path / "artifacts")})])
    out, err = capsys.readouterr()
    # the callback folds long messages over lines and doubles quotes inside single-quoted ones
    return code, " ".join(out.split()).replace("''", "'"), err


@NO_HAPROXY
def test_status_names_a_drained_host_and_the_command_that_puts_it_back(tmp_path, capsys, haproxy):
    haproxy.run("set server sglang/gpu-a state drain")
    code, out, err = status(tmp_path, capsys, {"type": "haproxy", "socket": haproxy.admin_socket, "backend": "sglang"})
    assert "load balancer: gpu-b is in sglang/gpu-b and takes traffic (HAProxy status no check, 0 session(s))" in out
    found = PUT_BACK.search(out)
    assert found, out
    assert "out of the load balancer: gpu-a drained (sglang/gpu-a)" in err
    assert code == (1 if "failed: " in err else playbook_run.EXIT_NOT_READY), err
    assert haproxy.status("gpu-a") == "DRAIN"          # status only reads
    env = dict(os.environ, ANSIBLE_CONFIG=str(ROOT / "ansible.cfg"), ANSIBLE_LOCALHOST_WARNING="0",
               PATH="%s:%s" % (Path(sys.executable).parent, os.environ.get("PATH", "")))
    put_back = subprocess.run(shlex.split(found.group(1)), cwd=ROOT, env=env, capture_output=True, text=True,
                              check=False)
    assert put_back.returncode == 0, put_back.stdout + put_back.stderr
    assert haproxy.status("gpu-a") == "no check"
    _, out, err = status(tmp_path, capsys, {"type": "haproxy", "socket": haproxy.admin_socket, "backend": "sglang"})
    assert "load balancer: gpu-a is in sglang/gpu-a and takes traffic" in out
    assert "out of the load balancer" not in err


@NO_HAPROXY
def test_an_unreadable_load_balancer_is_said_and_does_not_hide_the_host(tmp_path, capsys, haproxy):
    lb = {"type": "haproxy", "socket": haproxy.admin_socket, "backend": "sglang", "server": "gpu-z"}
    _, out, err = status(tmp_path, capsys, lb)
    assert ("load balancer: the state of gpu-a in sglang/gpu-z could not be read: "
            "HAProxy backend 'sglang' has no server 'gpu-z' (it has: gpu-a, gpu-b)") in out
    assert "out of the load balancer" not in err


def test_a_command_load_balancer_has_no_state_to_read(tmp_path, capsys):
    _, out, _ = status(tmp_path, capsys, {"type": "command", "drain": ["false"], "ready": ["false"]})
    assert "load balancer: sglang_lb of type command has no state to read; whether gpu-a is drained there is not known" in out


def test_a_drained_host_makes_status_not_ready_even_when_the_service_is():
    outcome = playbook_run.PlaybookOutcome(rc=0, status="successful", verdicts={"gpu-a": "ready", "gpu-b": "ready"})
    assert outcome.exit_code(need_ready_verdict=True) == playbook_run.EXIT_READY
    printer = playbook_run.EventPrinter(open(os.devnull, "w"))
    for host, state in (("gpu-a", "drain"), ("gpu-b", "drain"), ("gpu-b", "ready")):
        printer({"event": "runner_on_ok", "event_data": {"host": host, "res": {"ansible_facts": {
            "sglang_lb_state": {"state": state, "where": "sglang/" + host}}}}})
    assert printer.out_of_lb == {"gpu-a": ("drain", "sglang/gpu-a")}
    outcome.out_of_lb = printer.out_of_lb
    assert outcome.exit_code(need_ready_verdict=True) == playbook_run.EXIT_NOT_READY
    assert outcome.exit_code(need_ready_verdict=False) == playbook_run.EXIT_READY
