"""Bad variables stop playbooks/site.yml in its first play, before any change.

site.yml runs in check mode against a throwaway inventory whose one host is this
machine (connection local): the failing task must belong to the preflight play, the
second play must never start, and nothing may be reported as changed.
"""
import json
import subprocess

import pytest

from conftest import ANSIBLE_PLAYBOOK, ROOT, TEST_API_KEY, ansible_env, group_vars, write_inventory

PREFLIGHT_PLAY = "Check the variables of every role before any change"


@pytest.fixture(scope="module")
def inventory(tmp_path_factory):
    host = dict(group_vars("production"), vault_sglang_api_key=TEST_API_KEY)
    return write_inventory(tmp_path_factory.mktemp("preflight"), {"preflight-host": host})


def run_site(inventory, extra_vars, *options):
    run = subprocess.run(
        [str(ANSIBLE_PLAYBOOK), "-i", str(inventory), str(ROOT / "playbooks" / "site.yml"), "--check",
         "-e", json.dumps(extra_vars), *options],
        env=ansible_env(ANSIBLE_STDOUT_CALLBACK="ansible.posix.json"), capture_output=True, text=True, check=False)
    start = run.stdout.index("{")
    return run.returncode, json.loads(run.stdout[start:])


def failures(result):
    """(play name, task name, message) of every failed task."""
    found = []
    for play in result["plays"]:
        for task in play["tasks"]:
            for host_result in task["hosts"].values():
                if host_result.get("failed"):
                    found.append((play["play"]["name"], task["task"]["name"], host_result.get("msg", "")))
    return found


@pytest.mark.parametrize("bad_vars, message", [
    ({"sglang_service_tp_size": 3, "sglang_service_gpu_count": 8},
     "sglang_service_tp_size (3) must divide the GPU count (8"),
    ({"sglang_service_port": 70000}, "sglang_service_port must be between 1 and 65535, got 70000"),
    ({"sglang_service_port": 0}, "sglang_service_port must be between 1 and 65535, got 0"),
    ({"sglang_service_model_path": ""}, "sglang_service_model_path must be the absolute path of the model folder"),
    ({"sglang_service_speculative_algorithm": "MEDUSA"}, "sglang_service_speculative_algorithm must be one of"),
    ({"sglang_service_speculative_algorithm": "DFLASH", "sglang_service_speculative_draft_model_path": ""},
     "also need sglang_service_speculative_draft_model_path"),
    ({"cuda_toolkit_version": "12.8"}, "cuda_toolkit_version must be 13.<minor>"),
    ({"sglang_version": "latest"}, "sglang_version must be an exact release"),
    ({"sglang_service_extra_args": [{"--kv-cache-dtype": "fp8_e4m3"}]},
     "sglang_service_extra_args must be a list whose items are strings (one flag) or lists of strings"),
    ({"sglang_service_extra_args": [["--json-model-override-args", ["a", "b"]]]},
     'got [["--json-model-override-args", ["a", "b"]]]'),
])
def test_bad_variable_fails_in_preflight_before_any_change(inventory, bad_vars, message):
    returncode, result = run_site(inventory, bad_vars)
    assert returncode != 0
    found = failures(result)
    assert len(found) == 1, found
    play, task, text = found[0]
    assert play == PREFLIGHT_PLAY, found
    assert message in str(text), found
    assert [p["play"]["name"] for p in result["plays"]] == [PREFLIGHT_PLAY]
    assert all(stats["changed"] == 0 for stats in result["stats"].values())


def test_good_variables_pass_every_variable_check(inventory):
    returncode, result = run_site(inventory, {}, "--tags", "preflight")
    found = failures(result)
    # This machine may not boot systemd; that host check is the only one allowed to fail.
    assert all(task.endswith(": Check systemd is the init system") for _, task, _ in found), found
    assert any(task["task"]["name"].endswith(": Check the TP size divides the GPU count")
               and not task["hosts"]["preflight-host"].get("skipped")
               for play in result["plays"] for task in play["tasks"]), "TP check did not run"
    assert returncode == (2 if found else 0)


def test_extra_args_of_flags_and_flag_lists_pass(inventory):
    returncode, result = run_site(inventory, {"sglang_service_extra_args": [
        "--enable-metrics", ["--kv-cache-dtype", "fp8_e4m3"], []]}, "--tags", "preflight")
    found = failures(result)
    assert all(task.endswith(": Check systemd is the init system") for _, task, _ in found), found
    assert any(task["task"]["name"].endswith(": Check the extra arguments are strings or lists of strings")
               and not task["hosts"]["preflight-host"].get("failed")
               for play in result["plays"] for task in play["tasks"]), "extra_args check did not run"
