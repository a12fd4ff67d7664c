"""Bad variables stop playbooks/site.yml in its first play, before any change.

site.yml runs in check mode against a throwaway inventory whose one host is this
machine (connection local): the failing task must belong to the preflight play, the
second play must never start, and nothing may be reported as changed.
"""
import json
import shutil
import subprocess

import pytest

from conftest import ANSIBLE_PLAYBOOK, ROOT, TEST_API_KEY, ansible_env, failures_by_host, group_vars, write_inventory

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
    """(play name, task name, message) of every failed task, all hosts together."""
    return [failure for found in failures_by_host(result).values() for failure in found]


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
    ({"sglang_version": "0.5.24\n"}, "sglang_version must be an exact release"),
    ({"cuda_toolkit_version": "13.0\n"}, "cuda_toolkit_version must be 13.<minor>"),
    ({"sglang_service_supervisor": "false"},
     'sglang_service: sglang_service_supervisor must be true or false, unquoted, got "false" (a string); '
     'with -e write it as JSON: -e \'{"sglang_service_supervisor": false}\''),
    ({"sglang_cache_check": "yes"}, 'sglang: sglang_cache_check must be true or false, unquoted, got "yes" (a string)'),
    ({"sglang_service_extra_args": [{"--kv-cache-dtype": "fp8_e4m3"}]},
     "sglang_service_extra_args must be a list whose items are strings (one flag) or lists of strings"),
    ({"sglang_service_extra_args": [["--json-model-override-args", ["a", "b"]]]},
     'got [["--json-model-override-args", ["a", "b"]]]'),
    ({"sglang_service_weight_cache": True},
     "sglang_service_weight_cache is true, but SGLang refuses --weight-cache-mode with speculative decoding "
     "(sglang_service_speculative_algorithm DFLASH)"),
    ({"sglang_service_weight_cache": True, "sglang_service_speculative_algorithm": "",
      "sglang_service_supervisor": False},
     "sglang_service_weight_cache is true, but it needs sglang_service_supervisor"),
    ({"sglang_service_weight_cache": "yes"}, 'value of sglang_service_weight_cache must be one of: auto, True, False, got: yes'),
    ({"sglang_service_weight_cache": True, "sglang_service_speculative_algorithm": "",
      "sglang_service_extra_args": [["--quantization", "awq"]]},
     "sglang_service_weight_cache is true, but SGLang cannot hold the weights of this model: quantization 'awq' "
     "(from --quantization): refused by the allowlist of SGLang 0.5.23"),
    ({"sglang_service_weight_cache": True, "sglang_service_speculative_algorithm": "",
      "sglang_service_weight_cache_runtime_dir": "/tmp/weights"},
     'sglang_service_weight_cache_runtime_dir must be a folder directly under /run (/run/NAME), got "/tmp/weights"'),
    ({"sglang_service_weight_cache": True, "sglang_service_speculative_algorithm": "",
      "sglang_service_weight_cache_extra_args": [{"--force": True}]},
     "sglang_service_weight_cache_extra_args must be a list whose items are strings"),
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


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="this machine's nvidia-smi would count the GPUs")
def test_on_a_fresh_host_the_gpus_on_the_pci_bus_check_the_tp_size(inventory):
    # Extra vars win over the cuda preflight's own count of this machine's PCI bus.
    returncode, result = run_site(inventory, {"sglang_service_tp_size": 3, "sglang_service_gpu_count": 0,
                                              "cuda_gpu_pci_count": 8})
    assert returncode != 0
    (play, task, text), = failures(result)
    assert play == PREFLIGHT_PLAY and task.endswith("Check the TP size divides the GPU count"), task
    assert "sglang_service_tp_size (3) must divide the GPU count (8, from NVIDIA GPUs on the PCI bus)" in str(text)


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


INJECTION = "\nExecStartPre=+/bin/sh -c 'id > /tmp/pwned'"
SECRET_PART = "sk-hostile-key-5f2c9a"

