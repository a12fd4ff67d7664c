"""A run beside the weight cache daemon: the report says which start was warm and which
cold, and why (run.json's restart_kind and restart_kind_reason per attempt)."""
import json

from ansible_collections.sglang_ops.serving.plugins.plugin_utils.report.incident_report import write_incident_report
from ansible_collections.sglang_ops.serving.tests.unit.report.report_fixtures import HEADER, assessment, obs, write_trace


def test_the_headline_and_automation_say_warm_then_cold_and_why(tmp_path):
    run = tmp_path / "artifacts" / "sglang-demo" / "20261130T000000Z"
    for n, verdict in ((1, "stalled"), (2, "ready")):
        (run / ("attempt-%d" % n)).mkdir(parents=True)
        final = (assessment(30, "cuda_graph", "stalled", "stall_idle", "nothing moved") if verdict == "stalled"
                 else assessment(30, "ready", "ready", "ready", "one-token completion answered"))
        write_trace(str(run / ("attempt-%d" % n) / "trace.jsonl"), HEADER, [obs(0), obs(30)],
                    [assessment(0, "weight_load", "progressing", "loading"), final])
    attempts = [
        {"n": 1, "trace": "attempt-1/trace.jsonl", "verdict": "stalled", "phase": "cuda_graph",
         "reason_code": "stall_idle", "reason": "nothing moved", "t": 30.0, "action": "restarted cold",
         "restart_kind": "warm", "restart_kind_reason": "daemon_healthy", "started_epoch_s": 1796000000.0},
        {"n": 2, "trace": "attempt-2/trace.jsonl", "verdict": "ready", "phase": "ready", "reason_code": "ready",
         "reason": "answered", "t": 30.0, "action": "ready", "restart_kind": "cold",
         "restart_kind_reason": "warm_start_failed", "started_epoch_s": 1796000200.0}]
    (run / "run.json").write_text(json.dumps({
        "host": "sglang-demo", "unit": "sglang-k26-ddtree", "started": "2026-11-30T00:00:00Z", "outcome": "ready",
        "attempts": attempts, "restart_kind": "cold", "restart_kind_reason": "warm_start_failed"}))
    paths = write_incident_report(str(run))
    with open(paths["markdown"], encoding="utf-8") as fh:
        md = fh.read()
    assert ("Healed: attempt 1 (warm start) stalled in cuda_graph (`stall_idle`), the restart action restarted it "
            "cold, the weight cache daemon too; attempt 2 came up ready.") in md
    assert "attempt 2 (cold: warm_start_failed): ready" in md
    with open(paths["json"], encoding="utf-8") as fh:
        data = json.load(fh)
    assert [(a["restart_kind"], a["restart_kind_reason"]) for a in data["attempts"]] == [
        ("warm", "daemon_healthy"), ("cold", "warm_start_failed")]
