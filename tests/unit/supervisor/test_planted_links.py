"""What the service user may plant in the per-start folders (a link to a secret, a
symlinked start folder, a FIFO or a device where a file is expected, a hard link) is never
followed, read, copied or removed through: the readers (probe, status, history) and the
supervisor's pruning refuse it with a warning naming the path (module_utils/records/safe_files.py).

These run as root, as the probe does on a host; the service user is a uid of its own
(SERVICE_UID), which owns the starts folder and what the supervisor wrote in it."""
import json
import os
import stat

import pytest

from ansible_collections.sglang_ops.serving.plugins.module_utils.host.probe import ProbeRequest, probe
from ansible_collections.sglang_ops.serving.plugins.module_utils.records import safe_files
from ansible_collections.sglang_ops.serving.plugins.module_utils.records import start_records as sr
from ansible_collections.sglang_ops.serving.plugins.module_utils.records.start_history import (
    load_history, supervisor_traces)

SERVICE_UID = 4711
SECRET = "root:$6$planted-secret-hash:19000:0:99999:7:::\n"
ROOT_ONLY = pytest.mark.skipif(os.geteuid() != 0, reason="chown and mknod need root, as the probe has")


def _chown_tree(path, uid):
    os.lchown(path, uid, uid)
    for dirpath, dirnames, filenames in os.walk(path):
        for name in dirnames + filenames:
            os.lchown(os.path.join(dirpath, name), uid, uid)


@pytest.fixture
def host(tmp_path):
    """(starts folder, the start's folder name, a root-only secret outside, a model copy)."""
    secret = tmp_path / "etc-shadow"
    secret.write_text(SECRET)
    os.chmod(secret, 0o600)
    model = tmp_path / "model-copy"
    model.mkdir()
    (model / "model-00001-of-00002.safetensors").write_text("weights")
    starts = tmp_path / "starts"
    starts.mkdir()
    rec = sr.StartRecord(str(starts), 1796000000, 42)
    rec.update(verdict="failed", reason_code="stall_idle")
    rec.open_trace(rec.trace_path, {"format": "sglang-trace/1"}).close()
    rec.write_diagnostic("log-tail", "the last lines\n")
    if os.geteuid() == 0:
        _chown_tree(str(starts), SERVICE_UID)
    return str(starts), rec.name, str(secret), str(model)


def _start(host):
    return os.path.join(host[0], host[1])


def _plant(path, make):
    make(path)
    if os.geteuid() == 0:
        os.lchown(path, SERVICE_UID, SERVICE_UID)


def test_a_link_to_a_secret_among_the_diagnostics_is_neither_read_nor_copied(host):
    starts, name, secret, dummy_model = host
    planted = os.path.join(_start(host), "diagnostics", "zz-shadow.txt")
    _plant(planted, lambda p: os.symlink(secret, p))
    warnings = []
    files = sr.read_files(starts, name, warn=warnings.append)
    assert files["diagnostics/zz-shadow.txt"] is None
    assert files["diagnostics/log-tail.txt"] == "the last lines\n"       # the start's own diagnostics still come
    assert not any("planted-secret" in (text or "") for text in files.values())
    assert warnings == ["refused %s: a symbolic link where a regular file is expected; not copied" % planted]


def test_the_probe_returns_no_secret_and_says_what_it_refused(host):
    starts, name, secret, dummy_model = host
    planted = os.path.join(_start(host), "diagnostics", "zz-shadow.txt")
    _plant(planted, lambda p: os.symlink(secret, p))
    res = probe(ProbeRequest(observation=False, start_files=name, starts_dir=starts))
    assert "planted-secret" not in json.dumps(res)
    assert res["start_files"]["diagnostics/zz-shadow.txt"] is None
    assert len(res["refused"]) == 1 and planted in res["refused"][0]


def test_a_symlinked_trace_verdict_or_diagnostics_folder_is_refused(host):
    starts, name, secret, dummy_model = host
    folder = _start(host)
    for rel in ("trace.jsonl", "verdict.json"):
        os.unlink(os.path.join(folder, rel))
        _plant(os.path.join(folder, rel), lambda p: os.symlink(secret, p))
    for f in os.listdir(os.path.join(folder, "diagnostics")):
        os.unlink(os.path.join(folder, "diagnostics", f))
    os.rmdir(os.path.join(folder, "diagnostics"))
    _plant(os.path.join(folder, "diagnostics"), lambda p: os.symlink(os.path.dirname(secret), p))
    warnings = []
    files = sr.read_files(starts, name, warn=warnings.append)
    assert files == {"trace.jsonl": None, "verdict.json": None}
    assert len(warnings) == 3 and all(w.startswith("refused " + folder) for w in warnings)
    assert sr.read_record(starts, name) is None                # status does not read through it either
    assert load_history(supervisor_traces(starts)) == []


