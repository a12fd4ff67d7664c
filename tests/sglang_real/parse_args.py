"""Parse server flags with the real SGLang argument parser (run by the venv of ./setup).

Usage: python parse_args.py FLAG... ; prints {"ok": true, "args": {...}} or exits 2 with
argparse's error on stderr, exactly as `python -m sglang.launch_server` would. A
`--config FILE.yaml` is merged in first by SGLang's own ConfigArgumentMerger, as
prepare_server_args does.
"""
import argparse
import json
import sys

from sglang.srt.server_args import ServerArgs


def main(argv):
    parser = argparse.ArgumentParser(prog="sglang serve")
    ServerArgs.add_cli_args(parser)
    if "--config" in argv:
        # As prepare_server_args does: the YAML's options first, the command line after.
        from sglang.srt.utils.server_args_config_parser import ConfigArgumentMerger
        argv = ConfigArgumentMerger(parser).merge_config_with_args(argv)
    namespace = parser.parse_args(argv)
    print(json.dumps({"ok": True, "args": {k: v for k, v in vars(namespace).items()
                                          if isinstance(v, (str, int, float, bool, type(None)))}}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
