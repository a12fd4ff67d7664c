"""Entry point: builds the argparse tree from the subcommand modules and runs one.

To add a subcommand, write sglang_ops_cli/commands/<name>.py (HELP, add_arguments,
run) and add its name to SUBCOMMANDS.
"""
import argparse
import importlib
import sys

SUBCOMMANDS = ("replay", "report", "restart", "status")


def load(name):
    return importlib.import_module("sglang_ops_cli.commands.%s" % name)


def build_parser(names=SUBCOMMANDS):
    parser = argparse.ArgumentParser(prog="sglang-ops", description="Deploy, restart and watch SGLang services.")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in names:
        module = load(name)
        p = sub.add_parser(name, help=module.HELP, description=module.HELP)
        module.add_arguments(p)
        p.set_defaults(run=module.run)
    return parser


def main(argv=None):
    args = build_parser().parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
