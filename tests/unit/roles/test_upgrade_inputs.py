"""Bad inputs stop playbooks/upgrade.yml in its first play, on every host, before any change,
with the release named in every failure.

upgrade.yml runs in check mode against a throwaway inventory of two hosts on this machine
(connection local); the flow after the checks (canary, rollback) needs systemd hosts and
runs in the Molecule fleet scenario.
"""
import json
import subprocess

import pytest

from conftest import ANSIBLE_PLAYBOOK, ROOT, TEST_API_KEY, ansible_env, failures_by_host, group_vars, write_inventory

CHECK_PLAY = "Check the upgrade's inputs on every host before any change"


@pytest.fixture(scope="module")
def inventory(tmp_path_factory):
    host = dict(group_vars("production"), vault_sglang_api_key=TEST_API_KEY)
    return write_inventory(tmp_path_factory.mktemp("upgrade"), {"host-a": host, "host-b": host})


def run_upgrade(inventory, extra_vars):
    run = subprocess.run(
        [str(ANSIBLE_PLAYBOOK), "-i", str(inventory), str(ROOT / "upgrade.yml"), "--check", "-e", json.dumps(extra_vars)],
        env=ansible_env(ANSIBLE_STDOUT_CALLBACK="ansible.posix.json"), capture_output=True, text=True, check=False)
    return run.returncode, json.loads(run.stdout[run.stdout.index("{"):])


@pytest.mark.parametrize("extra_vars, message", [
    ({}, "upgrade: sglang_upgrade_version is required: the SGLang release to upgrade to, "
         "e.g. -e sglang_upgrade_version=0.5.24."),
    ({"sglang_upgrade_version": ""}, "upgrade: sglang_upgrade_version is required"),
    ({"sglang_upgrade_version": "0.5.24", "sglang_upgrade_canary": 0, "sglang_upgrade_serial": "half"},
     "upgrade to 0.5.24: sglang_upgrade_canary must be a number of hosts (1 or more), got 0; "
     "sglang_upgrade_serial must be a number of hosts (1 or more) or a percentage, got half."),
    ({"sglang_upgrade_version": "latest"}, "sglang: sglang_version must be an exact release like 0.5.23 (got 'latest')"),
    ({"sglang_upgrade_version": "0.5.24", "sglang_upgrade_package_wheel": "/nonexistent/sglang-0.5.24-py3-none-any.whl"},
     "sglang: sglang_package_wheel '/nonexistent/sglang-0.5.24-py3-none-any.whl' does not exist on the controller."),
])
def test_bad_input_stops_the_upgrade_in_its_first_play(inventory, extra_vars, message):
    rc, result = run_upgrade(inventory, extra_vars)
    assert rc != 0
    found = failures_by_host(result)
    assert found, "no task failed"
    assert all(play == CHECK_PLAY for failures in found.values() for play, _task, _msg in failures)
    assert any(msg.startswith(message) for failures in found.values() for _p, _t, msg in failures), found
    assert [play["play"]["name"] for play in result["plays"]] == [CHECK_PLAY]
    assert not any(host.get("changed") for play in result["plays"] for task in play["tasks"]
                   for host in task["hosts"].values())
    version = str(extra_vars.get("sglang_upgrade_version") or "")
    if version:
        # the last word of each host that failed names the release it was to upgrade to
        assert all(failures[-1][2].startswith("upgrade to %s" % version) for failures in found.values()), found


def test_a_missing_wheel_names_the_release_and_the_wheel(inventory):
    wheel = "/nonexistent/sglang-0.5.24-py3-none-any.whl"
    rc, result = run_upgrade(inventory, {"sglang_upgrade_version": "0.5.24", "sglang_upgrade_package_wheel": wheel})
    assert rc != 0
    last = {host: failures[-1][2] for host, failures in failures_by_host(result).items()}
    assert set(last) == {"host-a", "host-b"}, last
    for host, msg in last.items():
        assert msg == ("upgrade to 0.5.24 stopped on %s before any change: sglang: sglang_package_wheel '%s' "
                       "does not exist on the controller." % (host, wheel)), msg


def test_the_nodes_of_a_server_spread_over_several_hosts_are_refused(tmp_path):
    node = dict(group_vars("production"), vault_sglang_api_key=TEST_API_KEY, sglang_service_nodes_group="pair",
                sglang_service_supervisor=False, sglang_service_tp_size=16)
    replica = dict(group_vars("production"), vault_sglang_api_key=TEST_API_KEY)
    inventory = write_inventory(tmp_path, {"replica": replica, "node-a": node, "node-b": node},
                                groups={"pair": ["node-a", "node-b"]})
    rc, result = run_upgrade(inventory, {"sglang_upgrade_version": "0.5.24"})
    assert rc != 0
    messages = [msg for failures in failures_by_host(result).values() for _p, _t, msg in failures]
    assert any("upgrading a server spread over several hosts is not built yet (node-a, node-b are nodes of one)"
               in msg for msg in messages), messages
    assert [play["play"]["name"] for play in result["plays"]] == [CHECK_PLAY]
