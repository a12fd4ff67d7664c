"""The flags check (roles/sglang_service/files/sglang-check-flags): the unit's flags parsed
by the parser of the SGLang that will run them, the SGLang stand-in's and the real pinned
SGLang's, and the role's task that runs it before the unit changes."""
import json
import os
import subprocess
import sys

import pytest

from conftest import (ANSIBLE_PLAYBOOK, ROOT, ansible_env, failures_by_host, group_vars, render_units, server_flags,
                      write_inventory)

SCRIPT = ROOT / "roles" / "sglang_service" / "files" / "sglang-check-flags"
STANDIN_SRC = ROOT / "tests" / "standin" / "src"
MODEL = "/var/lib/sglang/models/standin-k26"


def check_with_standin(*flags):
    # PYTHONPATH stands in for the venv (the role runs the venv's python with -I).
    return subprocess.run([sys.executable, str(SCRIPT), *flags], env=dict(os.environ, PYTHONPATH=str(STANDIN_SRC)),
                          capture_output=True, text=True, timeout=60, check=False)


def check_with_real(python, *flags):
    return subprocess.run([python, "-I", str(SCRIPT), *flags], capture_output=True, text=True, timeout=120,
                          check=False)


@pytest.fixture(scope="module")
def demo_flags(tmp_path_factory):
    """The server flags of the demo inventory's unit, without the API key's --config."""
    (unit, _config), = render_units(tmp_path_factory.mktemp("render"),
                                    {"demo": dict(group_vars("demo"), sglang_service_api_key="")}).values()
    return server_flags(unit)


def test_standin_parser_accepts_the_units_flags(demo_flags):
    run = check_with_standin(*demo_flags)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "sglang-check-flags: SGLang 0.5.23 accepts the flags"


def test_standin_parser_refuses_an_unknown_flag_with_argparses_message(demo_flags):
    run = check_with_standin(*demo_flags, "--no-such-flag", "1")
    assert run.returncode == 2
    assert run.stderr.startswith("usage: sglang.launch_server")
    assert run.stderr.rstrip().splitlines()[-1] == "sglang.launch_server: error: unrecognized arguments: --no-such-flag 1"


def test_config_file_is_merged_and_its_values_stay_out_of_the_message(tmp_path):
    config = tmp_path / "unit.yaml"
    config.write_text("api-key: sekrit-key-5f2c\n")
    assert check_with_standin("--config", str(config), "--model-path", MODEL).returncode == 0
    config.write_text("api-key: sekrit-key-5f2c\nno-such-option: sekrit-key-5f2c\n")
    run = check_with_standin("--config", str(config), "--model-path", MODEL)
    assert run.returncode == 2
    assert "unrecognized arguments: --no-such-option <from --config>" in run.stderr
    assert "sekrit" not in run.stderr + run.stdout


def test_real_sglang_accepts_the_units_flags_and_refuses_an_ambiguous_one(demo_flags, real_sglang_python):
    run = check_with_real(real_sglang_python, *demo_flags)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.strip() == "sglang-check-flags: SGLang 0.5.23 accepts the flags"
    # 0.5.23 split --cuda-graph-max-bs into -decode and -prefill: the prefix is ambiguous there
    run = check_with_real(real_sglang_python, *demo_flags, "--cuda-graph-max-bs", "8")
    assert run.returncode == 2
    assert "error: ambiguous option: --cuda-graph-max-bs could match" in run.stderr.splitlines()[-1]


def test_missing_sglang_is_named(tmp_path):
    run = subprocess.run([sys.executable, "-I", str(SCRIPT), "--model-path", MODEL], capture_output=True, text=True,
                         timeout=60, check=False, cwd=tmp_path)
    assert run.returncode == 3
    assert run.stderr.startswith(f"sglang-check-flags: SGLang's parser does not import in {sys.executable}: ")


def run_role_check(tmp_path, python, **variables):
    """ansible-playbook flags_check.yml for one host whose venv python is `python` (this user runs it)."""
    import getpass
    # The daemon's parser imports transformers and torchvision, which the CPU venv of the real
    # SGLang leaves out: the daemon's flags are parsed by test_weight_cache_units.py instead.
    host = dict(group_vars("demo"), sglang_service_api_key="", sglang_service_weight_cache=False,
                sglang_service_python=python,
                sglang_service_user=getpass.getuser(), sglang_service_config_dir=str(tmp_path / "etc"), **variables)
    (tmp_path / "etc").mkdir(exist_ok=True)
    runs = len(list(tmp_path.glob("inv-*")))
    inventory = write_inventory(tmp_path / f"inv-{runs}", {"check-host": host}, with_role_defaults=True)
    run = subprocess.run(
        [str(ANSIBLE_PLAYBOOK), "-i", str(inventory), str(ROOT / "tests" / "unit" / "roles" / "flags_check.yml"),
         "-e", json.dumps({"_sglang_service_flags_check_script": str(SCRIPT)})],
        env=ansible_env(ANSIBLE_STDOUT_CALLBACK="ansible.posix.json"), capture_output=True, text=True, check=False)
    return run.returncode, json.loads(run.stdout[run.stdout.index("{"):])


def task_results(result, name):
    return [task["hosts"]["check-host"] for play in result["plays"] for task in play["tasks"]
            if task["task"]["name"].split(" : ")[-1] == name]


def test_role_checks_once_per_venv_and_flags_and_stops_on_a_refused_flag(tmp_path, real_sglang_python):
    rc, result = run_role_check(tmp_path, real_sglang_python)
    assert rc == 0, failures_by_host(result)
    (parsed,) = task_results(result, "Parse the server flags as the server will")
    assert parsed["rc"] == 0 and "--model-path" in parsed["cmd"] and MODEL in parsed["cmd"]
    assert (tmp_path / "etc" / "sglang-k26-ddtree.flags-checked").exists()
    # the same venv and flags: not parsed again
    rc, result = run_role_check(tmp_path, real_sglang_python)
    assert rc == 0 and task_results(result, "Parse the server flags as the server will")[0].get("skipped")
    # a flag the pinned SGLang does not know stops the play with argparse's message
    rc, result = run_role_check(tmp_path, real_sglang_python, sglang_service_extra_args=[["--no-such-flag", "1"]])
    assert rc != 0
    (failure,) = failures_by_host(result)["check-host"]
    assert failure[1].split(" : ")[-1] == "Stop when the venv's SGLang refuses the flags"
    assert failure[2] == (f"sglang_service: the SGLang of {real_sglang_python} refuses the unit's flags: "
                          "sglang.launch_server: error: unrecognized arguments: --no-such-flag 1")
