"""The chart as on-call reads it (a run shaped like the demo's healed run: a warm start
stalled in cuda_graph, a cold restart while the weight cache daemon reloads the weights,
a cold start ready): neighbouring phases get colours apart, the panels' legends sit above
their lines, the time between the attempts says what happened, and the warm start's
weight_load is not called a read from disk."""
import itertools
import json
import xml.etree.ElementTree as ET

import pytest

from ansible_collections.sglang_ops.serving.plugins.plugin_utils.report import timeline_svg
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.report.incident_report import write_incident_report
from ansible_collections.sglang_ops.serving.tests.unit.report.report_fixtures import HEADER, assessment, obs, write_trace

SVG = "{http://www.w3.org/2000/svg}"
STARTED_1, STARTED_2 = 1796000000.0, 1796000102.0      # attempt 1 watched 70 s, then 32 s of cold restart


def _attempt(final, phases):
    observations, assessments, t = [], [], 0.0
    for phase, seconds, mem_gib in phases:
        for dummy in range(int(seconds / 2)):
            observations.append(obs(t, mem_mib=mem_gib * 1024, cpu_s=t * 3))
            assessments.append(assessment(t, phase, "progressing", "progressing"))
            t += 2
    observations.append(obs(t, mem_mib=phases[-1][2] * 1024, cpu_s=t * 3))
    assessments.append(assessment(t, *final))
    return observations, assessments, t


@pytest.fixture(scope="module")
def healed_cold(tmp_path_factory):
    run = tmp_path_factory.mktemp("chart") / "artifacts" / "sglang-demo" / "20261130T000000Z"
    phases = [("starting", 4, 1), ("distributed_init", 6, 1), ("weight_load", 4, 30), ("kv_cache", 6, 80),
              ("cuda_graph", 50, 85)]
    first = _attempt(("cuda_graph", "stalled", "stall_idle", "nothing moved for 30s"), phases)
    second = _attempt(("ready", "ready", "ready", "one-token completion answered"),
                      phases[:-1] + [("cuda_graph", 10, 85), ("http_server", 6, 85)])
    for n, (o, a, dummy) in ((1, first), (2, second)):
        (run / ("attempt-%d" % n)).mkdir(parents=True)
        write_trace(str(run / ("attempt-%d" % n) / "trace.jsonl"), HEADER, o, a)
    attempts = [
        {"n": 1, "trace": "attempt-1/trace.jsonl", "verdict": "stalled", "phase": "cuda_graph",
         "reason_code": "stall_idle", "reason": "nothing moved for 30s", "t": first[2], "action": "restarted cold",
         "restart_kind": "warm", "restart_kind_reason": "daemon_healthy", "started_epoch_s": STARTED_1},
        {"n": 2, "trace": "attempt-2/trace.jsonl", "verdict": "ready", "phase": "ready", "reason_code": "ready",
         "reason": "answered", "t": second[2], "action": "ready", "restart_kind": "cold",
         "restart_kind_reason": "warm_start_failed", "started_epoch_s": STARTED_2}]
    # the weight cache daemon's start the cold restart followed, as the restart action keeps it
    daemon = run / "weights-before-attempt-2" / "attempt-1"
    daemon.mkdir(parents=True)
    write_trace(str(daemon / "trace.jsonl"), HEADER,
                [obs(t, mem_mib=(1 + t) * 1024, cpu_s=t * 2, read_bytes=t * 1_500_000_000) for t in range(0, 26, 2)])
    (run / "run.json").write_text(json.dumps({
        "host": "sglang-demo", "unit": "sglang-k26-ddtree", "started": "2026-11-30T00:00:00Z", "outcome": "ready",
        "attempts": attempts, "weight_cache": {"cold_restarts": [
            {"before_attempt": 2, "reason": "warm_start_failed", "outcome": "ready",
             "folder": "weights-before-attempt-2",
             "daemon_starts": [{"n": 1, "verdict": "ready", "phase": "ready", "reason_code": "ready", "t": 24.0}]}]}}))
    paths = write_incident_report(str(run))
    with open(paths["markdown"], encoding="utf-8") as fh:
        md = fh.read()
    return ET.parse(paths["chart"]).getroot(), md, first[2]


def _rgb(colour):
    return tuple(int(colour[i:i + 2], 16) for i in (1, 3, 5))


def test_every_two_phases_have_colours_far_apart():
    for (p1, c1), (p2, c2) in itertools.combinations(timeline_svg.PHASE_COLOURS.items(), 2):
        distance = sum((a - b) ** 2 for a, b in zip(_rgb(c1), _rgb(c2))) ** 0.5
        assert distance >= 40, "%s and %s look alike (%s, %s)" % (p1, p2, c1, c2)


def test_the_legends_sit_above_the_lines_of_their_panel(healed_cold):
    root = healed_cold[0]
    checked = []
    for panel in root.iter(SVG + "g"):
        if panel.get("class") != "panel" or panel.find(".//%spolyline" % SVG) is None:
            continue
        checked.append(panel.get("data-panel"))
        frame = panel.find(SVG + "rect")
        top = float(frame.get("y"))
        legend_bottom = max(float(t.get("y")) for t in panel.findall(SVG + "text") if not t.text[0].isdigit())
        ys = [float(p.split(",")[1]) for line in panel.iter(SVG + "polyline") for p in line.get("points").split()]
        assert legend_bottom <= top + timeline_svg.PANEL_HEADER_PX <= min(ys), panel.get("data-panel")
    assert {"GPU memory (GiB)", "CPU (cores)"} <= set(checked)


def test_the_time_between_the_attempts_shows_the_daemon_reloading_and_no_line_crosses_into_it(healed_cold):
    root, dummy_md, first_t = healed_cold
    bands = [g for g in root.iter(SVG + "g") if g.get("class") == "between"]
    assert len(bands) == 1
    band = bands[0]
    assert (float(band.get("data-from")), float(band.get("data-to"))) == (first_t, STARTED_2 - STARTED_1)
    words = " ".join(t.text for t in band.iter(SVG + "text"))
    assert "cold restart 32s" in words and "weight cache daemon" in words and "reloading the weights" in words
    rect = band.find(SVG + "rect")
    x0, x1 = float(rect.get("x")), float(rect.get("x")) + float(rect.get("width"))
    inside = []
    for line in root.iter(SVG + "polyline"):
        xs = [float(p.split(",")[0]) for p in line.get("points").split()]
        for edge in (x0, x1):
            assert not any(a < edge - 0.1 and b > edge + 0.1 for a, b in zip(xs, xs[1:])), "a line across the band's edge"
        if x0 < min(xs) and max(xs) < x1:
            inside.append(line)
    # the daemon's own start: its GPU memory, disk reads and CPU while it loads the weights
    assert len(inside) >= 3
    legend = [t.text for t in root.find(".//%sg[@id='phase-legend']" % SVG).iter(SVG + "text")]
    assert "between attempts" in legend


def test_a_warm_weight_load_is_an_attach_not_a_read_from_disk(healed_cold):
    md = healed_cold[1]
    warm = [line for line in md.splitlines() if "attempt 1: phase weight_load" in line]
    cold = [line for line in md.splitlines() if "attempt 2: phase weight_load" in line]
    assert warm and "from disk" not in warm[0].replace("reads no shard from disk", "")
    assert "weight cache daemon holds" in warm[0]
    assert cold and "loading the weight shards from disk" in cold[0]
