"""`sglang serve ...`, the launcher SGLang 0.5.23 recommends, in the SGLang stand-in."""
import argparse
import sys

import sglang
from sglang.standin.server import run


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    if argv and argv[0] == "serve":
        return run(argv[1:], prog="sglang serve")
    parser = argparse.ArgumentParser(prog="sglang", description="SGLang stand-in (test double)")
    parser.add_argument("--version", action="version", version=f"sglang {sglang.__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("serve", help="launch the server (all server flags follow)", add_help=False)
    parser.parse_args(argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
