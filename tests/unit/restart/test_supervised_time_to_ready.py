"""A supervised run carries its time to ready against the host's earlier ready starts,
as the supervisor recorded them, and the summary line and report say it."""
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.shared.artifacts import RunArtifacts
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.restart.run_ending import time_to_ready_words
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.restart.supervised_restart import SupervisedRestart
from ansible_collections.sglang_ops.serving.plugins.module_utils.services.start_outlook import start_time_to_ready
from ansible_collections.sglang_ops.serving.tests.unit.restart.test_supervised_restart import ROOT, ScriptedPort

USUAL = {"starting": 5.0, "weight_load": 100.0, "post_load": 195.0}


def _ready(name, ready_after_s, durations):
    return {"dir": "%s/%s" % (ROOT, name), "verdict": "ready", "phase": "ready", "reason_code": "ready",
            "ready_after_s": ready_after_s, "phase_durations": durations, "started_at": 1796000000.0}


def test_a_ready_supervised_start_is_compared_with_the_earlier_ready_starts_of_the_host(tmp_path):
    earlier = [_ready("20261129T0%d0000Z-10%d" % (n, n), 300.0, USUAL) for n in (1, 2, 3)]
    slow = _ready("20261130T110000Z-11", 500.0, dict(USUAL, weight_load=300.0))
    running = dict(slow, verdict="running", ready_after_s=None)
    port = ScriptedPort([("active", earlier[::-1]), ("activating", [running] + earlier[::-1]),
                         ("active", [slow] + earlier[::-1])], {})
    res = SupervisedRestart("sglang-x", port, RunArtifacts(str(tmp_path), "h1", 1796000000), 2, 600).run()
    ttr = res["time_to_ready"]
    assert ttr["history_starts"] == 3 and ttr["usual_total_s"] == 300.0 and ttr["ready_after_s"] == 500.0
    assert ttr["slower_than_usual"] == [{"phase": "weight_load", "took_s": 300.0, "usual_s": 100.0}]
    assert [p["phase"] for p in ttr["phases"]] == ["starting", "weight_load", "post_load"]
    assert time_to_ready_words(ttr) == \
        "time to ready 8m20s (usual 5m00s); slower than usual: weight_load 5m00s (usual 1m40s); "


def test_later_starts_and_failed_ones_are_not_history():
    first = _ready("20261129T010000Z-101", 300.0, USUAL)
    failed = {"dir": ROOT + "/20261129T020000Z-102", "verdict": "failed", "reason_code": "fatal_error",
              "phase_durations": {"weight_load": 10.0}}
    this = _ready("20261129T030000Z-103", 310.0, USUAL)
    later = _ready("20261129T040000Z-104", 900.0, dict(USUAL, weight_load=700.0))
    ttr = start_time_to_ready(this, [later, failed, this, first])
    assert ttr["history_starts"] == 1 and ttr["usual_total_s"] == 300.0 and ttr["slower_than_usual"] == []


def test_a_start_that_did_not_become_ready_has_no_time_to_ready_but_its_slow_phases():
    failed = {"dir": ROOT + "/20261129T030000Z-103", "verdict": "stalled", "reason_code": "stall_idle",
              "phase_durations": {"starting": 5.0, "weight_load": 480.0}}
    ttr = start_time_to_ready(failed, [_ready("20261129T010000Z-101", 300.0, USUAL)])
    assert ttr["ready_after_s"] is None and time_to_ready_words(ttr) == ""
    assert ttr["slower_than_usual"] == [{"phase": "weight_load", "took_s": 480.0, "usual_s": 100.0}]
