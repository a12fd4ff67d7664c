"""Start records from the traces of the corpus, in both layouts the project writes."""
import json
import os
import shutil

import pytest

from ansible_collections.sglang_ops.serving.tests.unit.restart.restart_fakes import make_procedure, progressing, ready
from ansible_collections.sglang_ops.serving.plugins.module_utils.records.start_history import (
    artifact_traces, history_traces, load_history, read_start, supervisor_traces)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
CORPUS = os.path.join(ROOT, "tests", "traces", "corpus")
WARM = os.path.join(CORPUS, "healthy_warm_cache.jsonl")
COLD = os.path.join(CORPUS, "healthy_cold_cache_silent.jsonl")
STALL = os.path.join(CORPUS, "stall_idle_after_load.jsonl")


def test_a_ready_start_has_its_phases_in_order_with_durations_and_bytes_read():
    rec = read_start(COLD, host="gpu1")
    assert rec["outcome"] == "ready" and rec["ready_after_s"] == 730.0
    assert rec["model"] == "/models/Kimi-K2.6" and rec["host"] == "gpu1"
    phases = [p["phase"] for p in rec["phases"]]
    assert phases == ["distributed_init", "weight_load", "post_load", "kv_cache", "cuda_graph", "http_server", "ready"]
    load = rec["phases"][1]
    assert load["duration_s"] == 500.0 and load["read_bytes"] > 500 * 10**9    # the 548 GB cold read
    assert sum(p["duration_s"] for p in rec["phases"]) == pytest.approx(730.0)
    assert rec["shards_total"] == 64


def test_a_stalled_start_is_recorded_but_not_history():
    assert read_start(STALL)["outcome"] == "stalled"
    assert load_history([STALL]) == []


def _artifacts(tmp_path, host, stamps):
    for stamp, traces in stamps:
        for n, trace in enumerate(traces, 1):
            folder = tmp_path / host / stamp / ("attempt-%d" % n)
            folder.mkdir(parents=True)
            shutil.copy(trace, folder / "trace.jsonl")


def test_the_restart_action_artifacts_give_the_most_recent_ready_starts_of_the_host(tmp_path):
    _artifacts(tmp_path, "gpu1", [("20260101T000000Z", [COLD]), ("20260102T000000Z", [STALL, WARM])])
    _artifacts(tmp_path, "gpu2", [("20260103T000000Z", [COLD])])
    paths = artifact_traces(str(tmp_path), "gpu1")
    assert [os.path.relpath(p, tmp_path) for p in paths] == [
        "gpu1/20260101T000000Z/attempt-1/trace.jsonl", "gpu1/20260102T000000Z/attempt-1/trace.jsonl",
        "gpu1/20260102T000000Z/attempt-2/trace.jsonl"]
    history = load_history(paths, host="gpu1")
    assert [r["ready_after_s"] for r in history] == [730.0, 270.0]       # oldest first, the stall left out
    assert [r["ready_after_s"] for r in load_history(paths, limit=1)] == [270.0]
    assert load_history(paths, model="/models/Other") == []
    assert load_history(paths, exclude=[paths[-1]])[-1]["ready_after_s"] == 730.0


def test_a_supervisor_starts_folder_reads_traces_and_falls_back_to_verdict_json(tmp_path):
    (tmp_path / "20260101T000000Z-11").mkdir()
    shutil.copy(WARM, tmp_path / "20260101T000000Z-11" / "trace.jsonl")
    (tmp_path / "20260102T000000Z-12").mkdir()
    (tmp_path / "20260102T000000Z-12" / "verdict.json").write_text(json.dumps({
        "verdict": "ready", "phase": "ready", "reason_code": "ready", "ready_after_s": 300.0, "unit": "u",
        "phase_durations": {"weight_load": 100.0, "post_load": 200.0}}))
    paths = supervisor_traces(str(tmp_path))
    history = load_history(paths)
    assert [r["ready_after_s"] for r in history] == [270.0, 300.0]
    assert [(p["phase"], p["duration_s"]) for p in history[1]["phases"]] == [("weight_load", 100.0), ("post_load", 200.0)]


