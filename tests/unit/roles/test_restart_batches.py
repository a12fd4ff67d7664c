"""restart.yml keeps the nodes of a server spread over several hosts in one batch: a batch
that splits a server fails on its first task, before any host is drained or stopped."""
import json
import subprocess

from conftest import ANSIBLE_PLAYBOOK, ROOT, ansible_env, failures_by_host, write_inventory

NODES = {"node-a": {"sglang_service_nodes_group": "pair"}, "node-b": {"sglang_service_nodes_group": "pair"}}
FIRST_TASK = "Check that this batch holds every node of the host's server"


def _restart(tmp_path, *extra):
    inventory = write_inventory(tmp_path, NODES, groups={"pair": ["node-a", "node-b"]})
    run = subprocess.run(
        [str(ANSIBLE_PLAYBOOK), "-i", str(inventory), str(ROOT / "restart.yml"), "-e", "sglang_restart_become=false",
         *extra], env=ansible_env(ANSIBLE_STDOUT_CALLBACK="ansible.posix.json"), capture_output=True, text=True,
        check=False)
    return run, json.loads(run.stdout[run.stdout.index("{"):])


def _task_names(result):
    return [task["task"]["name"] for play in result["plays"] for task in play["tasks"]]


def test_one_node_at_a_time_fails_before_anything_else_runs(tmp_path):
    run, result = _restart(tmp_path)
    assert run.returncode != 0
    failed = failures_by_host(result)
    assert [task for _, task, _ in failed["node-a"]] == [FIRST_TASK]
    message = failed["node-a"][0][2]
    assert "node-a is a node of the server pair (node-a, node-b), which restarts as one" in message
    assert "this batch holds node-a." in message and "sglang_restart_serial" in message
    assert _task_names(result) == [FIRST_TASK]          # the rollout stopped at the first batch


def test_a_limit_that_leaves_a_node_out_fails_the_same_way(tmp_path):
    run, result = _restart(tmp_path, "-e", "sglang_restart_serial=2", "--limit", "node-b")
    assert run.returncode != 0
    assert [task for _, task, _ in failures_by_host(result)["node-b"]] == [FIRST_TASK]


def test_the_whole_server_in_one_batch_passes_the_check(tmp_path):
    # --check: the restart action observes once; the local hosts have no unit, so the run
    # ends there, after the batch check passed on both nodes.
    run, result = _restart(tmp_path, "-e", "sglang_restart_serial=2", "--check")
    failed = failures_by_host(result)
    assert not any(task == FIRST_TASK for host in failed for _, task, _ in failed[host]), failed
    assert FIRST_TASK in _task_names(result) and len(_task_names(result)) > 1
