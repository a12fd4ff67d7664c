"""Every program docs/runbook.md's shell blocks call is on the machine it runs on: installed by
a role (the Debian packages of the roles' apt tasks), part of the base system (BASE_SYSTEM),
a shell builtin, the SGLang venv's, or on the controller this project's CLI and Ansible
(requirements.txt). A runbook command that calls a tool nobody installs fails on a real host
in the middle of an incident, however well it passes on a test host that has it."""
import re
import shlex
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
RUNBOOK = ROOT / "docs" / "runbook.md"
ROLES = ROOT / "roles"

# The base system of a supported host (Debian 12, Ubuntu 22.04/24.04 server): packages of
# priority required or important, which every install has, with the programs used here.
BASE_SYSTEM = {
    "coreutils": {"cat", "ls", "mkdir", "rm", "head", "tail", "sort", "uniq", "tr", "du", "sleep", "tee", "wc",
                  "cut", "date", "env", "sha256sum", "stat", "timeout"},
    "grep": {"grep"}, "sed": {"sed"}, "mawk": {"awk"}, "findutils": {"find", "xargs"},
    "procps": {"ps", "free", "kill", "pgrep"}, "util-linux": {"dmesg", "runuser"},
    "iproute2": {"ss", "ip"}, "less": {"less"},
    "systemd": {"systemctl", "journalctl", "systemd-cgls", "systemd-run", "systemd-analyze"},
    # how on-call logs in on a GPU host; a host run as root drops the word
    "sudo": {"sudo"},
    # Ansible's interpreter on every host it manages (its one requirement on a host)
    "python3": {"python3"},
}
SHELL_BUILTINS = {"cd", "echo", "printf", "export", "set", "test", "[", "true", "false", "read", "kill", "exit",
                  "for", "do", "done", "while", "if", "then", "else", "fi", "time"}
# Programs whose Debian package has another name; a set: any of them installs it.
PROVIDED_BY = {
    "lspci": {"pciutils"}, "iostat": {"sysstat"}, "smartctl": {"smartmontools"},
    "nvidia-smi": {"cuda-drivers", "nvidia-open"},   # the cuda role's driver, either flavour
}
# The SGLang venv the sglang role creates (sglang_venv_dir), as the runbook names it.
VENV_PREFIXES = ("$VENV/bin/", "/opt/sglang/venvs/")
# On the controller: requirements.txt's ansible-core.
CONTROLLER = {"ansible", "ansible-playbook", "ansible-doc"}
# Wrappers whose argument is the program run (their options skipped).
WRAPPERS = {"sudo": {"-u", "-g"}, "env": {"-u"}, "nohup": set(), "exec": set()}
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_SEPARATORS = {"|", "||", "&&", ";", "&", "(", ")", "|&", ";;"}
_REDIRECTIONS = {">", ">>", "<", "<<", ">&", "<&", "&>", "2>", "2>>"}


def shell_blocks(text):
    """The text of every ```sh block."""
    return re.findall(r"^[ \t]*```sh[ \t]*\n(.*?)^[ \t]*```", text, re.M | re.S)


def _substitutions(line):
    """(line with each $(...) and `...` replaced by a word, [their inner commands])."""
    inner, out, i = [], [], 0
    quote = None
    while i < len(line):
        c = line[i]
        if quote != '"' and c == "'":
            quote = None if quote == "'" else "'"
        elif quote != "'" and c == '"':
            quote = None if quote == '"' else '"'
        elif quote != "'" and line.startswith("$(", i):
            depth, j = 1, i + 2
            while j < len(line) and depth:
                depth += {"(": 1, ")": -1}.get(line[j], 0)
                j += 1
            inner.append(line[i + 2:j - 1])
            out.append("SUBSTITUTION")
            i = j
            continue
        elif quote != "'" and c == "`":
            j = line.index("`", i + 1)
            inner.append(line[i + 1:j])
            out.append("SUBSTITUTION")
            i = j + 1
            continue
        out.append(c)
        i += 1
    return "".join(out), inner


def programs(command_text):
    """The programs a shell text calls, in order: each command of a pipe or list (| || && ;),
    in $(...) and backticks too, past VAR=value assignments, redirections and the wrappers
    sudo and env; comments and the runbook's `...` placeholders left out."""
    text = command_text.replace("\\\n", " ")
    found = []
    for line in text.splitlines():
        line, inner = _substitutions(line)
        for sub in inner:
            found += programs(sub)
        lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|()<>")
        lexer.whitespace_split = True
        lexer.commenters = "#"
        expect_program, skip_next, wrapper = True, False, None
        for token in lexer:
            if token in _SEPARATORS:
                expect_program, wrapper = True, None
                continue
            if skip_next:
                skip_next = False
                continue
            if token in _REDIRECTIONS or re.fullmatch(r"\d?[<>]+&?", token):
                skip_next = not token.endswith("&")
                continue
            if not expect_program:
                continue
            if _ASSIGNMENT.match(token):
                continue
            if wrapper is not None and token.startswith("-"):
                skip_next = token in WRAPPERS[wrapper]
                continue
            if token == "...":
                expect_program = False
                continue
            found.append(token)
            wrapper = token if token in WRAPPERS else None
            expect_program = wrapper is not None
    return found