# host -> (variables, what the failure message must say). One ansible-playbook run checks all.
UNSAFE_VALUES = {
    "extra-env-name": ({"sglang_service_extra_env": {"X" + INJECTION: "1"}}, "sglang_service_extra_env key"),
    "extra-env-value": ({"sglang_service_extra_env": {"X": "1" + INJECTION}},
                        "sglang_service_extra_env['X'] holds the control character '\\n'"),
    "env-name": ({"sglang_service_extra_env": {"NOT-A-NAME": "1"}}, "take variable names"),
    "limit-nofile": ({"sglang_service_limit_nofile": "1048576" + INJECTION}, "sglang_service_limit_nofile holds"),
    "limit-memlock": ({"sglang_service_limit_memlock": "lots"}, "sglang_service_limit_memlock a size"),
    "device-allow": ({"sglang_service_device_allow": ["/dev/nvidiactl rw" + INJECTION]},
                     "sglang_service_device_allow[0] holds"),
    "syscall-filter": ({"sglang_service_system_call_filter": ["@system-service" + INJECTION]},
                       "sglang_service_system_call_filter[0] holds"),
    "runtime-directory": ({"sglang_service_runtime_directory": "run" + INJECTION},
                          "sglang_service_runtime_directory holds"),
    "served-model-name": ({"sglang_service_served_model_name": "kimi" + INJECTION},
                          "sglang_service_served_model_name holds"),
    "served-model-name-line-separator": ({"sglang_service_served_model_name": "kimi\u2028MainPID=1"},
                                         "sglang_service_served_model_name holds the line separator '\\u2028'"),
    "extra-env-next-line": ({"sglang_service_extra_env": {"X": "1\x85NRestarts=0"}},
                            "sglang_service_extra_env['X'] holds the control character '\\x85'"),
    "nccl-env-record-separator": ({"sglang_service_nccl_env": {"NCCL_DEBUG": "INFO\x1eResult=success"}},
                                  "sglang_service_nccl_env['NCCL_DEBUG'] holds the control character '\\x1e'"),
    "extra-args": ({"sglang_service_extra_args": [["--chat-template", "x\\"]]}, "ends with a backslash"),
    "state-dir": ({"sglang_service_state_dir": "/var/lib/sg lang"}, "sglang_service_state_dir and"),
    "api-key-newline": ({"vault_sglang_api_key": SECRET_PART + "\nsecond line"},
                        "sglang_service_api_key holds the character \\n"),
    "api-key-dash": ({"vault_sglang_api_key": "-" + SECRET_PART}, "sglang_service_api_key starts with '-'"),
    "api-key-unicode": ({"vault_sglang_api_key": SECRET_PART + "\u00e9"}, "sglang_service_api_key holds the character U+00E9"),
}


def test_values_that_could_inject_into_the_unit_fail_in_preflight_naming_the_variable(tmp_path):
    base = dict(group_vars("production"), vault_sglang_api_key=TEST_API_KEY)
    hosts = {name: dict(base, **variables) for name, (variables, _) in UNSAFE_VALUES.items()}
    inventory = write_inventory(tmp_path, hosts)
    run = subprocess.run(
        [str(ANSIBLE_PLAYBOOK), "-i", str(inventory), str(ROOT / "playbooks" / "site.yml"), "--check"],
        env=ansible_env(ANSIBLE_STDOUT_CALLBACK="ansible.posix.json"), capture_output=True, text=True, check=False)
    result = json.loads(run.stdout[run.stdout.index("{"):])
    assert run.returncode != 0
    assert [p["play"]["name"] for p in result["plays"]] == [PREFLIGHT_PLAY]
    assert all(stats["changed"] == 0 for stats in result["stats"].values())
    failed = {host: [str(message) for _, _, message in found] for host, found in failures_by_host(result).items()}
    for name, (_, message) in UNSAFE_VALUES.items():
        assert len(failed.get(name, [])) == 1, (name, failed.get(name))
        assert message in failed[name][0], (name, failed[name])
    assert SECRET_PART not in run.stdout + run.stderr


def test_a_missing_model_folder_stops_the_first_play_before_any_install(tmp_path):
    """A real (not check-mode) run of the preflight plays only: the folder check runs
    before the roles, unless an earlier role's post-install command creates the folder."""
    base = dict(group_vars("production"), vault_sglang_api_key=TEST_API_KEY,
                sglang_service_model_path=str(tmp_path / "absent-model"))
    creates = dict(base, sglang_post_install_commands=[
        {"argv": ["true"], "creates": str(tmp_path / "absent-model" / "config.json")}])
    inventory = write_inventory(tmp_path / "inv", {"no-model": base, "model-made-later": creates})
    run = subprocess.run(
        [str(ANSIBLE_PLAYBOOK), "-i", str(inventory), str(ROOT / "playbooks" / "site.yml"), "--tags", "preflight"],
        env=ansible_env(ANSIBLE_STDOUT_CALLBACK="ansible.posix.json"), capture_output=True, text=True, check=False)
    result = json.loads(run.stdout[run.stdout.index("{"):])
    failed = failures_by_host(result)
    assert [(p, t.split(": ")[-1]) for p, t, _ in failed["no-model"]] == [
        (PREFLIGHT_PLAY, "Stop when the model folder is missing")], failed
    assert "absent-model' is not a folder" in str(failed["no-model"][0][2])
    # This machine may not boot systemd; that host check is the only one allowed to fail here.
    assert all(t.endswith("Check systemd is the init system") for _, t, _ in failed.get("model-made-later", [])), failed


