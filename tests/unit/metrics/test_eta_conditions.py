"""The outlook knows what a start will read: the page-cache residency of the model SGLang
names, read once per start on the host, and a weight cache when one is attached."""
from ansible_collections.sglang_ops.serving.plugins.module_utils.records.eta import LoadConditions
from ansible_collections.sglang_ops.serving.plugins.module_utils.services.start_outlook import StartOutlook

UNIT = "sglang-k26-ddtree"


def names_model(path, t=1.0):
    return {"t": t, "log": [{"t": 0.0, "msg": "server_args=ServerArgs(model_path='%s', tp_size=8, ...)" % path}]}


def assessment(t, phase="distributed_init"):
    return {"t": t, "phase": phase, "verdict": "progressing", "reason": "", "progress": {}}


def model_folder(tmp_path, sizes):
    folder = tmp_path / "model"
    folder.mkdir()
    for i, size in enumerate(sizes):
        (folder / ("model-%05d.safetensors" % i)).write_bytes(b"\1" * size)
    (folder / "config.json").write_text("{}")                     # not a weight file
    return folder


def test_the_host_outlook_reads_the_residency_of_the_model_sglang_names_once_per_start(tmp_path):
    folder = model_folder(tmp_path, [3 * 4096, 5 * 4096 + 100])
    calls = []
    outlook = StartOutlook.on_host(UNIT, None, starts_dir=str(tmp_path / "starts"), warn=calls.append)
    outlook.begin_attempt(1)
    outlook.on_poll(names_model(folder), assessment(1.0))
    conditions = outlook.estimator.conditions
    assert conditions.model_bytes == 8 * 4096 + 100                # the weight files only
    assert 0 <= conditions.resident_bytes <= conditions.model_bytes
    assert calls == []
    reads = []
    outlook.read_residency = lambda model: reads.append(model) or LoadConditions(1, 1)
    outlook.on_poll(names_model(folder, 2.0), assessment(2.0))
    assert reads == []                                             # once per start
    outlook.begin_attempt(2)
    outlook.on_poll({"t": 1.0}, assessment(1.0))
    assert reads == [str(folder)]                                  # and again for the next start


def test_a_weight_cache_attached_means_nothing_to_read_from_storage(tmp_path):
    folder = model_folder(tmp_path, [4096])
    outlook = StartOutlook.on_host(UNIT, None, starts_dir=str(tmp_path / "starts"), weight_cache=True)
    outlook.begin_attempt(1)
    outlook.on_poll(names_model(folder), assessment(1.0))
    assert outlook.estimator.conditions.weight_cache is True
    assert outlook.estimator.conditions.storage_bytes() == 0


def test_a_model_whose_files_cannot_be_read_is_one_warning_and_the_eta_goes_on(tmp_path):
    warnings = []
    outlook = StartOutlook.on_host(UNIT, None, starts_dir=str(tmp_path / "starts"), warn=warnings.append)
    outlook.begin_attempt(1)
    estimate = outlook.on_poll(names_model("/nonexistent/Kimi-K2.6"), assessment(1.0))
    outlook.on_poll(names_model("/nonexistent/Kimi-K2.6", 2.0), assessment(2.0))
    assert warnings == ["ETA without page-cache residency: model path /nonexistent/Kimi-K2.6 does not exist"]
    assert estimate.text() == "ETA unknown (no earlier start)"
    assert outlook.estimator.conditions.storage_bytes() is None


def test_conditions_given_by_the_caller_hold_for_every_attempt():
    given = LoadConditions(model_bytes=548 * 10**9, resident_bytes=548 * 10**9)
    outlook = StartOutlook(UNIT, conditions=given)
    outlook.begin_attempt(2)
    assert outlook.estimator.conditions == given


def test_the_model_is_named_in_both_families_of_server_args_lines(tmp_path):
    from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.sglang_dialect import model_path_of
    assert model_path_of("server_args=ServerArgs(model_path='/models/Kimi-K2.6', tp_size=8)") == "/models/Kimi-K2.6"
    assert model_path_of("[2026-12-04 03:02:04] server_args={'model_path': '/models/Kimi-K2.6', 'tp_size': 8}") \
        == "/models/Kimi-K2.6"
    assert model_path_of("server_args={'tokenizer_path': '/models/tok'}") is None
    folder = model_folder(tmp_path, [4096])
    outlook = StartOutlook.on_host(UNIT, None, starts_dir=str(tmp_path / "starts"))
    outlook.begin_attempt(1)
    outlook.on_poll({"t": 1.0, "log": [{"t": 0.0, "msg": "server_args={'model_path': '%s', 'tp_size': 8}" % folder}]},
                    assessment(1.0))
    assert outlook.estimator.conditions.model_bytes == 4096        # the 0.5.23 line names the model too
