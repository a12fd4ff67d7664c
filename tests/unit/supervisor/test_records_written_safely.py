"""The supervisor's own writes never go through what the service user planted in its
folders (module_utils/records/safe_files.py, start_records.py, start_metrics.py): the trace
is created O_EXCL|O_NOFOLLOW, verdict.json and each diagnostic are replaced from a mkstemp
file in the start's folder, the start's folder is made by mkdir (one there that is not ours
is refused), the metrics file's folder is checked the same way; names are matched whole;
old starts are pruned after the launch, a slice a poll, and a stamp-named link among them
is removed (never its target), with one warning."""
import json
import os
import pathlib
import shutil
import tempfile
import threading

import pytest

from ansible_collections.sglang_ops.serving.plugins.module_utils.records import start_records as sr
from ansible_collections.sglang_ops.serving.plugins.module_utils.records.start_metrics import write_textfile
from ansible_collections.sglang_ops.serving.plugins.module_utils.records.trace_format import trace_header
from ansible_collections.sglang_ops.serving.plugins.module_utils.services import unit_failed
from ansible_collections.sglang_ops.serving.plugins.module_utils.services.start_outlook import StartOutlook

HEADER = trace_header("start-x", "sglang-test", 1.0, 2)
VICTIM_TEXT = "root's file, not the supervisor's\n"


@pytest.fixture
def victim(tmp_path):
    path = tmp_path / "victim"
    path.write_text(VICTIM_TEXT)
    return str(path)


def _finishes(fn, timeout_s=5.0):
    """fn() in a thread; (finished, its result): an open that blocks on a FIFO never finishes."""
    out = []
    thread = threading.Thread(target=lambda: out.append(fn()), daemon=True)
    thread.start()
    thread.join(timeout_s)
    return not thread.is_alive(), (out[0] if out else None)


def test_the_verdict_is_not_written_through_a_link_at_a_predictable_temporary_name(tmp_path, victim):
    rec = sr.StartRecord(str(tmp_path / "starts"), 1796000000, 1)
    rec.update(polls=1)
    os.symlink(victim, os.path.join(rec.path, "verdict.json.%d.tmp" % os.getpid()))
    rec.update(polls=2)
    assert open(victim).read() == VICTIM_TEXT
    verdict = os.path.join(rec.path, "verdict.json")
    assert not os.path.islink(verdict) and json.loads(open(verdict).read())["polls"] == 2


def test_a_link_planted_at_the_trace_is_refused_and_its_target_untouched(tmp_path, victim):
    warnings = []
    rec = sr.StartRecord(str(tmp_path / "starts"), 1796000000, 1, warn=warnings.append)
    os.symlink(victim, rec.trace_path)
    trace = rec.open_trace(rec.trace_path, HEADER)
    trace.append({"t": 1.0})
    trace.close()
    assert open(victim).read() == VICTIM_TEXT
    assert warnings == ["warning: cannot write %s (already there (a symbolic link); a new file is not written "
                        "through it); the start goes on without it" % rec.trace_path]


def test_a_fifo_at_a_diagnostics_path_neither_blocks_nor_is_written_through(tmp_path):
    rec = sr.StartRecord(str(tmp_path / "starts"), 1796000000, 1)
    os.mkdir(os.path.join(rec.path, "diagnostics"), 0o750)
    fifo = os.path.join(rec.path, "diagnostics", "log-tail.txt")
    os.mkfifo(fifo)
    finished, written = _finishes(lambda: rec.write_diagnostic("log-tail", "the last lines\n"))
    assert finished, "write_diagnostic blocked on the FIFO"
    assert written == fifo and not os.path.islink(fifo) and open(fifo).read() == "the last lines\n"


