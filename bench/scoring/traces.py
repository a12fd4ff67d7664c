"""Trace files for the scoring tools: found in folders, read and written.

Reading goes through the project's own reader (plugins/module_utils/records/trace_format.py),
so a variant that does not meet the format is refused before it is replayed.
"""
import glob
import json
import os

from ansible_collections.sglang_ops.serving.plugins.module_utils.records.trace_format import TraceFormatError, read_trace

__all__ = ("TraceFormatError", "read_trace", "trace_paths", "write_trace")


def trace_paths(paths):
    """Every *.jsonl file of the folders in `paths` (not their subfolders, sorted), and
    every file named directly; FileNotFoundError for a path that does not exist."""
    out = []
    for path in paths:
        if os.path.isdir(path):
            out += sorted(glob.glob(os.path.join(path, "*.jsonl")))
        elif os.path.isfile(path):
            out.append(path)
        else:
            raise FileNotFoundError("no trace file or folder %s" % path)
    return out


def write_trace(path, header, observations):
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(json.dumps(header) + "\n")
        for obs in observations:
            fh.write(json.dumps(obs) + "\n")
    return path
