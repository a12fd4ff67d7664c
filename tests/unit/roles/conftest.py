"""Throwaway inventories and ansible-playbook runs for the role tests."""
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

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


def write_inventory(directory, hosts, with_role_defaults=False, groups=None):
    """hosts: {name: {var: value}}, all in the sglang group; groups: {group: [host, ...]} more
    groups, hosts in that order; every host connects locally with this Python."""
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
    layout.update({group: {"hosts": {name: None for name in members}} for group, members in (groups or {}).items()})
    (inventory / "hosts.yml").write_text(yaml.safe_dump(layout, sort_keys=False))
    for name, variables in hosts.items():
        variables = dict(variables, ansible_connection="local", ansible_python_interpreter=sys.executable)
        (inventory / "host_vars" / f"{name}.yml").write_text(yaml.safe_dump(variables))
    return inventory


def run_render(tmp_path, hosts, groups=None):
    """ansible-playbook render_unit.yml over `hosts`; (completed run, output folder)."""
    inventory = write_inventory(tmp_path, hosts, with_role_defaults=True, groups=groups)
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    run = subprocess.run(
        [str(ANSIBLE_PLAYBOOK), "-i", str(inventory), str(Path(__file__).parent / "render_unit.yml"),
         "-e", json.dumps({"repo_root": str(ROOT), "out_dir": str(out_dir)})],
        env=ansible_env(ANSIBLE_STDOUT_CALLBACK="ansible.posix.json"), capture_output=True, text=True, check=False)
    return run, out_dir


def render_units(tmp_path, hosts, groups=None):
    """Render the unit and config file for each host; returns {host: (unit_text, config_path)}."""
    run, out_dir = run_render(tmp_path, hosts, groups)
    assert run.returncode == 0, run.stdout + run.stderr
    return {name: ((out_dir / f"{name}.service").read_text(), out_dir / f"{name}.yaml") for name in hosts}


def parse_unit(text):
    """[(section, key, raw value)] of a unit file read as systemd reads it: a line ends at
    \\n, \\r or NUL; blank lines and lines starting with # or ; are skipped (inside a
    continuation too); a line ending in an odd number of backslashes continues on the
    next with that backslash turned into a space; [Section] headers; key=value."""
    entries, section, continued = [], None, None
    for raw in re.split(r"[\r\n\0]", text):
        line = raw.strip()
        if not line or line[0] in "#;":
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            continued = (continued or "") + line[:-1] + " "
            continue
        line, continued = (continued or "") + line, None
        if line.startswith("[") and line.endswith("]"):
            section = line[1:-1]
            continue
        key, sep, value = line.partition("=")
        assert sep, "not a key=value line: %r" % line
        entries.append((section, key.strip(), value.strip()))
    assert continued is None, "the unit ends inside a continued line"
    return entries


def resolve_specifiers(text):
    """`%%` -> `%`; any other specifier is an error here (the role never means one)."""
    out, i = [], 0
    while i < len(text):
        if text[i] == "%":
            assert text[i + 1:i + 2] == "%", "unescaped specifier %r in %r" % (text[i:i + 2], text)
            out.append("%")
            i += 2
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def setting(unit_text, section, key):
    """Every raw value of `key` in `section`, in order."""
    return [v for s, k, v in parse_unit(unit_text) if (s, k) == (section, key)]


def exec_start_argv(unit_text):
    """ExecStart= of a unit as the argument vector systemd hands to execve."""
    (raw,) = setting(unit_text, "Service", "ExecStart")
    return [arg.replace("$$", "$") for arg in systemd_split(resolve_specifiers(raw))]


def environment(unit_text):
    """The Environment= assignments of a unit as systemd sets them."""
    env = {}
    for raw in setting(unit_text, "Service", "Environment"):
        for word in systemd_split(resolve_specifiers(raw)):
            name, _, value = word.partition("=")
            env[name] = value
    return env


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


def daemon_flags(unit_text):
    """The arguments after `python -m sglang.srt.weight_cache.daemon` in ExecStart."""
    argv = exec_start_argv(unit_text)
    at = argv.index("sglang.srt.weight_cache.daemon")
    assert argv[at - 1] == "-m"
    return argv[at + 1:]


def parse_with_real_sglang(python, flags, daemon=False):
    """The real parser of the server, or with daemon=True of the weight cache daemon."""
    return subprocess.run([python, str(ROOT / "tests" / "sglang_real" / "parse_args.py"),
                           *(["weight-cache-daemon"] if daemon else []), *flags],
                          capture_output=True, text=True, check=False)


def failures_by_host(result):
    """{host: [(play name, task name, message)]} of every failed task in a json-callback result."""
    found = {}
    for play in result["plays"]:
        for task in play["tasks"]:
            for host, host_result in task["hosts"].items():
                if host_result.get("failed"):
                    found.setdefault(host, []).append((play["play"]["name"], task["task"]["name"], host_result.get("msg", "")))
    return found