# host -> (variables, the group it names and that group's hosts in order, what the failure says;
# None: passes). peer-host is a node of the groups but not of the play. One run checks all.
MULTI_HOST_CASES = {
    "nodes-missing-group": ({"sglang_service_nodes_group": "no_such_group"}, None,
                            'sglang_service_nodes_group "no_such_group" is not a group of the inventory'),
    "nodes-empty-group": ({}, [], 'sglang_service_nodes_group "nodes_empty_group" has no hosts'),
    "nodes-not-member": ({"sglang_service_nodes_group": "outsiders"}, ["peer-host"],
                         'nodes-not-member is not a host of sglang_service_nodes_group "outsiders" (its hosts: peer-host)'),
    "nodes-tp-odd": ({"sglang_service_tp_size": 3}, ["nodes-tp-odd", "peer-host"],
                     'sglang_service_tp_size (3) must be divisible by the number of nodes (2 in "nodes_tp_odd")'),
    "nodes-rank1-supervised": ({"sglang_service_supervisor": True}, ["peer-host", "nodes-rank1-supervised"],
                               'sglang_service_supervisor must be false on nodes-rank1-supervised '
                               '(node rank 1 of "nodes_rank1_supervised")'),
    "nodes-rank0-supervised": ({"sglang_service_supervisor": True}, ["nodes-rank0-supervised", "peer-host"],
                               'sglang_service_supervisor must be false on nodes-rank0-supervised '
                               '(node rank 0 of "nodes_rank0_supervised"): the supervisor decides for one host'),
    "nodes-port-clash": ({"sglang_service_dist_init_port": 30001}, ["nodes-port-clash", "peer-host"],
                         "differ from sglang_service_port, got 30001"),
    "nodes-gpus": ({"sglang_service_tp_size": 16, "sglang_service_gpu_count": 4}, ["nodes-gpus", "peer-host"],
                   "sglang_service_tp_size / nodes (16 / 2 = 8 per node) must divide the GPU count (4"),
    "nodes-good": ({"sglang_service_tp_size": 16, "sglang_service_gpu_count": 8, "sglang_service_supervisor": False},
                   ["peer-host", "nodes-good"], None),
}


def test_multi_host_settings_fail_in_preflight_with_one_line_each(tmp_path):
    # The nodes of a server run without the supervisor, unless a case says otherwise.
    base = dict(group_vars("production"), vault_sglang_api_key=TEST_API_KEY, sglang_service_supervisor=False)
    hosts, groups = {}, {}
    for name, (variables, members, _) in MULTI_HOST_CASES.items():
        hosts[name] = dict(base, **{"sglang_service_nodes_group": name.replace("-", "_"), **variables})
        if members is not None:
            groups[hosts[name]["sglang_service_nodes_group"]] = members
    inventory = write_inventory(tmp_path, hosts, groups=groups)
    run = subprocess.run(
        [str(ANSIBLE_PLAYBOOK), "-i", str(inventory), str(ROOT / "playbooks" / "site.yml"), "--check",
         "--tags", "preflight"],
        env=ansible_env(ANSIBLE_STDOUT_CALLBACK="ansible.posix.json"), capture_output=True, text=True, check=False)
    result = json.loads(run.stdout[run.stdout.index("{"):])
    assert all(stats["changed"] == 0 for stats in result["stats"].values())
    # This machine may not boot systemd; that host check may fail on any host.
    failed = {host: [(task, str(message)) for _, task, message in found
                     if not task.endswith(": Check systemd is the init system")]
              for host, found in failures_by_host(result).items()}
    for name, (_, _, message) in MULTI_HOST_CASES.items():
        if message is None:
            assert failed.get(name, []) == [], (name, failed.get(name))
            continue
        assert len(failed.get(name, [])) == 1, (name, failed.get(name))
        task, text = failed[name][0]
        assert "\n" not in text and message in text, (name, text)
    assert "peer-host" not in result["stats"]


