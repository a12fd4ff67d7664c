import json
import os

from ansible_collections.sglang_ops.serving.plugins.plugin_utils.shared.artifacts import RunArtifacts, utc_stamp
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.shared.artifacts import default_artifacts_root

EPOCH = 1_795_986_000.0  # 2026-11-29T21:00:00Z


def test_run_folder_is_host_then_utc_stamp(tmp_path):
    run = RunArtifacts(str(tmp_path), "gpu-k26-01", EPOCH)
    assert run.path == os.path.join(str(tmp_path), "gpu-k26-01", utc_stamp(EPOCH))
    assert utc_stamp(EPOCH) == "20261129T210000Z"
    assert run.trace_relpath(2) == os.path.join("attempt-2", "trace.jsonl")


def test_two_runs_in_the_same_second_keep_both(tmp_path):
    first = RunArtifacts(str(tmp_path), "h", EPOCH)
    second = RunArtifacts(str(tmp_path), "h", EPOCH)
    assert first.path != second.path and os.path.isdir(first.path) and os.path.isdir(second.path)


def test_host_names_cannot_escape_the_artifacts_folder(tmp_path):
    run = RunArtifacts(str(tmp_path), "../../etc", EPOCH)
    assert os.path.realpath(run.path).startswith(os.path.realpath(str(tmp_path)) + os.sep)


def test_diagnostics_are_redacted_on_the_way_to_disk(tmp_path):
    run = RunArtifacts(str(tmp_path), "h", EPOCH)
    rel = run.write_diagnostic(1, "processes", "4059 S python -m sglang.launch_server --api-key sk-live-0123456789\n")
    text = open(run.abspath(rel)).read()
    assert rel == os.path.join("attempt-1", "diagnostics", "processes.txt")
    assert "sk-live-0123456789" not in text and "--api-key" in text


def test_run_json_is_written_whole(tmp_path):
    run = RunArtifacts(str(tmp_path), "h", EPOCH)
    path = run.write_run({"host": "h", "outcome": "ready", "attempts": []})
    assert json.load(open(path))["outcome"] == "ready"
    assert not os.path.exists(path + ".tmp")


def test_default_artifacts_folder_is_the_repository_root_for_both_playbook_locations(tmp_path):
    assert default_artifacts_root(str(tmp_path / "playbooks")) == str(tmp_path / "artifacts")
    assert default_artifacts_root(str(tmp_path)) == str(tmp_path / "artifacts")


def test_installed_collection_playbook_writes_artifacts_in_the_current_directory(tmp_path, monkeypatch):
    playbooks = tmp_path / "collections" / "ansible_collections" / "sglang_ops" / "serving" / "playbooks"
    monkeypatch.chdir(tmp_path)
    assert default_artifacts_root(str(playbooks)) == str(tmp_path / "artifacts")
