"""Secrets never reach a report: redaction of log lines, diagnostics and the trace copy."""
import json
import os

import pytest

from ansible_collections.sglang_ops.serving.plugins.module_utils.records.redaction import REDACTED, redact, redact_tree
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.report.incident_report import (
    write_incident_report, write_trace_report)

from ansible_collections.sglang_ops.serving.tests.unit.report.report_fixtures import HEADER, packing_failure, write_trace

SECRET = "sk-live-4f9a8b7c6d5e4f3a2b1c"


@pytest.mark.parametrize("line", [
    "python -m sglang.launch_server --api-key %s --port 30001" % SECRET,
    "python -m sglang.launch_server --api-key=%s" % SECRET,
    "server_args=ServerArgs(model_path='/m', api_key='%s', port=30001)" % SECRET,
    'server_args={"api_key": "%s", "port": 30001}' % SECRET,
    "curl -H 'Authorization: Bearer %s' http://127.0.0.1:30001/v1/models" % SECRET,
    "SGLANG_API_KEY=%s" % SECRET,
    "HF_TOKEN=%s" % SECRET,
    "key is %s" % SECRET,
])
def test_api_keys_and_bearer_tokens_are_replaced(line):
    out = redact(line)
    assert SECRET not in out
    assert REDACTED in out


def test_ordinary_log_lines_are_left_alone():
    for line in ("KV Cache is allocated. #tokens: 1048576, KV size: 40.2 GB",
                 "max_total_num_tokens=1048576, chunked_prefill_size=8192, context_len=262144",
                 "Load weight begin. avail mem=94.52 GB",
                 "Prefill batch. #new-seq: 1, #new-token: 12, #cached-token: 0, token usage: 0.00"):
        assert redact(line) == line


def test_redact_tree_reaches_nested_strings_and_keeps_numbers():
    tree = {"log": [{"t": 1.0, "msg": "--api-key %s" % SECRET}], "n": 3}
    out = redact_tree(tree)
    assert SECRET not in json.dumps(out)
    assert out["n"] == 3 and out["log"][0]["t"] == 1.0


def _with_secret(observations):
    observations[0]["log"].append({"t": 0.0, "msg": "server_args=ServerArgs(model_path='/m', api_key='%s')" % SECRET})
    observations[-1]["log"].append({"t": 83.0, "msg": "[2026-05-30 20:28:23 TP0] Authorization: Bearer %s" % SECRET})
    return observations


def test_trace_report_and_its_trace_copy_carry_no_secret(tmp_path):
    observations, assessments = packing_failure()
    trace = write_trace(str(tmp_path / "in.jsonl"), HEADER, _with_secret(observations), assessments)
    paths = write_trace_report(trace, str(tmp_path / "out"))
    for kind in ("markdown", "json", "chart", "trace"):
        with open(paths[kind], encoding="utf-8") as fh:
            text = fh.read()
        assert SECRET not in text, kind
    with open(paths["markdown"], encoding="utf-8") as fh:
        assert REDACTED in fh.read()


def test_run_report_redacts_diagnostics_and_run_json_text(tmp_path):
    observations, assessments = packing_failure()
    run_dir = tmp_path / "run"
    (run_dir / "attempt-1" / "diagnostics").mkdir(parents=True)
    write_trace(str(run_dir / "attempt-1" / "trace.jsonl"), HEADER, _with_secret(observations), assessments)
    (run_dir / "attempt-1" / "diagnostics" / "journal.txt").write_text(
        "ExecStart=python -m sglang.launch_server --api-key %s\n" % SECRET)
    run = {"host": "h1", "unit": "sglang-k26-ddtree", "outcome": "gave_up",
           "gave_up_because": "token=%s" % SECRET,
           "attempts": [{"n": 1, "trace": "attempt-1/trace.jsonl", "verdict": "failed", "phase": "post_load",
                         "reason_code": "fatal_packing", "reason": "Bearer %s" % SECRET, "t": 90.0,
                         "action": "handed_over", "diagnostics": "attempt-1/diagnostics"}]}
    (run_dir / "run.json").write_text(json.dumps(run))
    paths = write_incident_report(str(run_dir))
    for kind in ("markdown", "json", "chart"):
        with open(paths[kind], encoding="utf-8") as fh:
            assert SECRET not in fh.read(), kind
    assert os.path.exists(paths["markdown"])


HOSTILE_KEY = "hk-\"q\" 'single' $HOME \\ `id` %n #x: y ;z"


@pytest.mark.parametrize("line", [
    "server_args=%r" % {"model_path": "/m", "api_key": HOSTILE_KEY, "port": 30001},
    "server_args=ServerArgs(model_path='/m', api_key=%r, port=30001)" % HOSTILE_KEY,
    "server_args=%s" % json.dumps({"api_key": HOSTILE_KEY, "port": 30001}),
    "python -m sglang.launch_server --api-key %s --port 30001" % HOSTILE_KEY,
    "python -m sglang.launch_server --api-key=%s" % HOSTILE_KEY,
    "Authorization: Bearer %s" % HOSTILE_KEY,
    "SGLANG_API_KEY=%s" % HOSTILE_KEY,
])
def test_a_key_with_quotes_escapes_and_spaces_is_hidden_whole(line):
    out = redact(line)
    assert REDACTED in out
    for piece in ("single", "$HOME", "`id`", "%n", "#x", ";z"):
        assert piece not in out, (piece, out)


def test_what_follows_a_quoted_key_is_kept():
    out = redact("server_args=%r" % {"api_key": HOSTILE_KEY, "port": 30001})
    assert out.endswith("'port': 30001}")
