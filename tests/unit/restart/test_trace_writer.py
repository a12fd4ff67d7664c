import json

import pytest

from ansible_collections.sglang_ops.serving.plugins.module_utils.records.trace_format import (
    TraceWriter, read_trace, relative_observation, trace_header)


def _probe_obs(ts):
    return {"ts": ts, "unit": {"active": "active", "sub": "running", "main_pid": 10, "restarts": 0},
            "log": [{"ts": ts - 0.5, "msg": "[2026-11-29 21:00:00 TP0] Load weight begin. avail mem=95 GB"},
                    {"ts": ts - 0.2, "msg": "server_args=ServerArgs(api_key='sk-secret-value-123', port=30001)"}],
            "http": {"health": None, "completion": None}}


def test_epoch_ts_becomes_seconds_since_watch_start_in_observation_and_log():
    obs = relative_observation(_probe_obs(1000.0), t0=990.0)
    assert obs["t"] == 10.0 and "ts" not in obs
    assert [r["t"] for r in obs["log"]] == [9.5, 9.8]
    assert all("ts" not in r for r in obs["log"])
    assert list(obs)[0] == "t"


def test_api_key_in_a_log_line_never_reaches_the_trace():
    obs = relative_observation(_probe_obs(1000.0), t0=990.0)
    assert "sk-secret-value-123" not in json.dumps(obs)


def test_observation_without_time_is_rejected():
    with pytest.raises(ValueError):
        relative_observation({"unit": {}}, t0=0)


def test_trace_round_trip_keeps_header_and_every_observation(tmp_path):
    path = tmp_path / "attempt-1" / "trace.jsonl"
    header = trace_header("demo-attempt-1", "sglang-k26-ddtree", 5, 8, "restart")
    observations = [relative_observation(_probe_obs(1000.0 + 5 * i), t0=1000.0) for i in range(4)]
    with TraceWriter(str(path), header) as writer:
        for obs in observations:
            writer.append(obs)
    got_header, got = read_trace(str(path))
    assert got_header == header
    assert "expect" not in got_header
    assert got == observations
    assert [o["t"] for o in got] == [0.0, 5.0, 10.0, 15.0]


def test_each_observation_is_on_disk_before_the_next_poll(tmp_path):
    path = tmp_path / "trace.jsonl"
    writer = TraceWriter(str(path), trace_header("x", "u", 5, 1))
    writer.append({"t": 0.0})
    assert len(path.read_text().splitlines()) == 2
    writer.close()


def test_read_trace_names_the_bad_line(tmp_path):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps(trace_header("x", "u", 5, 1)) + "\n{not json\n")
    with pytest.raises(ValueError, match=":2:"):
        read_trace(str(path))
