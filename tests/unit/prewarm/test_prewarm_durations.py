"""The prewarm's progress line writes its elapsed time as every other line does (durations.py):
a long read is '1h15m', as the restart's progress line and the incident report say it."""
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.durations import fmt_duration
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.restart import prewarm_step


def test_a_long_prewarm_reads_in_hours_and_minutes():
    line = prewarm_step.progress_line(
        {"resident_fraction_after": 0.9, "resident_bytes_after": 493e9, "model_bytes": 548e9},
        elapsed_s=4500, read_bytes=493e9)
    assert line.endswith(" · 1h15m") and fmt_duration(4500) == "1h15m"
