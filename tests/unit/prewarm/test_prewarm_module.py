import os

import pytest

from ansible_collections.sglang_ops.serving.plugins.module_utils.host import page_cache
from ansible_collections.sglang_ops.serving.plugins.modules import sglang_prewarm

MIB = 2**20


@pytest.fixture
def model_dir(disk_dir, write_file):
    for i in range(2):
        write_file(os.path.join(disk_dir, "model-%05d-of-00002.safetensors" % (i + 1)), 3 * MIB)
    return disk_dir


def _params(path, **kw):
    params = {"model_path": path, "extra_paths": [], "include": ["*.safetensors"],
              "mode": "auto", "reserve_gib": 0.0, "threads": 2, "read_block_mib": 1,
              "max_duration_s": 0.0, "evict": False}
    params.update(kw)
    return params


def test_evict_then_prewarm_reports_residency_before_and_after(model_dir):
    cold = sglang_prewarm.run(_params(model_dir, evict=True), check_mode=False)
    assert cold["decision"]["code"] == "evict"
    assert cold["resident_fraction_after"] < 0.05
    warm = sglang_prewarm.run(_params(model_dir), check_mode=False)
    assert warm["decision"]["code"] == "fits"
    assert warm["resident_fraction_before"] < 0.05
    assert warm["resident_fraction_after"] == 1.0
    assert warm["read_bytes"] > 5 * MIB and warm["changed"] and warm["done"]
    assert warm["model_bytes"] == 6 * MIB and warm["files"] == 2
    assert "resident" in warm["msg"] and "GB/s" in warm["msg"]


def test_check_mode_reports_the_decision_and_reads_nothing(model_dir):
    sglang_prewarm.run(_params(model_dir, evict=True), check_mode=False)
    result = sglang_prewarm.run(_params(model_dir), check_mode=True)
    assert result["decision"]["prewarm"] and result["read_bytes"] == 0
    assert not result["changed"]
    assert page_cache.files_residency(
        [os.path.join(model_dir, f) for f in os.listdir(model_dir)]).fraction < 0.05


def test_check_mode_does_not_evict(model_dir):
    result = sglang_prewarm.run(_params(model_dir, evict=True), check_mode=True)
    assert result["resident_fraction_after"] == result["resident_fraction_before"] == 1.0


def test_auto_reads_nothing_when_the_reserve_exceeds_memory(model_dir):
    sglang_prewarm.run(_params(model_dir, evict=True), check_mode=False)
    result = sglang_prewarm.run(_params(model_dir, reserve_gib=1e6), check_mode=False)
    assert result["decision"]["code"] == "does_not_fit"
    assert result["read_bytes"] == 0 and result["resident_fraction_after"] < 0.05


def test_off_reads_nothing(model_dir):
    sglang_prewarm.run(_params(model_dir, evict=True), check_mode=False)
    result = sglang_prewarm.run(_params(model_dir, mode="off"), check_mode=False)
    assert result["decision"]["code"] == "off" and result["read_bytes"] == 0
