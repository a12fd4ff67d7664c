"""Throwaway inventories and ansible-playbook runs for the role tests."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[3]
ANSIBLE_PLAYBOOK = Path(sys.executable).parent / "ansible-playbook"
TEST_API_KEY = "unit-test-key-5f2c9a"


def ansible_env(**extra):
    env = dict(os.environ)
    env.update({
        "ANSIBLE_CONFIG": str(ROOT / "ansible.cfg"),
        "ANSIBLE_ROLES_PATH": str(ROOT / "roles"),
        "ANSIBLE_COLLECTIONS_PATH": str(ROOT / "collections"),
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_LOCALHOST_WARNING": "0",
        "ANSIBLE_INVENTORY_UNPARSED_WARNING": "0",
    })
    env.update(extra)
    return env


def group_vars(name):
    """The inventory variables of inventories/<name> for the sglang group."""
    base = ROOT / "inventories" / name / "group_vars"
    path = base / "sglang" / "main.yml" if (base / "sglang").is_dir() else base / "sglang.yml"
    return yaml.safe_load(path.read_text())


def write_inventory(directory, hosts, with_role_defaults=False):
    """hosts: {name: {var: value}}; every host connects locally with this Python."""
    inventory = Path(directory) / "inventory"
    (inventory / "host_vars").mkdir(parents=True)
    (inventory / "group_vars" / "all").mkdir(parents=True)
    if with_role_defaults:
        for role in ("sglang", "sglang_service"):
            shutil.copy(ROOT / "roles" / role / "defaults" / "main.yml",
                        inventory / "group_vars" / "all" / f"{role}-defaults.yml")
        shutil.copy(ROOT / "roles" / "sglang_service" / "vars" / "main.yml",
                    inventory / "group_vars" / "all" / "sglang_service-vars.yml")
    layout = {"sglang": {"hosts": {name: None for name in hosts}}}
    (inventory / "hosts.yml").write_text(yaml.safe_dump(layout))
    for name, variables in hosts.items():
        variables = dict(variables, ansible_connection="local", ansible_python_interpreter=sys.executable)
        (inventory / "host_vars" / f"{name}.yml").write_text(yaml.safe_dump(variables))
    return inventory


def render_units(tmp_path, hosts):
    """Render the unit and env file for each host; returns {host: (unit_text, env_path)}."""
    inventory = write_inventory(tmp_path, hosts, with_role_defaults=True)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    run = subprocess.run(
        [str(ANSIBLE_PLAYBOOK), "-i", str(inventory), str(Path(__file__).parent / "render_unit.yml"),
         "-e", json.dumps({"repo_root": str(ROOT), "out_dir": str(out_dir)})],
        env=ansible_env(), capture_output=True, text=True, check=False)
    assert run.returncode == 0, run.stdout + run.stderr
    return {name: ((out_dir / f"{name}.service").read_text(), out_dir / f"{name}.env") for name in hosts}


def exec_start_argv(unit_text):
    """ExecStart= of a unit as the argument vector systemd hands to execve."""
    lines = unit_text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("ExecStart="))
    joined = ""
    for line in lines[start:]:
        if line.endswith("\\"):
            joined += line[:-1] + " "
        else:
            joined += line
            break
    argv = systemd_split(joined[len("ExecStart="):])
    return [arg.replace("$$", "$").replace("%%", "%") for arg in argv]


_ESCAPES = {"n": "\n", "r": "\r", "t": "\t", "\\": "\\", "'": "'", '"': '"', " ": " "}


def systemd_split(text):
    """Split a command line the way systemd does: quotes at word start, C escapes."""
    words, i, n = [], 0, len(text)
    while i < n:
        while i < n and text[i].isspace():
            i += 1
        if i >= n:
            break
        quote = text[i] if text[i] in "'\"" else None
        i += 1 if quote else 0
        word = []
        while i < n and (text[i] != quote if quote else not text[i].isspace()):
            if text[i] == "\\" and i + 1 < n:
                word.append(_ESCAPES.get(text[i + 1], text[i + 1]))
                i += 2
            else:
                word.append(text[i])
                i += 1
        i += 1 if quote else 0
        words.append("".join(word))
    return words


def server_flags(unit_text):
    """The arguments after `python -m sglang.launch_server` in ExecStart."""
    argv = exec_start_argv(unit_text)
    at = argv.index("sglang.launch_server")
    assert argv[at - 1] == "-m"
    return argv[at + 1:]


@pytest.fixture(scope="session")
def real_sglang_python():
    """Python of the cached venv with the real pinned SGLang (tests/sglang_real/setup)."""
    run = subprocess.run([str(ROOT / "tests" / "sglang_real" / "setup")], capture_output=True, text=True,
                         check=False)
    assert run.returncode == 0, "tests/sglang_real/setup failed:\n" + run.stderr[-3000:]
    return run.stdout.strip().splitlines()[-1]


def parse_with_real_sglang(python, flags):
    return subprocess.run([python, str(ROOT / "tests" / "sglang_real" / "parse_args.py"), *flags],
                          capture_output=True, text=True, check=False)
