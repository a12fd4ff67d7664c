"""Parse server flags with the real SGLang argument parser (run by the venv of ./setup).

Usage: python parse_args.py FLAG... ; prints {"ok": true, "args": {...}} or exits 2 with
argparse's error on stderr, exactly as `python -m sglang.launch_server` would. A
`--config FILE.yaml` is merged in first by SGLang's own ConfigArgumentMerger, as
prepare_server_args does.

       python parse_args.py weight-cache-daemon FLAG... ; the same for
`python -m sglang.srt.weight_cache.daemon`: its own flags (WeightCacheDaemonArgs) split off
first with parse_known_args, the rest parsed as the server's; "daemon_args" holds its own.
The daemon module imports transformers and torchvision, which this CPU venv leaves out, so its
add_cli_args is taken from the real daemon.py source and run on its own.
"""
import argparse
import ast
import json
import sys
from pathlib import Path

import sglang
from sglang.srt.server_args import ServerArgs

DAEMON = "weight-cache-daemon"


def _scalars(namespace):
    return {k: v for k, v in vars(namespace).items() if isinstance(v, (str, int, float, bool, type(None)))}


def daemon_worker_parser():
    """argparse's parser with the flags of the real WeightCacheDaemonArgs.add_cli_args."""
    path = Path(sglang.__file__).parent / "srt" / "weight_cache" / "daemon.py"
    tree = ast.parse(path.read_text(), str(path))
    (cls,) = [node for node in tree.body if isinstance(node, ast.ClassDef) and node.name == "WeightCacheDaemonArgs"]
    (add,) = [node for node in cls.body if isinstance(node, ast.FunctionDef) and node.name == "add_cli_args"]
    add.decorator_list = []
    add.args.args[0].annotation = None
    namespace = {"argparse": argparse}
    exec(compile(ast.Module(body=[add], type_ignores=[]), str(path), "exec"), namespace)  # pylint: disable=exec-used
    parser = argparse.ArgumentParser(add_help=False)
    namespace["add_cli_args"](parser)
    return parser


def main(argv):
    daemon_args = None
    if argv[:1] == [DAEMON]:
        # As daemon.py's __main__: worker_parser.parse_known_args(), the rest to the server's parser.
        known, argv = daemon_worker_parser().parse_known_args(argv[1:])
        daemon_args = _scalars(known)
    parser = argparse.ArgumentParser(prog="sglang serve")
    ServerArgs.add_cli_args(parser)
    if "--config" in argv:
        # As prepare_server_args does: the YAML's options first, the command line after.
        from sglang.srt.utils.server_args_config_parser import ConfigArgumentMerger
        argv = ConfigArgumentMerger(parser).merge_config_with_args(argv)
    namespace = parser.parse_args(argv)
    result = {"ok": True, "args": _scalars(namespace)}
    if daemon_args is not None:
        result["daemon_args"] = daemon_args
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
