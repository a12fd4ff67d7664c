from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.phases import PhaseModel
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.sglang_dialect import bar_kind


def test_phases_only_move_forward_so_late_rank_lines_cannot_pull_back():
    pm = PhaseModel()
    pm.enter("weight_load", 10)
    pm.enter("kv_cache", 20)
    assert not pm.enter("weight_load", 21)
    assert pm.phase == "kv_cache"


def test_a_finished_shard_bar_means_weights_are_in_and_post_load_begins():
    pm = PhaseModel()
    pm.enter("weight_load", 10)
    pm.on_bar("shards", done=False, t=20)
    assert pm.phase == "weight_load"
    pm.on_bar("shards", done=True, t=30)
    assert pm.phase == "post_load"


def test_deepgemm_jit_can_start_before_load_weight_end_and_the_start_goes_on():
    pm = PhaseModel()
    pm.enter("post_load", 10)
    assert pm.enter("jit_compile", 20)
    assert pm.enter("kv_cache", 30)
    assert pm.phase == "kv_cache"


def test_an_http_answer_means_the_http_server_is_up():
    pm = PhaseModel()
    pm.enter("cuda_graph", 10)
    pm.on_http(True, 20)
    assert pm.phase == "http_server"


def test_bar_kinds_cover_both_loader_bars_capture_and_deepgemm():
    assert bar_kind("Loading safetensors checkpoint shards") == "shards"
    assert bar_kind("Multi-thread loading shards") == "shards"
    assert bar_kind("Capturing batches (bs=4 avail_mem=8.1 GB)") == "cuda_graph"
    assert bar_kind("DeepGEMM warmup") == "jit_compile"
    assert bar_kind("Downloading") is None