def test_a_symlinked_start_folder_is_neither_read_nor_pruned_through(host):
    starts, name, secret, model = host
    link = os.path.join(starts, "20000101T000000Z-1")
    _plant(link, lambda p: os.symlink(model, p))
    with open(os.path.join(model, "verdict.json"), "w") as fh:
        fh.write(json.dumps({"verdict": "ready"}))
    warnings = []
    assert sr.start_dirs(starts, warn=warnings.append) == [name]
    assert warnings and link in warnings[0] and "symbolic link where a start's folder is expected" in warnings[0]
    assert [r["dir"] for r in sr.recent_starts(starts, 5)] == [os.path.join(starts, name)]
    with pytest.raises(ValueError):
        sr.read_files(starts, "../model-copy")
    refused = []
    nothing = {"trace.jsonl": None, "verdict.json": None}
    assert sr.read_files(starts, "20000101T000000Z-1", warn=refused.append) == nothing
    assert refused and link in refused[0]
    # the next start prunes to keep=1: the real old folder goes, and the link (never its target)
    said = []
    sr.StartRecord(starts, 1796000100, 43, keep=1, warn=said.append).prune_step()
    assert sorted(os.listdir(model)) == ["model-00001-of-00002.safetensors", "verdict.json"]
    assert not os.path.lexists(link) and not os.path.exists(_start(host))
    assert [s for s in said if link in s] == [
        "warning: removed %s: a symbolic link where a start's folder is expected (the link; its target is left as it was)"
        % link]
    assert not any("cannot write" in s for s in said)


def test_pruning_removes_a_link_inside_an_old_start_never_its_target(host):
    starts, name, secret, model = host
    _plant(os.path.join(_start(host), "diagnostics", "weights"), lambda p: os.symlink(model, p))
    _plant(os.path.join(_start(host), "shadow"), lambda p: os.symlink(secret, p))
    sr.StartRecord(starts, 1796000100, 43, keep=1).prune_step()
    assert not os.path.lexists(_start(host))
    assert os.listdir(model) == ["model-00001-of-00002.safetensors"]
    assert open(secret).read() == SECRET


@ROOT_ONLY
def test_a_fifo_or_a_device_where_a_file_is_expected_is_refused_without_blocking(host):
    starts, name, dummy_secret, dummy_model = host
    folder = _start(host)
    os.unlink(os.path.join(folder, "trace.jsonl"))
    _plant(os.path.join(folder, "trace.jsonl"), os.mkfifo)      # an open without O_NONBLOCK would hang here
    _plant(os.path.join(folder, "diagnostics", "zero.txt"),
           lambda p: os.mknod(p, 0o600 | stat.S_IFCHR, os.makedev(1, 5)))   # /dev/zero: endless bytes
    warnings = []
    files = sr.read_files(starts, name, warn=warnings.append)
    assert files["trace.jsonl"] is None and files["diagnostics/zero.txt"] is None
    assert any("trace.jsonl: a FIFO where a regular file is expected" in w for w in warnings)
    assert any("zero.txt: a device where a regular file is expected" in w for w in warnings)


@ROOT_ONLY
def test_a_hard_link_to_a_file_elsewhere_or_a_file_of_another_owner_is_refused(host):
    starts, name, secret, dummy_model = host
    diagnostics = os.path.join(_start(host), "diagnostics")
    os.link(secret, os.path.join(diagnostics, "hard.txt"))          # keeps root as its owner, two names
    os.chown(secret, SERVICE_UID, SERVICE_UID)                      # even when the service user owns it
    other = os.path.join(diagnostics, "root-owned.txt")
    with open(other, "w") as fh:
        fh.write("written by someone else\n")
    warnings = []
    files = sr.read_files(starts, name, warn=warnings.append)
    assert files["diagnostics/hard.txt"] is None and files["diagnostics/root-owned.txt"] is None
    assert any("hard.txt: a hard link (2 names)" in w for w in warnings)
    assert any("root-owned.txt: owned by uid 0, expected uid %d" % SERVICE_UID in w for w in warnings)


def test_reads_are_bounded(host, monkeypatch):
    starts, name, dummy_secret, dummy_model = host
    folder = _start(host)
    monkeypatch.setattr(sr, "TRACE_MAX_BYTES", 100)
    monkeypatch.setattr(sr, "DIAGNOSTIC_MAX_BYTES", 10)
    with open(os.path.join(folder, "trace.jsonl"), "a") as fh:
        fh.write("x" * 200)
    with open(os.path.join(folder, "diagnostics", "log-tail.txt"), "a") as fh:
        fh.write("0123456789-the-end")
    warnings = []
    files = sr.read_files(starts, name, warn=warnings.append)
    assert files["trace.jsonl"] is None and "more than the 100 read" in warnings[0]
    assert files["diagnostics/log-tail.txt"] == "89-the-end"       # a diagnostic keeps its last bytes


def test_the_folder_helper_reads_a_regular_file_and_refuses_a_link(tmp_path):
    (tmp_path / "a.json").write_text('{"k": 1}')
    os.symlink(str(tmp_path / "a.json"), str(tmp_path / "b.json"))
    assert safe_files.read_json_file(str(tmp_path / "a.json"), 100) == {"k": 1}
    with pytest.raises(safe_files.UnsafeEntry) as err:
        safe_files.read_json_file(str(tmp_path / "b.json"), 100)
    assert str(err.value) == "refused %s: a symbolic link where a regular file is expected" % (tmp_path / "b.json")
    with pytest.raises(safe_files.UnsafeEntry):
        safe_files.read_file(str(tmp_path / "a.json"), 3)
