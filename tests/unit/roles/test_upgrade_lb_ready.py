"""An upgraded host that cannot be put back in the load balancer fails naming the release
it runs and what is left to do (playbooks/tasks/upgrade_lb_ready.yml), run on this machine
with a load balancer of type command."""
import json
import subprocess
import sys

from conftest import ANSIBLE_PLAYBOOK, ROOT, ansible_env

PLAY = """
- hosts: localhost
  connection: local
  gather_facts: false
  vars:
    ansible_python_interpreter: %(python)s
  tasks:
    - name: Put the upgraded host back
      ansible.builtin.import_tasks: %(tasks)s
"""


def run_ready(tmp_path, ready_argv):
    playbook = tmp_path / "play.yml"
    playbook.write_text(PLAY % {"python": sys.executable, "tasks": ROOT / "playbooks" / "tasks" / "upgrade_lb_ready.yml"})
    lb = {"type": "command", "drain": ["true"], "ready": ready_argv}
    return subprocess.run([str(ANSIBLE_PLAYBOOK), "-i", "localhost,", str(playbook), "-e",
                           json.dumps({"sglang_lb": lb, "sglang_version": "0.5.24"})],
                          env=ansible_env(ANSIBLE_STDOUT_CALLBACK="ansible.posix.json"),
                          capture_output=True, text=True, check=False)


def test_a_host_put_back_is_ready_in_the_load_balancer(tmp_path):
    mark = tmp_path / "ready"
    run = run_ready(tmp_path, ["touch", str(mark)])
    assert run.returncode == 0, run.stdout + run.stderr
    assert mark.exists()


def test_a_load_balancer_that_refuses_names_the_release_and_what_is_left(tmp_path):
    run = run_ready(tmp_path, ["sh", "-c", "echo 'admin socket refused' >&2; exit 3"])
    assert run.returncode != 0
    result = json.loads(run.stdout[run.stdout.index("{"):])
    msgs = [h.get("msg", "") for play in result["plays"] for task in play["tasks"] for h in task["hosts"].values()
            if h.get("failed")]
    assert msgs[-1].startswith("upgrade to 0.5.24 on localhost: the host runs 0.5.24 and is ready, but it could not "
                               "be put back in the load balancer ("), msgs
    assert msgs[-1].endswith("put it back by hand (docs/runbook.md#lb-drained); the rollout stopped"), msgs