def _model(folder, quantization_config=None):
    folder.mkdir(parents=True, exist_ok=True)
    config = {"architectures": ["DeepseekV3ForCausalLM"], "torch_dtype": "bfloat16"}
    if quantization_config:
        config["quantization_config"] = quantization_config
    (folder / "config.json").write_text(json.dumps(config))
    return str(folder)


INT4 = {"quant_method": "compressed-tensors", "format": "pack-quantized"}


def _task_result(result, name):
    return next(task["hosts"]["preflight-host"] for play in result["plays"] for task in play["tasks"]
                if task["task"]["name"].endswith(": " + name))


def test_weight_cache_true_with_an_int4_model_stops_naming_method_accepted_and_alternative(inventory, tmp_path):
    returncode, result = run_site(inventory, {"sglang_service_weight_cache": True,
                                              "sglang_service_speculative_algorithm": "",
                                              "sglang_service_model_path": _model(tmp_path / "int4", INT4)})
    assert returncode != 0
    (play, task, text), = failures(result)
    assert play == PREFLIGHT_PLAY and task.endswith("Stop when the weight cache is asked for where SGLang cannot run it")
    assert ("quantization 'compressed-tensors' (from config.json quantization_config.quant_method): refused by "
            "the allowlist of SGLang 0.5.23") in str(text)
    assert "which accepts none (unquantized), 'fp8' (with weight_block_size set)" in str(text)
    assert "Set sglang_service_weight_cache to auto (or false)" in str(text) and "prewarmed" in str(text)
    assert all(stats["changed"] == 0 for stats in result["stats"].values())


@pytest.mark.parametrize("quantization_config, daemon", [
    (INT4, False),
    ({"quant_method": "fp8", "weight_block_size": [128, 128]}, True),
    ({"quant_method": "fp8"}, False),
    (None, True),
])
def test_weight_cache_auto_runs_the_daemon_only_where_sglang_holds_the_weights(inventory, tmp_path,
                                                                              quantization_config, daemon):
    returncode, result = run_site(inventory, {"sglang_service_speculative_algorithm": "",
                                              "sglang_service_model_path": _model(tmp_path / "m", quantization_config)},
                                  "--tags", "preflight")
    found = failures(result)
    assert all(task.endswith(": Check systemd is the init system") for _, task, _ in found), found
    decided = _task_result(result, "Decide whether the weight cache daemon runs")
    assert decided["ansible_facts"]["_sglang_service_weight_cache_auto"] is daemon
    said = _task_result(result, "Say why no weight cache daemon runs")
    assert said.get("skipped", False) is daemon
    if not daemon:
        assert "sglang_service_weight_cache auto: no weight cache daemon on preflight-host, since SGLang cannot " \
               "hold the weights of this model" in said["msg"]
        assert "restarts are cold, the page cache prewarmed before the stop" in said["msg"]


def test_weight_cache_auto_asks_the_installed_sglang(inventory, tmp_path):
    """The venv's own is_ipc_quant_supported answers (here the stand-in's, as 0.5.23's)."""
    python = tmp_path / "venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    # The role runs it isolated (-I); the stand-in's package comes from its source folder here.
    python.write_text("#!/bin/sh\n[ \"$1\" = -I ] && shift\nPYTHONPATH=%s exec %s \"$@\"\n"
                      % (ROOT / "tests" / "standin" / "src", ROOT / ".venv" / "bin" / "python"))
    python.chmod(0o755)
    returncode, result = run_site(inventory, {"sglang_service_speculative_algorithm": "",
                                              "sglang_service_python": str(python),
                                              "sglang_service_model_path": _model(tmp_path / "m", INT4)},
                                  "--tags", "preflight")
    fit = _task_result(result, "Ask which weights SGLang's weight cache can hold")
    assert fit["supported"] is False and fit["quant_method"] == "compressed-tensors"
    assert fit["asked"] == "SGLang 0.5.23 of %s" % python, fit


def test_production_gets_no_daemon_and_is_told_why(inventory):
    """The reference deployment (DFLASH) under the default auto: preflight passes, one line says why."""
    returncode, result = run_site(inventory, {}, "--tags", "preflight")
    said = _task_result(result, "Say why no weight cache daemon runs")
    assert "SGLang refuses --weight-cache-mode with speculative decoding" in said["msg"], said
