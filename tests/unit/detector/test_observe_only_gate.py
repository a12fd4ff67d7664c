"""Rule 4's gate in the detector: an observe-only start is watched, never stopped by a
stall or a line; only a dead process or the ceiling ends it, and it can still become ready."""
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.observe_only_decision import ObserveOnly

OBSERVE = ObserveOnly(ceiling_s=1800.0, why="the last 2 starts ended stalled (stall_idle) in post_load",
                      verdict="stalled", reason_code="stall_idle", phase="post_load")


def idle_until_held(s):
    for dummy in range(200):
        a = s.poll(cpu_pct=3)
        if a.verdict == "observing":
            return a
    raise AssertionError("never held: %s" % a.reason)


def test_a_stall_is_held_as_observing_with_the_would_be_verdict(start):
    s = start(observe_only=OBSERVE)
    s.loaded()
    a = idle_until_held(s)
    assert not a.final and a.reason_code == "observe_only"
    assert a.reason.startswith("would have stopped it: ") and a.reason.endswith("; observe-only: " + OBSERVE.why)
    held = a.evidence["held_verdict"]
    assert held["verdict"] == "stalled" and held["reason_code"] == "stall_idle" and held["phase"] == "post_load"
    assert s.poll(cpu_pct=3).verdict == "observing"


def test_without_observe_only_the_same_start_is_stopped(start):
    s = start()
    s.loaded()
    finals = [a for a in s.polls(1200, cpu_pct=3) if a.final]
    assert finals and finals[0].verdict == "stalled"


def test_a_held_start_that_completes_is_ready(start):
    s = start(observe_only=OBSERVE)
    s.loaded()
    idle_until_held(s)
    s.http = {"health": 200, "completion": {"ok": True, "status": 200, "ms": 90.0}}
    a = s.poll(cpu_pct=3)
    assert (a.verdict, a.final) == ("ready", True)


def test_a_line_confirmed_by_a_freeze_is_held_but_a_dead_process_ends_the_start(start):
    s = start(observe_only=OBSERVE)
    s.loaded()
    s.poll(log=["[2026-11-29 10:00:00 TP2] KeyError: 'model.layers.61.mlp.experts.w13_weight_scale'"])
    s.util = [100 if i % 2 else 0 for i in range(8)]
    a = s.poll(cpu_pct=300)
    assert a.verdict == "observing" and a.evidence["held_verdict"]["reason_code"] == "fatal_error"
    s.unit = {"active": "failed", "sub": "failed", "main_pid": None, "restarts": 0}
    a = s.poll(cpu_pct=0)
    assert (a.verdict, a.final) == ("failed", True)


def test_the_ceiling_ends_an_observe_only_start_for_a_human(start):
    s = start(observe_only=ObserveOnly(600.0, "twice the same", "stalled", "stall_idle", "post_load"))
    s.loaded()
    a = None
    for a in s.polls(700, cpu_pct=3):
        if a.final:
            break
    assert (a.verdict, a.reason_code, a.final) == ("stalled", "stall_observe_ceiling", True)
    assert a.t >= 600.0 and a.evidence["rule"] == "rule 4: observe-only ceiling"
