from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.progress_line import progress_line


def _a(**progress):
    base = {"shards_done": None, "shards_total": None, "gpu_count": None, "gpu_mem_used_mib": None,
            "gpu_mem_total_mib": None, "read_bps": None, "cpu_pct": None, "http": None, "elapsed_s": 192.0}
    base.update(progress)
    return {"t": 192.0, "phase": "weight_load", "verdict": "progressing", "reason": "", "progress": base}


def test_progress_line_reads_like_the_operator_example():
    line = progress_line(_a(shards_done=29, shards_total=64, gpu_count=8, gpu_mem_used_mib=8 * 41 * 1024,
                            gpu_mem_total_mib=8 * 96 * 1024, read_bps=1.1e9, cpu_pct=350, http="refused"))
    assert line == "weight_load 29/64 shards \u00b7 GPU 41/96 GB \u00d78 \u00b7 disk 1.1 GB/s \u00b7 CPU 350% \u00b7 http refused \u00b7 3m12s"


def test_missing_signals_are_left_out_of_the_line():
    assert progress_line(_a()) == "weight_load \u00b7 3m12s"


def test_a_verdict_other_than_progressing_is_spelled_out():
    a = _a()
    a.update(verdict="suspect", reason="nothing moved for 1m")
    assert progress_line(a).endswith("suspect: nothing moved for 1m")
