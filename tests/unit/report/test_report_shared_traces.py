"""Reports rendered from every trace of the labelled corpus (tests/traces/corpus), replayed through the real detector,
with their content checked against the detector's decision and the runbook."""
import json
import os
import xml.etree.ElementTree as ET

import pytest

from ansible_collections.sglang_ops.serving.plugins.plugin_utils.report.incident_model import fmt_t
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.report.incident_report import write_trace_report
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.shared.replay import assessments, settings_or_defaults
from ansible_collections.sglang_ops.serving.plugins.module_utils.records.trace_format import read_trace

from ansible_collections.sglang_ops.serving.tests.unit.report.report_fixtures import corpus_trace_paths, runbook_sections

TRACES = corpus_trace_paths()


def _decision(path):
    header, observations = read_trace(path)
    for a in assessments(observations, settings_or_defaults(None)):
        if a["final"]:
            return header, a
    return header, None


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    out = {}
    for path in TRACES:
        name = os.path.basename(path)[:-len(".jsonl")]
        paths = write_trace_report(path, str(tmp_path_factory.mktemp(name)))
        with open(paths["markdown"], encoding="utf-8") as fh:
            md = fh.read()
        with open(paths["json"], encoding="utf-8") as fh:
            data = json.load(fh)
        out[path] = (paths, md, data)
    return out


@pytest.mark.parametrize("path", TRACES, ids=os.path.basename)
def test_report_tells_the_detectors_verdict_phase_and_time(path, reports):
    _, md, data = reports[path]
    _, decision = _decision(path)
    assert decision is not None, "the detector reached no verdict on %s" % path
    assert (data["verdict"], data["phase"], data["reason_code"]) == (
        decision["verdict"], decision["phase"], decision["reason_code"])
    assert data["decided_t"] == decision["t"]
    lines = md.splitlines()
    assert lines[0].startswith("# ")
    assert [ln[:3] for ln in lines[2:7]] == ["1. ", "2. ", "3. ", "4. ", "5. "]
    assert "Phase: %s" % decision["phase"] in lines[3]
    assert fmt_t(decision["t"]) in lines[4]


@pytest.mark.parametrize("path", TRACES, ids=os.path.basename)
def test_failure_reports_quote_the_runbook_section_of_their_class(path, reports):
    _, md, data = reports[path]
    if data["verdict"] not in ("failed", "stalled"):
        assert "Nothing: the service came up" in md
        return
    section = runbook_sections()[data["reason_code"]]
    next_steps = md.split("## What to do next", 1)[1].split("\n## ", 1)[0]
    for part in ("Confirm", "Next steps", "Escalate"):
        first_line = section.part(part).splitlines()[0]
        # the report rewrites the runbook's own #anchors to point at docs/runbook.md
        assert first_line.split("](#")[0] in next_steps, (part, first_line)
    assert "runbook.md#%s" % data["reason_code"] in next_steps
    assert data["evidence"], "a failure report needs evidence"
    assert data["onset_t"] is not None and data["onset_t"] <= data["decided_t"]


@pytest.mark.parametrize("path", TRACES, ids=os.path.basename)
def test_every_report_has_its_chart_and_trace_beside_it(path, reports):
    paths, md, data = reports[path]
    root = ET.parse(paths["chart"]).getroot()
    assert root.tag.endswith("svg")
    assert root.find(".//{http://www.w3.org/2000/svg}g[@id='verdict-marker']").get("data-verdict") == data["verdict"]
    assert "(timeline.svg)" in md and "(trace.jsonl)" in md
    header, observations = read_trace(paths["trace"])
    assert len(observations) == len(read_trace(path)[1])


def test_seed_packing_error_report_tells_what_happened_and_what_to_do(reports):
    """The acceptance case: someone who never saw the incident reads the opening lines."""
    path = [p for p in TRACES if p.endswith("seed_packing_error.jsonl")][0]
    _, md, data = reports[path]
    header = read_trace(path)[0]
    summary = md.splitlines()[2:7]
    assert header["expect"]["outcome"] == data["verdict"] == "failed"
    assert header["expect"]["phase"] == data["phase"] == "post_load"
    assert data["onset_t"] == header["expect"]["onset_t"] == 583.0
    assert "error while repacking weights" in summary[0]
    assert "t+9m43s" in summary[2]
    assert "Unexpected error during packing" in summary[3] and "TP1, TP4" in summary[3]
    assert "tries a restart" in summary[4]
    assert "Loading safetensors checkpoint shards: 100%" in md and "blob data" in md
    assert runbook_sections()["fatal_packing"].part("Next steps").splitlines()[0] in md
