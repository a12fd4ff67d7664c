"""`bin/sglang-ops restart [-i INVENTORY] [--limit HOST] [-e k=v]`: run playbooks/restart.yml
through ansible-runner, streaming the live progress lines; exit 0 when every host came up
ready, 1 when one gave up (its incident report path is in the output), 2 usage, 4 unreachable."""
import argparse
import os

from sglang_ops_cli import playbook_command
from sglang_ops_cli.playbook_run import ROOT

NAME = "restart"
HELP = "restart the service with live progress (playbooks/restart.yml)"
PLAYBOOK = os.path.join(ROOT, "playbooks", "restart.yml")


def add_arguments(parser):
    playbook_command.add_arguments(parser)
    parser.epilog = playbook_command.EXIT_CODES_EPILOG
    parser.formatter_class = argparse.RawDescriptionHelpFormatter


def run(args):
    return playbook_command.run(args, PLAYBOOK, need_ready_verdict=False)


def register(subparsers):
    parser = subparsers.add_parser(NAME, help=HELP, description=HELP)
    add_arguments(parser)
    parser.set_defaults(func=run)
    return parser


def main(argv=None):
    parser = argparse.ArgumentParser(prog="sglang-ops " + NAME, description=HELP)
    add_arguments(parser)
    return run(parser.parse_args(argv))
