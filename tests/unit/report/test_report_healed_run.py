"""A run that healed itself tells its story: attempt 1 stalled in weight_load, systemd
restarted it, attempt 2 came up ready (what `make demo` does). The headline names both,
the chart and the timeline show both attempts (the failed one first), and the evidence is
what held when attempt 2 was called ready."""
import json
import re

import pytest

from ansible_collections.sglang_ops.serving.plugins.plugin_utils.report.incident_report import write_incident_report
from ansible_collections.sglang_ops.serving.tests.unit.report.report_fixtures import HEADER, assessment, obs, write_trace

STARTED_1, STARTED_2 = 1796000000.0, 1796000200.0   # attempt 2's watch began 200 s after attempt 1's


def _stalled_attempt():
    observations = [obs(t, read_bytes=int(t) * 10**8, log=[(t, "Loading safetensors checkpoint shards: %d%%" % t)])
                    for t in (0, 10, 20)] + [obs(t, read_bytes=2 * 10**9) for t in (30, 60, 90, 120)]
    assessments = [assessment(t, "weight_load", "progressing", "loading") for t in (0, 10, 20, 30, 60, 90)]
    assessments.append(assessment(120, "weight_load", "stalled", "stall_idle",
                                  "nothing moved for 1m30s; CPU, GPUs and disk all idle"))
    return observations, assessments


def _ready_attempt():
    observations = [obs(t) for t in (0, 10, 20)]
    for o in observations:
        o["unit"].pop("restarts")                      # the supervisor's unit view has none
    observations[1]["http"] = {"health": 503, "completion": None}
    observations[2]["http"] = {"health": 200, "completion": {"ok": True, "status": 200, "ms": 41.0}}
    assessments = [assessment(0, "weight_load", "progressing", "loading"),
                   assessment(10, "http_server", "progressing", "warming up"),
                   assessment(20, "ready", "ready", "ready", "one-token completion answered")]
    return observations, assessments


@pytest.fixture
def healed(tmp_path):
    run = tmp_path / "artifacts" / "sglang-demo" / "20261130T000000Z"
    for n, (observations, assessments) in ((1, _stalled_attempt()), (2, _ready_attempt())):
        (run / ("attempt-%d" % n)).mkdir(parents=True)
        write_trace(str(run / ("attempt-%d" % n) / "trace.jsonl"), HEADER, observations, assessments)
    attempts = [
        {"n": 1, "trace": "attempt-1/trace.jsonl", "verdict": "stalled", "phase": "weight_load",
         "reason_code": "stall_idle", "reason": "nothing moved for 1m30s", "t": 120.0,
         "action": "restarted by systemd", "started_epoch_s": STARTED_1},
        # run.json rounds the time to ready a little before the observation that decided it
        {"n": 2, "trace": "attempt-2/trace.jsonl", "verdict": "ready", "phase": "ready", "reason_code": "ready",
         "reason": "one-token completion answered", "t": 14.0, "action": "ready", "started_epoch_s": STARTED_2}]
    (run / "run.json").write_text(json.dumps({
        "host": "sglang-demo", "unit": "sglang-k26-ddtree", "started": "2026-11-30T00:00:00Z",
        "outcome": "ready", "attempts": attempts}))
    paths = write_incident_report(str(run))
    with open(paths["markdown"], encoding="utf-8") as fh:
        md = fh.read()
    with open(paths["chart"], encoding="utf-8") as fh:
        svg = fh.read()
    with open(paths["json"], encoding="utf-8") as fh:
        data = json.load(fh)
    return md, svg, data


def test_the_headline_names_what_stalled_and_what_healed_it(healed):
    md, dummy_svg, dummy_data = healed
    first = md.splitlines()[2]
    assert first == ("1. Healed: attempt 1 stalled in weight_load (`stall_idle`), systemd restarted it; "
                     "attempt 2 came up ready.")
    assert "Nothing failed" not in md


def test_the_timeline_shows_every_attempt_the_failed_one_first(healed):
    md, dummy_svg, data = healed
    events = md.split("### Events and journal lines", 1)[1]
    began_1, stalled_1 = events.index("attempt 1 began"), events.index("attempt 1: decision: stalled")
    began_2, ready_2 = events.index("attempt 2 began (systemd restarted it)"), events.index("attempt 2: decision: ready")
    assert began_1 < stalled_1 < began_2 < ready_2
    assert [(p["attempt"], p["phase"]) for p in data["phases"]] == [
        (1, "weight_load"), (2, "weight_load"), (2, "http_server"), (2, "ready")]
    assert data["phases"][1]["start_t"] == 200.0     # attempt 2 on the run's axis, where its watch began


def test_the_chart_draws_both_attempts_on_one_axis(healed):
    dummy_md, svg, dummy_data = healed
    marker = re.search(r'class="attempt-marker" data-attempt="1" data-verdict="stalled"', svg)
    assert marker, "attempt 1's stall is not drawn"
    assert re.search(r'id="verdict-marker" data-verdict="ready" data-t="214\.0"', svg)
    assert "time since attempt 1 began" in svg
    assert svg.count('class="phase" data-phase="weight_load"') == 2


def test_the_evidence_is_what_held_at_the_decision_with_nothing_unknown_shown_as_none(healed):
    md, dummy_svg, data = healed
    evidence = data["evidence"]
    assert "HTTP /health: 200" in evidence and "HTTP /health: 503" not in evidence
    assert "One-token completion answered in 41 ms" in evidence
    assert "Unit: active/running, main PID 100" in evidence
    assert not [e for e in evidence if "None" in e]
    assert "None" not in md.split("## Evidence", 1)[1].split("##", 1)[0]
