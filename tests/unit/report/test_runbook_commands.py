"""Every controller command of docs/runbook.md runs as written: it names the production
inventory, its options parse (`--help` of each subcommand, the CLI's own parser), each
playbook passes `ansible-playbook --syntax-check`, and its hosts resolve in
inventories/production (`--list-hosts`)."""
import os
import re
import shlex
import subprocess
import sys

import pytest

from sglang_ops_cli import cli

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
RUNBOOK = os.path.join(ROOT, "docs", "runbook.md")
BIN = os.path.join(ROOT, "bin")
VENV_BIN = os.path.dirname(sys.executable)
PRODUCTION = "inventories/production"
# The runbook's placeholders, as the production inventory spells them.
PLACEHOLDERS = {"HOST": "gpu-k26-01", "GROUP": "sglang", "N": "1", "STAMP": "20261130T031208Z",
                "LB": "localhost"}   # the load balancer's socket on the controller (sglang_lb.host's default)
CONTROLLER_TOOLS = ("bin/sglang-ops", "ansible-playbook", "ansible ")
PLAYBOOK_OF = {"restart": "playbooks/restart.yml", "status": "playbooks/status.yml"}


def runbook_commands():
    """Each controller command of the runbook: inline code spans and lines of shell blocks
    that start with a controller tool (`text` blocks are synopses, not commands)."""
    with open(RUNBOOK, encoding="utf-8") as fh:
        text = fh.read()
    found = []
    for block in re.findall(r"```sh\n(.*?)```", text, re.S):
        found += [line.split("  #")[0].strip() for line in block.splitlines()]
    prose = re.sub(r"```.*?```", "", text, flags=re.S)
    found += re.findall(r"`([^`\n]+)`", prose)
    commands = []
    for cmd in found:
        # a bare tool name in prose is a mention, not a command
        if cmd.startswith(CONTROLLER_TOOLS) and len(cmd.split()) > 1 and cmd not in commands:
            commands.append(cmd)
    return commands


def _argv(cmd):
    words = shlex.split(cmd)
    return [re.sub(r"(?<![\w-])(%s)(?![\w-])" % "|".join(PLACEHOLDERS), lambda m: PLACEHOLDERS[m.group(1)], w)
            for w in words]


def _run(argv):
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(ROOT, "ansible.cfg"), ANSIBLE_NOCOLOR="1",
               PATH=VENV_BIN + os.pathsep + os.environ.get("PATH", ""))
    return subprocess.run(argv, capture_output=True, text=True, cwd=ROOT, env=env, timeout=120)


def _ansible_playbook_checks(argv):
    for extra in (["--syntax-check"], ["--list-hosts"]):
        p = _run([os.path.join(VENV_BIN, "ansible-playbook")] + argv[1:] + extra)
        assert p.returncode == 0, "%s %s: %s%s" % (" ".join(argv), extra[0], p.stdout[-800:], p.stderr[-800:])
        if extra == ["--list-hosts"] and not any("!" in a for a in argv):   # an exclusion may leave none
            assert "hosts (0)" not in p.stdout, "%s selects no host: %s" % (" ".join(argv), p.stdout)


def test_the_runbook_has_controller_commands_to_check():
    commands = runbook_commands()
    assert sum(c.startswith("bin/sglang-ops restart") for c in commands) >= 3
    assert any(c.startswith("ansible-playbook") for c in commands)


@pytest.mark.parametrize("cmd", runbook_commands())
def test_each_runbook_command_runs_as_written(cmd):
    argv = _argv(cmd)
    if argv[0] == "bin/sglang-ops":
        args = cli.build_parser().parse_args(argv[1:])   # exits 2 on an option the command lacks
        if args.command in PLAYBOOK_OF:
            assert args.inventory == PRODUCTION, "%r runs against %s" % (cmd, args.inventory)
            limit = args.limit or getattr(args, "host", None)
            _ansible_playbook_checks(["ansible-playbook", "-i", PRODUCTION, PLAYBOOK_OF[args.command]]
                                     + (["--limit", limit] if limit else []))
        return
    assert argv[1:3] == ["-i", PRODUCTION], "%r does not name the production inventory first" % cmd
    if argv[0] == "ansible":
        p = _run([os.path.join(VENV_BIN, "ansible")] + argv[1:4] + ["--list-hosts"])
        assert p.returncode == 0 and "hosts (0)" not in p.stdout, p.stdout + p.stderr
        return
    _ansible_playbook_checks(argv)


@pytest.mark.parametrize("sub", cli.SUBCOMMANDS)
def test_every_subcommand_the_runbook_names_answers_help(sub):
    p = subprocess.run([sys.executable, os.path.join(BIN, "sglang-ops"), sub, "--help"],
                       capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert p.returncode == 0 and "usage: sglang-ops %s" % sub in p.stdout, p.stderr
