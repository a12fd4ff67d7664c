"""Every series of the start metrics carries `host`, the inventory name, when it is known."""
from ansible_collections.sglang_ops.serving.plugins.module_utils.records.start_metrics import StartMetrics


def test_every_series_carries_the_inventory_name():
    m = StartMetrics("sglang-k26-ddtree", clock=lambda: 100.0, host="gpu-a1")
    m.start()
    m.observe({"t": 10.0, "phase": "weight_load", "verdict": "progressing"})
    samples = [line for line in m.render().splitlines() if not line.startswith("#")]
    assert samples and all('host="gpu-a1"' in line for line in samples)


def test_counters_of_a_file_without_the_label_carry_on_under_it():
    old = StartMetrics("sglang-k26-ddtree", clock=lambda: 100.0)
    old.restarted("stall_idle")
    old.restarted("stall_idle")
    text = old.render()
    assert 'host=' not in text
    new = StartMetrics("sglang-k26-ddtree", previous_text=text, clock=lambda: 200.0, host="gpu-a1")
    new.restarted("stall_idle")
    out = new.render()
    assert 'sglang_restarts_total{host="gpu-a1",reason_code="stall_idle",unit="sglang-k26-ddtree"} 3' in out
    assert 'sglang_restarts_total{reason_code="stall_idle",unit="sglang-k26-ddtree"}' not in out


def test_without_a_host_the_series_keep_their_labels():
    m = StartMetrics("sglang-k26-ddtree", clock=lambda: 100.0)
    assert 'sglang_hangs_after_ready_total{unit="sglang-k26-ddtree"} 0' in m.render()
