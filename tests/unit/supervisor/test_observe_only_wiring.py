"""Rule 4 where a start begins (module_utils/services/observe_only.py): the earlier starts read from
the supervisor's folders and the restart's run.json files reach observe_only_decision, and its
answer reaches the detector and every line on-call reads. observe_only_decision's own decision
is pinned by its tests; here a recording double stands in for it."""
import dataclasses
import json
import sys
import types

import pytest

from ansible_collections.sglang_ops.serving.plugins.module_utils.records import start_records
from ansible_collections.sglang_ops.serving.plugins.module_utils.services import observe_only
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.detector import Assessment
from ansible_collections.sglang_ops.serving.plugins.module_utils.services.start_watch import WatchOptions, watch_start
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.restart import observe_only_step

MODULE = "ansible_collections.sglang_ops.serving.plugins.module_utils.domain.observe_only_decision"


@dataclasses.dataclass(frozen=True)
class Held:
    ceiling_s: float
    why: str
    verdict: str = "stalled"
    reason_code: str = "stall_idle"
    phase: str = "weight_load"


@pytest.fixture
def decisions(monkeypatch):
    """The calls observe_only_decision.observe_only_from_starts receives; it answers Held when the
    two newest starts share verdict and phase."""
    calls = []

    def observe_only_from_starts(starts, usual_ready_s=None, min_ceiling_s=1800.0, ceiling_factor=3.0):
        calls.append({"starts": starts, "usual_ready_s": usual_ready_s, "min_ceiling_s": min_ceiling_s,
                      "ceiling_factor": ceiling_factor})
        two = starts[:2]
        if len(two) == 2 and len({(s["verdict"], s["phase"]) for s in two}) == 1 and two[0]["verdict"] != "ready":
            return Held(max(min_ceiling_s, ceiling_factor * (usual_ready_s or 0)), "2 starts stalled in weight_load")
        return None

    fake = types.ModuleType(MODULE)
    fake.observe_only_from_starts = observe_only_from_starts
    monkeypatch.setitem(sys.modules, MODULE, fake)
    return calls


def _start(root, at, pid, **fields):
    rec = start_records.StartRecord(str(root), at, pid)
    rec.update(**fields)
    return rec


def test_the_supervisor_reads_earlier_starts_newest_first_without_its_own(tmp_path, decisions):
    _start(tmp_path, 1796000000, 1, verdict="stalled", phase="weight_load", reason_code="stall_idle")
    _start(tmp_path, 1796000100, 2, verdict="stalled", phase="weight_load", reason_code="stall_wait_stacks")
    own = _start(tmp_path, 1796000200, 3, verdict="running", phase="starting")
    held = observe_only.on_host(str(tmp_path), 700.0, 1200.0, 2.5, exclude=own.path)
    assert held == Held(1750.0, "2 starts stalled in weight_load")
    call = decisions[-1]
    assert [s["reason_code"] for s in call["starts"]] == ["stall_wait_stacks", "stall_idle"]
    assert (call["usual_ready_s"], call["min_ceiling_s"], call["ceiling_factor"]) == (700.0, 1200.0, 2.5)


def test_a_ready_start_between_means_no_observe_only(tmp_path, decisions):
    _start(tmp_path, 1796000000, 1, verdict="stalled", phase="weight_load")
    _start(tmp_path, 1796000100, 2, verdict="ready", phase="ready")
    assert observe_only.on_host(str(tmp_path)) is None
    assert decisions[-1]["min_ceiling_s"] == 1800.0   # observe_only_decision's own default when none is given


def test_on_call_reads_the_why_and_the_ceiling_in_one_form():
    held = Held(2700.0, "2 starts stalled in weight_load")
    assert observe_only.words(held) == "observe-only: 2 starts stalled in weight_load; ceiling 45m00s"
    assert observe_only.to_dict(held)["words"] == observe_only.words(held)
    assert observe_only.to_dict(None) is None


