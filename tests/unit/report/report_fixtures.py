"""Shared pieces for the incident report tests: paths, the runbook, small traces built in code."""
import functools
import json
import os


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__)))))
CORPUS_TRACES = os.path.join(ROOT, "tests", "traces", "corpus")
RUNBOOK = os.path.join(ROOT, "docs", "runbook.md")


def corpus_trace_paths():
    names = sorted(n for n in os.listdir(CORPUS_TRACES) if n.endswith(".jsonl"))
    assert names, "no traces in %s" % CORPUS_TRACES
    return [os.path.join(CORPUS_TRACES, n) for n in names]


@functools.lru_cache(maxsize=None)
def runbook_sections():
    from ansible_collections.sglang_ops.serving.plugins.plugin_utils.report.runbook import load_runbook
    return load_runbook(RUNBOOK)


def gpu(mem_mib, util_pct, index=0):
    return {"index": index, "mem_used_mib": mem_mib, "mem_total_mib": 97887, "util_pct": util_pct}


def obs(t, log=(), mem_mib=600, util_pct=0, cpu_s=0.0, read_bytes=0, active="active", main_pid=100, gpus=2):
    """One observation in trace format; `log` is a list of (t, msg)."""
    return {
        "t": float(t),
        "unit": {"active": active, "sub": "running" if active == "active" else "dead",
                 "main_pid": main_pid, "restarts": 0},
        "procs": {"count": 3, "cpu_s": cpu_s, "read_bytes": read_bytes, "write_bytes": 0, "comm": {"python3": 3}},
        "gpus": [gpu(mem_mib, util_pct, i) for i in range(gpus)],
        "log": [{"t": float(lt), "msg": m} for lt, m in log],
        "http": {"health": None, "completion": None},
    }


def assessment(t, phase, verdict, code, reason="", evidence=None):
    return {"t": float(t), "phase": phase, "verdict": verdict, "reason_code": code, "reason": reason,
            "evidence": evidence or {}, "progress": {}, "want_stacks": False,
            "final": verdict in ("ready", "stalled", "failed")}


def write_trace(path, header, observations, assessments=None):
    """A trace file; with `assessments`, each line carries the watcher's own assessment."""
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(json.dumps(header) + "\n")
        for i, o in enumerate(observations):
            line = dict(o)
            if assessments is not None:
                line["assessment"] = assessments[i]
            fh.write(json.dumps(line) + "\n")
    return path


HEADER = {"format": "sglang-trace/1", "name": "unit_test", "unit": "sglang-k26-ddtree", "poll_s": 10.0,
          "gpus": 2, "description": "built in the test"}


def packing_failure():
    """A short start: load, a silent busy plateau, a packing error on TP1 at t=83."""
    observations = [
        obs(0, log=[(0, "[2026-05-30 20:27:00 TP0] Load weight begin. avail mem=94.52 GB"),
                    (0, "[2026-05-30 20:27:00 TP1] Load weight begin. avail mem=94.52 GB")]),
        obs(10, mem_mib=20000, cpu_s=10, read_bytes=10_000_000),
        obs(20, log=[(19.5, "\rLoading safetensors checkpoint shards:  50% Completed | 1/2 [00:01<00:01]"
                            "\rLoading safetensors checkpoint shards: 100% Completed | 2/2 [00:02<00:00]")],
            mem_mib=40000, cpu_s=20, read_bytes=30_000_000),
        obs(30, mem_mib=40000, cpu_s=30, read_bytes=30_000_000),
        obs(40, mem_mib=40000, cpu_s=40, read_bytes=30_000_000),
        obs(90, log=[(83, "[2026-05-30 20:28:23 TP1] Unexpected error during packing of layer 3: RuntimeError: boom"),
                     (83, "[2026-05-30 20:28:23 TP1] Traceback (most recent call last):")],
            mem_mib=40000, util_pct=100, cpu_s=90, read_bytes=30_000_000),
    ]
    assessments = [
        assessment(0, "weight_load", "progressing", "progressing"),
        assessment(10, "weight_load", "progressing", "progressing"),
        assessment(20, "post_load", "progressing", "progressing"),
        assessment(30, "post_load", "quiet", "quiet", "nothing moved for 10s; CPU busy"),
        assessment(40, "post_load", "quiet", "quiet", "nothing moved for 20s; CPU busy"),
        assessment(90, "post_load", "failed", "fatal_packing", "error while repacking weights",
                   {"moved": ["log"], "last_moved": {"log": 90.0, "gpu_mem": 20.0},
                    "fatal_lines": ["[2026-05-30 20:28:23 TP1] Unexpected error during packing of layer 3: RuntimeError: boom"]}),
    ]
    return observations, assessments
