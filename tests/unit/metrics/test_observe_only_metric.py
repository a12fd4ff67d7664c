"""sglang_start_observe_only: 1 while a start runs observe-only (rule 4), else 0."""
from ansible_collections.sglang_ops.serving.plugins.module_utils.records.start_metrics import StartMetrics

UNIT = "sglang-k26-ddtree"


def a(t, phase, verdict="progressing"):
    return {"t": t, "phase": phase, "verdict": verdict, "reason": "", "progress": {},
            "final": verdict in ("ready", "stalled", "failed")}


def value(text, metric):
    wanted = '%s{unit="%s"} ' % (metric, UNIT)
    found = [float(line[len(wanted):]) for line in text.splitlines() if line.startswith(wanted)]
    assert len(found) == 1, text
    return found[0]


def test_observe_only_is_one_while_such_a_start_is_watched_and_zero_once_it_ends():
    m = StartMetrics(UNIT, clock=lambda: 1700000000.0)
    m.start(attempt=1)
    m.observe_only(True)
    m.observe(a(30.0, "weight_load", verdict="observing"))
    assert value(m.render(), "sglang_start_observe_only") == 1
    m.observe(a(90.0, "ready", verdict="ready"))
    m.finish("ready", "ready", 1)
    assert value(m.render(), "sglang_start_observe_only") == 0


def test_observe_only_is_zero_for_a_start_watched_as_usual():
    m = StartMetrics(UNIT, clock=lambda: 1700000000.0)
    m.start(attempt=2)
    m.observe(a(30.0, "weight_load"))
    assert value(m.render(), "sglang_start_observe_only") == 0


def test_a_new_attempt_starts_without_observe_only():
    m = StartMetrics(UNIT, clock=lambda: 1700000000.0)
    m.start(attempt=1)
    m.observe_only(True)
    m.start(attempt=2)
    m.observe(a(5.0, "starting"))
    assert value(m.render(), "sglang_start_observe_only") == 0