def _jinja_names(value):
    """(variable names, quoted literals) of a name that starts with a {{ }} expression (the
    rest, a version pin, is left out)."""
    expr = re.match(r"\{\{(.*?)\}\}", value).group(1)
    literals = set(re.findall(r"'([a-z0-9][a-z0-9.+-]*)'", expr))
    return set(re.findall(r"\b(_?[a-z][a-z0-9_]*)\b", re.sub(r"'[^']*'", "", expr))), literals


def _role_vars(role):
    values = {}
    for path in sorted((role / "vars").glob("*.yml")) + [role / "defaults" / "main.yml"]:
        for key, value in (yaml.safe_load(path.read_text()) or {}).items() if path.exists() else ():
            values.setdefault(key, []).append(value)
    return values


def _tasks(items):
    for task in items or ():
        if isinstance(task, dict):
            yield task
            yield from _tasks(task.get("block"))


def _resolve(value, variables, seen=()):
    """The package names a task's `name:` can take, following {{ variables }}."""
    if isinstance(value, list):
        return set().union(*(_resolve(v, variables, seen) for v in value)) if value else set()
    if not isinstance(value, str):
        return set()
    if "{{" not in value:
        return {value}
    if not value.startswith("{{"):
        return set()     # a name made of text and a variable: no tool's package
    names, packages = _jinja_names(value)
    for name in names - set(seen):
        for candidate in variables.get(name, ()):
            packages |= _resolve(candidate, variables, seen + (name,))
    return packages


def role_packages():
    """{package: role} of every package an apt task of a role installs."""
    out = {}
    for role in sorted(p for p in ROLES.iterdir() if (p / "tasks").is_dir()):
        variables = _role_vars(role)
        for path in sorted((role / "tasks").glob("*.yml")):
            for task in _tasks(yaml.safe_load(path.read_text())):
                apt = task.get("ansible.builtin.apt") or task.get("ansible.builtin.package")
                if not isinstance(apt, dict) or "name" not in apt:
                    continue
                scoped = dict(variables, **{k: [v] for k, v in (task.get("vars") or {}).items()})
                for package in _resolve(apt["name"], scoped):
                    out.setdefault(package, role.name)
    return out


def where_from(program, packages):
    """Why program is on the machine its command runs on, or None."""
    if program in SHELL_BUILTINS:
        return "a shell builtin"
    if program.startswith(VENV_PREFIXES):
        return "the SGLang venv (roles/sglang)"
    if program.startswith("bin/") and (ROOT / program).is_file():
        return "this project's CLI"
    if program in CONTROLLER and re.search(r"^ansible-core==", (ROOT / "requirements.txt").read_text(), re.M):
        return "the controller's ansible-core (requirements.txt)"
    for package, provided in BASE_SYSTEM.items():
        if program in provided:
            return "the base system (%s)" % package
    for package in sorted(PROVIDED_BY.get(program, {program})):
        if package in packages:
            return "package %s (roles/%s)" % (package, packages[package])
    return None


def test_every_program_the_runbook_calls_is_installed_where_it_runs():
    packages = role_packages()
    blocks = shell_blocks(RUNBOOK.read_text())
    assert len(blocks) > 30
    missing = {}
    for block in blocks:
        for program in programs(block):
            if where_from(program, packages) is None:
                missing.setdefault(program, block.strip().splitlines()[0])
    assert not missing, "docs/runbook.md calls programs nothing installs: %s" % missing


def test_the_roles_install_the_runbooks_tools():
    packages = role_packages()
    assert packages.get("jq") == "sglang_service"
    assert {"cuda-drivers", "nvidia-open"} <= set(packages)        # through the task's vars
    assert "prometheus-node-exporter" in packages and "python3-venv" in packages


@pytest.mark.parametrize("text, expected", [
    ("systemctl status x --no-pager | grep -E 'a|b' | tail -20", ["systemctl", "grep", "tail"]),
    ("rm /run/x.conf && systemctl daemon-reload; jq -c . f || true", ["rm", "systemctl", "jq", "true"]),
    ('ps -o pid -p "$(ss -ltnpH \'sport = :1\' | grep -oP \'pid=\\K[0-9]+\' | head -1)"', ["ss", "grep", "head", "ps"]),
    ("sudo -u sglang env A='x y' B=1 \\\n  /opt/sglang/venvs/R/bin/python -m m --status", ["sudo", "env", "/opt/sglang/venvs/R/bin/python"]),
    ("printf '[Unit]\\n' \\\n  > /run/f.conf\nsystemctl stop u          # only when", ["printf", "systemctl"]),
    ("NCCL_DEBUG=INFO NCCL_P2P_DISABLE=1 ...   # a start", []),
    ("sudo kill -TERM <PID>...; sleep 10; sudo dmesg -T | grep x", ["sudo", "kill", "sleep", "sudo", "dmesg", "grep"]),
    ("# in the inventory\n#   sglang_service_x: 1\nansible-playbook -i inv site.yml", ["ansible-playbook"]),
    ("echo `uname -r` 2>&1 > out", ["uname", "echo"]),
])
def test_the_programs_of_a_command_line(text, expected):
    assert programs(text) == expected


def test_a_program_nothing_installs_is_found():
    packages = role_packages()
    assert where_from("socat", packages) is None
    assert where_from("iostat", dict(packages, sysstat="x")) == "package sysstat (roles/x)"
    assert where_from("iostat", {k: v for k, v in packages.items() if k != "sysstat"}) is None