def test_the_restart_reads_its_own_attempts_then_earlier_runs(tmp_path, decisions):
    host = tmp_path / "gpu1"
    for stamp, codes in (("20260101T000000Z", ["stall_idle"]), ("20260102T000000Z", ["stall_wait_stacks"])):
        (host / stamp).mkdir(parents=True)
        (host / stamp / "run.json").write_text(json.dumps({"attempts": [
            {"n": i + 1, "verdict": "stalled", "phase": "weight_load", "reason_code": c} for i, c in enumerate(codes)]}))
    this_run = host / "20260103T000000Z"
    this_run.mkdir()
    (this_run / "run.json").write_text(json.dumps({"attempts": [{"n": 9, "verdict": "x", "phase": "y"}]}))
    mine = [{"n": 1, "verdict": "failed", "phase": "cuda_graph", "reason_code": "fatal_oom"}]
    held = observe_only_step.for_next_attempt(str(host), str(this_run), mine, 600.0)
    assert held is None     # the newest (this run's) differs from the one before
    assert [s.get("reason_code") for s in decisions[-1]["starts"]] == ["fatal_oom", "stall_wait_stacks", "stall_idle"]
    assert observe_only_step.for_next_attempt(str(host), str(this_run), [], 600.0) == \
        Held(1800.0, "2 starts stalled in weight_load")


def test_the_restart_holds_a_start_to_the_ceiling_the_inventory_sets(tmp_path, decisions):
    """restart.yml passes the role's sglang_service_observe_only_* (the supervisor's values) on."""
    host = tmp_path / "gpu1"
    this_run = host / "20260103T000000Z"
    this_run.mkdir(parents=True)
    mine = [{"n": i, "verdict": "stalled", "phase": "weight_load", "reason_code": "stall_idle"} for i in (1, 2)]
    held = observe_only_step.for_next_attempt(str(host), str(this_run), mine, 600.0, 900.0, 4.0)
    assert (decisions[-1]["min_ceiling_s"], decisions[-1]["ceiling_factor"]) == (900.0, 4.0)
    assert held.ceiling_s == 2400.0


def test_the_summary_names_each_attempt_that_ran_observe_only():
    attempts = [{"n": 1}, {"n": 2, "observe_only": observe_only.to_dict(Held(1800.0, "2 starts stalled"))}]
    assert observe_only_step.summary_words(attempts) == \
        "attempt 2 ran observe-only: 2 starts stalled; ceiling 30m00s"
    assert observe_only_step.summary_words([{"n": 1}]) == ""


class _Port:
    def __init__(self):
        self.now, self.lines = 1000.0, []

    def probe(self, cursor, stacks, since_epoch_s):
        del since_epoch_s
        return {"observation": {"ts": self.now, "unit": {"active": "active"}, "log": []}}

    def clock(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds

    def emit(self, line):
        self.lines.append(line)

    def verb(self, name):
        return 0, "", ""


def test_the_watch_gives_the_detector_the_observe_only_and_says_it_every_poll():
    made = []

    class Detector:
        def __init__(self, settings, observe_only=None):
            made.append(observe_only)
            self.n = 0

        def observe(self, obs):
            self.n += 1
            if self.n < 3:
                return Assessment(obs["t"], "weight_load", "observing", "observe_only", "held: stall_idle")
            return Assessment(obs["t"], "weight_load", "failed", "process_exited", "the server died")

    held = Held(1800.0, "2 starts stalled in weight_load")
    port = _Port()
    result = watch_start(port, WatchOptions(poll_s=5.0, observe_only=held), 1000.0, new_detector=Detector)
    assert made == [held]
    assert result.assessment.reason_code == "process_exited"
    assert len(port.lines) == 3
    assert all(line.endswith(" · observe-only: 2 starts stalled in weight_load; ceiling 30m00s") for line in port.lines)


def test_a_usual_watch_builds_its_detector_as_before():
    made = []

    def new_detector(settings):
        made.append(settings)

        class D:
            def observe(self, obs):
                return Assessment(obs["t"], "weight_load", "failed", "process_exited", "gone")
        return D()

    port = _Port()
    watch_start(port, WatchOptions(poll_s=5.0), 1000.0, new_detector=new_detector)
    assert len(made) == 1 and "observe-only" not in port.lines[0]
