"""A start attached to the weight cache is not announced with a cold start's weight load."""
from ansible_collections.sglang_ops.serving.plugins.module_utils.records.eta import (
    WEIGHT_CACHE_ATTACH_S, EtaEstimator, LoadConditions)
from ansible_collections.sglang_ops.serving.plugins.module_utils.records.start_metrics import StartMetrics

COLD = {"ready_after_s": 900.0, "phases": [
    {"phase": "starting", "duration_s": 20.0}, {"phase": "weight_load", "duration_s": 600.0, "read_bytes": 500 * 2**30},
    {"phase": "post_load", "duration_s": 100.0}, {"phase": "cuda_graph", "duration_s": 180.0}]}


def _eta(conditions):
    est = EtaEstimator([COLD] * 3, conditions)
    est.update({"t": 0.0, "phase": "starting", "verdict": "progressing", "progress": {}})
    est.update({"t": 20.0, "phase": "weight_load", "verdict": "progressing", "progress": {}})
    return est.update({"t": 25.0, "phase": "weight_load", "verdict": "progressing", "progress": {}})


def test_an_attached_start_predicts_an_attach_not_a_read_from_storage():
    cold = _eta(LoadConditions(model_bytes=500 * 2**30, resident_bytes=0))
    warm = _eta(LoadConditions(model_bytes=500 * 2**30, resident_bytes=0, weight_cache=True))
    assert warm.phase_basis == "weight_cache" and warm.phase_remaining_s <= WEIGHT_CACHE_ATTACH_S
    assert warm.remaining_s < cold.remaining_s - 500


def test_the_metrics_say_warm_or_why_cold():
    m = StartMetrics("u", clock=lambda: 1.0)
    m.restart_kind("warm", None)
    assert 'sglang_start_warm{unit="u"} 1' in m.render() and "sglang_start_cold_reason_info" not in m.render()
    m.restart_kind("cold_fallback", "fallback_to_disk")
    text = m.render()
    assert 'sglang_start_warm{unit="u"} 0' in text
    assert 'sglang_start_cold_reason_info{reason="fallback_to_disk",unit="u"} 1' in text