def test_a_linked_diagnostics_folder_is_refused(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    warnings = []
    rec = sr.StartRecord(str(tmp_path / "starts"), 1796000000, 1, warn=warnings.append)
    os.symlink(str(elsewhere), os.path.join(rec.path, "diagnostics"))
    assert rec.write_diagnostic("log-tail", "x\n") is None
    assert os.listdir(str(elsewhere)) == []
    assert len(warnings) == 1 and "a symbolic link where a folder is expected" in warnings[0]


@pytest.mark.parametrize("plant", ["link", "world-writable"])
def test_a_start_folder_already_there_and_not_ours_is_refused(tmp_path, plant):
    starts, elsewhere = tmp_path / "starts", tmp_path / "elsewhere"
    starts.mkdir()
    elsewhere.mkdir()
    name = sr.stamp(1796000000, 1)
    if plant == "link":
        os.symlink(str(elsewhere), str(starts / name))
    else:
        (starts / name).mkdir()
        os.chmod(str(starts / name), 0o777)
    warnings = []
    rec = sr.StartRecord(str(starts), 1796000000, 1, warn=warnings.append)
    rec.update(polls=1)
    rec.write_diagnostic("log-tail", "x\n")
    rec.open_trace(rec.trace_path, HEADER).close()
    assert os.listdir(str(elsewhere)) == [] and os.listdir(str(starts / name)) == []
    assert warnings and rec.path in warnings[0]
    assert ("a symbolic link where a folder is expected" if plant == "link" else "mode 0777") in warnings[0]


def test_the_metrics_folder_is_checked_before_writing(tmp_path):
    elsewhere, loose = tmp_path / "elsewhere", tmp_path / "loose"
    elsewhere.mkdir()
    loose.mkdir()
    os.chmod(str(loose), 0o777)
    os.symlink(str(elsewhere), str(tmp_path / "linked"))
    with pytest.raises(OSError) as err:
        write_textfile(str(tmp_path / "linked"), "sglang_ops_u.prom", "x 1\n")
    assert "a symbolic link where a folder is expected" in str(err.value) and os.listdir(str(elsewhere)) == []
    with pytest.raises(OSError) as err:
        write_textfile(str(loose), "sglang_ops_u.prom", "x 1\n")
    assert "writable by everyone" in str(err.value) and os.listdir(str(loose)) == []


def test_a_name_ending_in_a_newline_is_not_a_start(tmp_path):
    starts = tmp_path / "starts"
    forged = starts / "20261130T000000Z-1\n"
    forged.mkdir(parents=True)
    (forged / "verdict.json").write_text(json.dumps({"verdict": "ready", "reason": "forged"}))
    assert sr.start_dirs(str(starts)) == [] and sr.recent_starts(str(starts)) == []
    with pytest.raises(ValueError):
        sr.read_files(str(starts), "20261130T000000Z-1\n")


@pytest.fixture
def many_folders(tmp_path):
    """A folder for 100,000 folders: in memory where /dev/shm is (a disk takes a minute to
    make and remove them), removed after the test."""
    base = "/dev/shm" if os.path.isdir("/dev/shm") and os.access("/dev/shm", os.W_OK) else str(tmp_path)
    path = tempfile.mkdtemp(prefix="sglang-ops-prune-", dir=base)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def test_pruning_waits_for_the_launch_and_goes_a_slice_at_a_time(many_folders):
    """100,000 empty stamp-named folders: a new start removes none of them when it is made
    (the server is launched right after), then at most PRUNE_SLICE a poll."""
    starts = pathlib.Path(many_folders)
    fd = os.open(str(starts), os.O_RDONLY | os.O_DIRECTORY)
    try:
        for i in range(100000):
            os.mkdir("20200101T000000Z-%d" % i, dir_fd=fd)
    finally:
        os.close(fd)
    rec = sr.StartRecord(str(starts), 1796000000, 1, keep=3)
    assert len(os.listdir(str(starts))) == 100000 + 2          # the old ones, this start and `current`
    assert rec.prune_step() is True
    assert len(os.listdir(str(starts))) == 100000 + 2 - sr.PRUNE_SLICE
    assert "20200101T000000Z-0" not in os.listdir(str(starts))  # the oldest go first (by name)


def test_a_stamp_named_link_is_removed_once_never_its_target(tmp_path, victim):
    starts = tmp_path / "starts"
    first = sr.StartRecord(str(starts), 1796000000, 1)
    link = str(starts / "20200101T000000Z-9")
    os.symlink(os.path.dirname(victim), link)
    said = []
    second = sr.StartRecord(str(starts), 1796000100, 2, keep=5, warn=said.append)
    while second.prune_step():
        pass
    assert not os.path.lexists(link) and open(victim).read() == VICTIM_TEXT and os.path.isdir(first.path)
    assert [s for s in said if link in s] == [
        "warning: removed %s: a symbolic link where a start's folder is expected (the link; its target is left "
        "as it was)" % link]
    again = []
    sr.StartRecord(str(starts), 1796000200, 3, keep=5, warn=again.append).prune_step()
    assert again == []


def test_a_metrics_file_replaced_by_a_link_is_named_once_and_replaced(tmp_path, victim):
    metrics = tmp_path / "metrics"
    metrics.mkdir()
    name = "sglang_ops_sglang_test.prom"
    os.symlink(victim, str(metrics / name))
    said = []
    outlook = StartOutlook.on_host("sglang-test", str(metrics), str(tmp_path / "starts"), warn=said.append)
    assert said == ["warning: metrics file refused %s: a symbolic link where a regular file is expected; its "
                    "counters start again from 0 and a file of ours replaces it" % (metrics / name)]
    outlook.begin_attempt(1)
    outlook.restarted("stall_idle")
    assert not os.path.islink(str(metrics / name)) and open(victim).read() == VICTIM_TEXT
    StartOutlook.on_host("sglang-test", str(metrics), str(tmp_path / "starts"), warn=said.append)
    assert len(said) == 1


@pytest.mark.parametrize("plant", ["fifo", "link"])
def test_the_on_failure_handler_reads_the_metrics_file_without_blocking_or_following(tmp_path, victim, plant):
    starts, metrics = tmp_path / "starts", tmp_path / "metrics"
    metrics.mkdir()
    rec = sr.StartRecord(str(starts), 1796000000, 1)
    rec.update(verdict="stalled", reason_code="stall_idle", unit="sglang-test")
    with open(victim, "w") as fh:
        fh.write('sglang_restarts_total{reason_code="stall_idle",unit="sglang-test"} 4242\n')
    path = str(metrics / "sglang_ops_sglang_test.prom")
    os.mkfifo(path) if plant == "fifo" else os.symlink(victim, path)
    settings = tmp_path / "settings.json"
    settings.write_text(json.dumps({"unit": "sglang-test", "starts_dir": str(starts), "metrics_dir": str(metrics)}))
    said = []

    def run():
        unit_failed._finish_metrics(unit_failed.SupervisorSettings.load(str(settings)), rec.record, 1796001000.0,
                                    said.append)
        return open(path).read()
    finished, text = _finishes(run)
    assert finished, "the handler blocked on the FIFO"
    assert "4242" not in text and 'sglang_last_start_info{outcome="gave_up"' in text
    assert len(said) == 1 and path in said[0] and ("a FIFO" if plant == "fifo" else "a symbolic link") in said[0]


def test_the_supervisor_launches_the_server_before_it_prunes(supervise, tmp_path):
    """A real supervisor over 2,000 old starts (keep_starts 2): the server it launches still
    finds every one of them; the polls after the launch prune, a slice each."""
    starts = tmp_path / "starts"
    starts.mkdir()
    for i in range(2000):
        (starts / ("20200101T000000Z-%d" % i)).mkdir()
    count = tmp_path / "at-launch"
    server = ["sh", "-c", "ls %s | grep -c Z- > %s; sleep 2; exit 3" % (starts, count)]
    run = supervise(settings={"keep_starts": 2}, server=server)
    run.wait(60)
    assert int(count.read_text()) == 2000 + 1                    # the old ones and this start, at the launch
    left = len([n for n in os.listdir(str(starts)) if n.startswith("2020")])
    assert left < 2000 and left % sr.PRUNE_SLICE == 0, run.output()[-2000:]
