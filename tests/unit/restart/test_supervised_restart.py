"""The restart of a supervised unit, against a scripted host access: one restart, then the
supervisor's starts streamed from the probe's reads until one is ready or systemd leaves
the unit failed; nothing else is ever done to the unit."""
import json
import os

from ansible_collections.sglang_ops.serving.plugins.plugin_utils.shared.artifacts import RunArtifacts
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.restart.supervised_restart import SupervisedRestart

ROOT = "/var/lib/sglang-ops/starts"
OLD = {"dir": ROOT + "/20261130T100000Z-10", "verdict": "ready", "phase": "ready", "reason_code": "ready"}


def _start(name, verdict, **fields):
    return dict({"dir": "%s/%s" % (ROOT, name), "verdict": verdict, "phase": "weight_load",
                 "started_at": 1796000000.0, "progress": "weight_load 2/8 shards"}, **fields)


class ScriptedPort:
    """Each poll's answer from `polls` (unit state, starts newest first); reads and verbs recorded."""

    def __init__(self, polls, files):
        self.polls, self.files = list(polls), files
        self.now, self.verbs, self.lines, self.reads = 0.0, [], [], []

    def read(self, **asked):
        self.reads.append(asked)
        if "start_files" in asked:
            return {"start_files": self.files.get(asked["start_files"], {}), "missing": {}}
        active, starts = self.polls.pop(0) if len(self.polls) > 1 else self.polls[0]
        return {"unit_state": {"active": active, "sub": "running" if active == "active" else active,
                               "result": "exit-code" if active == "failed" else "success"},
                "starts": {"current": None, "starts": starts}, "missing": {}}

    def verb(self, name, **kwargs):
        self.verbs.append(name)
        return 0, "", ""

    def emit(self, line):
        self.lines.append(line)

    def clock(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


def test_a_stalled_start_then_a_ready_one_are_two_attempts_with_the_files_copied(tmp_path):
    stalled = _start("20261130T110000Z-11", "stalled", reason_code="stall_idle", exit_code=76,
                     ended_at=1796000090.0, reason="every signal flat")
    ready = _start("20261130T110200Z-12", "ready", phase="ready", reason_code="ready", ready_after_s=31.0)
    running = _start("20261130T110000Z-11", "running")
    port = ScriptedPort([("active", [OLD]), ("activating", [running, OLD]), ("activating", [stalled, OLD]),
                         ("active", [ready, stalled, OLD])],
                        {"20261130T110000Z-11": {"trace.jsonl": '{"format": "sglang-trace/1"}\n',
                                                 "verdict.json": json.dumps(stalled),
                                                 "diagnostics/py-spy.txt": "Thread 1 (idle)"}})
    artifacts = RunArtifacts(str(tmp_path), "h1", 1796000000)
    res = SupervisedRestart("sglang-x", port, artifacts, poll_s=2, start_timeout_s=600).run()
    assert res["outcome"] == "ready" and res["last"]["dir"] == ready["dir"]
    assert port.verbs == ["restart-no-block"]          # one restart, nothing after it
    assert [(a["n"], a["verdict"], a["action"]) for a in res["attempts"]] == [
        (1, "stalled", "restarted by systemd"), (2, "ready", "ready")]
    assert res["attempts"][0]["diagnostics"] == "attempt-1/diagnostics" and res["attempts"][1]["diagnostics"] is None
    with open(os.path.join(artifacts.path, "attempt-1", "diagnostics", "py-spy.txt")) as fh:
        assert fh.read() == "Thread 1 (idle)"
    assert os.path.exists(os.path.join(artifacts.path, "attempt-1", "trace.jsonl"))
    assert "start 1: weight_load 2/8 shards" in port.lines
    assert all(r.get("starts_dir", ROOT) == ROOT for r in port.reads)


def test_a_failure_a_restart_cannot_help_is_handed_over_when_systemd_leaves_the_unit_failed(tmp_path):
    failed = _start("20261130T120000Z-13", "failed", reason_code="fatal_oom", exit_code=80, ended_at=1796000010.0)
    port = ScriptedPort([("active", [OLD]), ("failed", [failed, OLD])], {})
    res = SupervisedRestart("sglang-x", port, RunArtifacts(str(tmp_path), "h1", 1796000000), 2, 600).run()
    assert res["outcome"] == "gave_up" and res["unit_state"]["active"] == "failed"
    assert [(a["verdict"], a["action"]) for a in res["attempts"]] == [("failed", "handed_over")]
    assert port.verbs == ["restart-no-block"]


def test_no_ready_start_within_the_start_timeout_is_a_timeout_and_nothing_is_stopped(tmp_path):
    running = _start("20261130T130000Z-14", "running")
    port = ScriptedPort([("active", [OLD]), ("activating", [running, OLD])], {})
    res = SupervisedRestart("sglang-x", port, RunArtifacts(str(tmp_path), "h1", 1796000000), 2, 30).run()
    assert res["outcome"] == "timeout" and res["last"]["dir"] == running["dir"]
    assert port.verbs == ["restart-no-block"] and port.now >= 30


def test_a_crash_loop_longer_than_the_read_window_is_handed_over_when_systemd_gives_up(tmp_path):
    from ansible_collections.sglang_ops.serving.plugins.plugin_utils.restart.supervised_restart import RECENT_STARTS
    starts = [_start("20261130T14%04dZ-%d" % (i, i), "failed", reason_code="fatal_error", exit_code=71,
                     ended_at=1796000010.0 + i) for i in range(RECENT_STARTS + 5)]
    # each poll one more failed start; the read returns the newest RECENT_STARTS, newest first
    polls = [("activating", list(reversed(starts[:i + 1]))[:RECENT_STARTS]) for i in range(len(starts))]
    port = ScriptedPort([("active", [OLD])] + polls + [("failed", list(reversed(starts))[:RECENT_STARTS])], {})
    res = SupervisedRestart("sglang-x", port, RunArtifacts(str(tmp_path), "h1", 1796000000), 2, 3600).run()
    assert res["outcome"] == "gave_up" and res["last"]["dir"] == starts[-1]["dir"]
    assert len(res["attempts"]) == len(starts) and res["attempts"][-1]["action"] == "handed_over"
    assert port.now < 3600


def test_more_starts_than_the_read_window_each_keep_their_own_number_and_records(tmp_path):
    from ansible_collections.sglang_ops.serving.plugins.plugin_utils.restart.supervised_restart import RECENT_STARTS
    starts = [_start("20261130T15%04dZ-%d" % (i, i), "failed", reason_code="fatal_error", exit_code=71,
                     ended_at=1796000010.0 + i) for i in range(2 * RECENT_STARTS + 3)]
    files = {os.path.basename(s["dir"]): {"trace.jsonl": '{"start": "%s"}\n' % s["dir"],
                                          "diagnostics/log-tail.txt": "log of %s" % s["dir"]} for s in starts}
    # two new starts a poll, so the window slides past starts the run has not numbered yet
    polls = [("activating", list(reversed(starts[:i + 2]))[:RECENT_STARTS]) for i in range(0, len(starts), 2)]
    port = ScriptedPort([("active", [OLD])] + polls + [("failed", list(reversed(starts))[:RECENT_STARTS])], files)
    artifacts = RunArtifacts(str(tmp_path), "h1", 1796000000)
    res = SupervisedRestart("sglang-x", port, artifacts, 2, 3600).run()
    assert [a["n"] for a in res["attempts"]] == list(range(1, len(starts) + 1))
    assert [a["host_dir"] for a in res["attempts"]] == [s["dir"] for s in starts]
    assert len({a["trace"] for a in res["attempts"]}) == len(starts)
    for attempt, start in zip(res["attempts"], starts):
        with open(os.path.join(artifacts.path, attempt["trace"])) as fh:
            assert fh.read() == '{"start": "%s"}\n' % start["dir"]
        with open(os.path.join(artifacts.path, attempt["diagnostics"], "log-tail.txt")) as fh:
            assert fh.read() == "log of %s" % start["dir"]
    assert [a["action"] for a in res["attempts"]] == ["restarted by systemd"] * (len(starts) - 1) + ["handed_over"]
