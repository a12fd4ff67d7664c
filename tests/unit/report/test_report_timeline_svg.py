"""The chart: valid SVG with every series, phase bands and the verdict marked."""
import xml.etree.ElementTree as ET

from ansible_collections.sglang_ops.serving.plugins.plugin_utils.report.incident_model import build_incident
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.report.timeline_svg import chart_end_t, render_svg

from ansible_collections.sglang_ops.serving.tests.unit.report.report_fixtures import HEADER, packing_failure

NS = {"svg": "http://www.w3.org/2000/svg"}
SERIES = ("gpu_mem_gib_mean", "gpu_mem_gib_max", "gpu_util_pct_mean", "shards_done", "disk_read_mb_s", "cpu_cores")


def _chart():
    observations, assessments = packing_failure()
    inc = build_incident(HEADER, observations, assessments)
    return inc, ET.fromstring(render_svg(inc).encode("utf-8"))


def test_chart_is_svg_with_every_series_drawn():
    dummy_inc, root = _chart()
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    for key in SERIES:
        group = root.find(".//svg:g[@id='series-%s']" % key, NS)
        assert group is not None, key
        assert group.findall("svg:polyline", NS) or group.findall("svg:circle", NS), key


def test_verdict_marker_sits_at_the_decision_time():
    inc, root = _chart()
    marker = root.find(".//svg:g[@id='verdict-marker']", NS)
    assert marker.get("data-verdict") == "failed"
    assert float(marker.get("data-t")) == inc.decided_t
    assert "fatal_packing" in marker.find("svg:text", NS).text
    assert root.find(".//svg:g[@id='onset-marker']", NS) is not None


def test_phase_bands_follow_the_phases():
    inc, root = _chart()
    bands = [r.get("data-phase") for r in root.findall(".//svg:g[@id='phase-bands']/svg:rect", NS)]
    assert bands == [p.phase for p in inc.phases] == ["weight_load", "post_load"]


def test_a_long_tail_after_the_decision_is_cut_from_the_axis():
    inc, dummy_root = _chart()
    inc.last_t = 5000.0
    assert chart_end_t(inc) == inc.decided_t + 120.0
