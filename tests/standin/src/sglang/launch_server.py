"""`python -m sglang.launch_server ...` for the SGLang stand-in (test double)."""
import sys

from sglang.standin.server import run


def main(argv=None):
    return run(sys.argv[1:] if argv is None else argv, prog="launch_server.py")


if __name__ == "__main__":
    sys.exit(main())
