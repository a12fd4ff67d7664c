"""Small labelled traces built in code for the scoring tools' tests."""


def header(outcome="stalled", onset_t=100.0, poll_s=10.0, phase="weight_load", name="t"):
    expect = {"outcome": outcome, "phase": phase}
    if onset_t is not None:
        expect["onset_t"] = onset_t
    return {"format": "sglang-trace/1", "name": name, "unit": "sglang-k26-ddtree", "poll_s": poll_s, "gpus": 2,
            "description": "built in the test", "expect": expect}


def obs(t, log=(), stacks=None, mem_mib=1000, read_bytes=0, active="active", completion_ok=None):
    o = {"t": float(t), "unit": {"active": active, "sub": "running" if active == "active" else "dead",
                                 "main_pid": 100, "restarts": 0},
         "procs": {"count": 3, "cpu_s": float(t), "read_bytes": read_bytes, "write_bytes": 0, "comm": {"python3": 3}},
         "gpus": [{"index": 0, "mem_used_mib": mem_mib, "mem_total_mib": 97887, "util_pct": 0}],
         "gpu_procs": [{"pid": 100, "gpu": 0, "mem_mib": mem_mib}],
         "log": [{"t": float(lt), "msg": m} for lt, m in log],
         "http": {"health": None, "completion": None if completion_ok is None else
                  {"ok": completion_ok, "status": 200, "ms": 5.0}}}
    if stacks is not None:
        o["stacks"] = stacks
    return o


def verdict(v, t, phase=None):
    return {"verdict": v, "t": t, "phase": phase, "reason": "test"}
