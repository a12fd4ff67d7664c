"""`bin/sglang-ops status [-i INVENTORY] [--limit HOST] [-e k=v]`: run the read-only
playbooks/status.yml (one observation and the detector's assessment per host); exit 0
when every host is ready, 3 when a reachable host is not, 1 on a failed task, 2 usage,
4 unreachable."""
import argparse
import os

from sglang_ops_cli import playbook_command
from sglang_ops_cli.playbook_run import ROOT

NAME = "status"
HELP = "show each host's service state and the detector's assessment (playbooks/status.yml)"
PLAYBOOK = os.path.join(ROOT, "playbooks", "status.yml")


def add_arguments(parser):
    playbook_command.add_arguments(parser)
    parser.epilog = playbook_command.EXIT_CODES_EPILOG
    parser.formatter_class = argparse.RawDescriptionHelpFormatter


def run(args):
    return playbook_command.run(args, PLAYBOOK, need_ready_verdict=True)


def register(subparsers):
    parser = subparsers.add_parser(NAME, help=HELP, description=HELP)
    add_arguments(parser)
    parser.set_defaults(func=run)
    return parser


def main(argv=None):
    parser = argparse.ArgumentParser(prog="sglang-ops " + NAME, description=HELP)
    add_arguments(parser)
    return run(parser.parse_args(argv))