def test_history_paths_are_files_or_folders_and_a_missing_one_is_named(tmp_path):
    _artifacts(tmp_path, "gpu1", [("20260101T000000Z", [WARM])])
    assert history_traces([str(tmp_path / "gpu1"), COLD]) == [
        str(tmp_path / "gpu1" / "20260101T000000Z" / "attempt-1" / "trace.jsonl"), COLD]
    with pytest.raises(ValueError, match="nowhere"):
        history_traces([str(tmp_path / "nowhere")])


def test_a_restart_keeps_its_time_to_ready_against_the_earlier_starts_of_the_host(tmp_path):
    _artifacts(tmp_path / "artifacts", "gpu-host-1", [("20260101T000000Z", [WARM])])
    _artifacts(tmp_path / "artifacts", "another-host", [("20260101T000000Z", [COLD])])
    proc, *_rest = make_procedure(tmp_path, [[progressing(), progressing(), ready()]])
    res = proc.restart()
    with open(res["run_json"]) as fh:
        ttr = json.load(fh)["time_to_ready"]
    assert ttr["history_starts"] == 1 and ttr["usual_total_s"] == 270.0
    assert ttr["ready_after_s"] == 10.0 and ttr["slower_than_usual"] == []
    assert [p["phase"] for p in ttr["phases"]] == ["weight_load", "ready"]


def test_a_phase_over_one_and_a_half_times_its_usual_time_is_named_in_the_result_and_the_report(tmp_path):
    from ansible_collections.sglang_ops.serving.plugins.plugin_utils.report.incident_report import write_run_report
    _artifacts(tmp_path / "artifacts", "gpu-host-1", [("20260101T000000Z", [WARM])])   # weight_load took 40 s
    proc, *_rest = make_procedure(tmp_path, [[progressing()] * 15 + [ready()]])          # here 75 s
    res = proc.restart()
    assert res["outcome"] == "ready"
    assert "time to ready 1m15s (usual 4m30s); slower than usual: weight_load 1m15s (usual 40s)" in res["msg"]
    write_run_report(res["artifacts"])
    with open(os.path.join(res["artifacts"], "report.md")) as fh:
        report = fh.read()
    assert "The last attempt was ready after 1m15s; usual 4m30s (median of 1 earlier ready start of this host)." in report
    assert "- slower than usual: weight_load took 1m15s, usual 40s (1.9\u00d7)" in report


def test_the_hosts_longest_phase_durations_become_the_blind_wait_history():
    from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.detector_settings import DetectorSettings
    from ansible_collections.sglang_ops.serving.plugins.module_utils.records.start_history import with_phase_history
    history = [{"phases": [{"phase": "weight_load", "duration_s": 100.0}, {"phase": "cuda_graph", "duration_s": 30.0}]},
               {"phases": [{"phase": "cuda_graph", "duration_s": 45.5}, {"phase": "ready", "duration_s": 0.0}]}]
    settings = with_phase_history(DetectorSettings(), history)
    assert settings.blind_wait_history_s == ("cuda_graph=45.5", "weight_load=100")
    assert with_phase_history(DetectorSettings(), []) == DetectorSettings()
    # an operator's own history (or a trace's recorded one) is kept
    mine = DetectorSettings().with_overrides({"blind_wait_history_s": "cuda_graph=600"})
    assert with_phase_history(mine, history) is mine


def test_a_start_record_keeps_the_gpu_memory_each_phase_ended_with():
    from ansible_collections.sglang_ops.serving.plugins.module_utils.records.eta import loaded_mib
    record = read_start(COLD)
    load = [p for p in record["phases"] if p["phase"] == "weight_load"][0]
    # 8 GPUs filled with ~548 GB of weights during the load: what the next start's ETA measures against
    assert load["gpu_mem_mib"] > 500000 and loaded_mib(record) > 400000
