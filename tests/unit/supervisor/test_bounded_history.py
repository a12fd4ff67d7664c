"""Every file the supervisor reads is read within a bound: a huge (valid) trace of an
earlier start counts by its verdict.json, and the supervisor's outlook of a new start is
built in the memory and time of an ordinary one (issue: 446 MiB and 5 s for 100 MiB)."""
import json
import os
import subprocess
import sys

from ansible_collections.sglang_ops.serving.plugins.module_utils.records import start_records as sr
from ansible_collections.sglang_ops.serving.plugins.module_utils.records.start_history import (
    HISTORY_TRACE_MAX_BYTES, load_history, read_start, supervisor_traces)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
WARM = os.path.join(ROOT, "tests", "traces", "corpus", "healthy_warm_cache.jsonl")
COLLECTIONS = os.path.join(ROOT, "collections")
# The outlook a supervisor builds when a start begins, in a process of its own: its peak
# memory and the time it took. The peak is VmHWM, this process image's own high-water mark:
# getrusage's ru_maxrss keeps the forking parent's size across exec (a pytest process
# grown large by the tests before this one).
MEASURE = """import json, re, sys, time
sys.path.insert(0, %r)
from ansible_collections.sglang_ops.serving.plugins.module_utils.services.start_outlook import StartOutlook
t0 = time.monotonic()
outlook = StartOutlook.on_host("u", None, starts_dir=sys.argv[1])
print(json.dumps({"s": time.monotonic() - t0, "history": [r["source"] for r in outlook.history],
                  "max_rss_mib": int(re.search(r"VmHWM:\\s+(\\d+) kB", open("/proc/self/status").read()).group(1)) / 1024.0}))
"""


def _huge_trace(path, size_bytes):
    """A valid trace of about size_bytes: the warm start's observations repeated, t rising."""
    with open(WARM, encoding="utf-8") as fh:
        header, *observations = [json.loads(line) for line in fh if line.strip()]
    with open(path, "w", encoding="utf-8") as out:
        out.write(json.dumps(header) + "\n")
        t, written = 0.0, 0
        while written < size_bytes:
            for obs in observations:
                if obs.get("log"):
                    obs = dict(obs, log=[])   # no ready line: the replay walks the whole file
                t += 1.0
                line = json.dumps(dict(obs, t=t)) + "\n"
                out.write(line)
                written += len(line)


def _earlier_start(root, epoch_s, pid, trace_bytes):
    rec = sr.StartRecord(root, epoch_s, pid)
    rec.update(verdict="ready", ready_after_s=270.0, phase_durations={"weight_load": 200.0, "post_load": 70.0})
    _huge_trace(rec.trace_path, trace_bytes)
    return rec.path


def test_a_trace_over_the_bound_counts_by_its_verdict(tmp_path):
    folder = _earlier_start(str(tmp_path), 1796000000, 7, 2 << 20)
    rec = read_start(os.path.join(folder, sr.TRACE), max_trace_bytes=1 << 20)
    assert rec["source"] == os.path.join(folder, sr.VERDICT) and rec["ready_after_s"] == 270.0
    assert [p["phase"] for p in rec["phases"]] == ["weight_load", "post_load"]
    assert read_start(os.path.join(folder, sr.TRACE), max_trace_bytes=4 << 20)["source"].endswith(sr.TRACE)


def test_a_100_mib_trace_of_an_earlier_start_costs_the_new_start_neither_memory_nor_time(tmp_path):
    root = str(tmp_path / "starts")
    folder = _earlier_start(root, 1796000000, 7, 100 << 20)
    assert os.path.getsize(os.path.join(folder, sr.TRACE)) > HISTORY_TRACE_MAX_BYTES
    proc = subprocess.run([sys.executable, "-I", "-c", MEASURE % COLLECTIONS, root],
                          capture_output=True, text=True, timeout=120, check=True)
    got = json.loads(proc.stdout)
    assert got["history"] == [os.path.join(folder, sr.VERDICT)]
    assert got["max_rss_mib"] < 80, got
    assert got["s"] < 2.0, got


def test_the_history_of_the_supervisor_lists_only_start_folders(tmp_path):
    root = str(tmp_path)
    folder = _earlier_start(root, 1796000000, 7, 1000)
    os.makedirs(os.path.join(root, "not-a-start"))
    assert supervisor_traces(root) == [os.path.join(folder, sr.TRACE)]
    assert len(load_history(supervisor_traces(root))) == 1


def test_the_metrics_file_read_back_is_a_regular_file_within_its_bound(tmp_path):
    from ansible_collections.sglang_ops.serving.plugins.module_utils.records.start_metrics import file_name
    from ansible_collections.sglang_ops.serving.plugins.module_utils.services import start_outlook
    starts, textfile = str(tmp_path / "starts"), tmp_path / "textfile"
    textfile.mkdir()
    counter = 'sglang_hangs_after_ready_total{unit="u"} 7\n'
    (textfile / file_name("u")).write_text(counter)

    def hangs():
        outlook = start_outlook.StartOutlook.on_host("u", str(textfile), starts_dir=starts)
        return [v for (metric, dummy), v in outlook.metrics.counters.items()
                if metric == "sglang_hangs_after_ready_total"]
    assert hangs() == [7.0]                                          # read back, counted on
    (textfile / file_name("u")).write_text(counter + "#" * start_outlook.METRICS_FILE_MAX_BYTES)
    assert hangs() == [0.0]                                          # too large: not read
    (textfile / "elsewhere.prom").write_text(counter)
    (textfile / file_name("u")).unlink()
    os.symlink(str(textfile / "elsewhere.prom"), str(textfile / file_name("u")))
    assert hangs() == [0.0]                                          # a link: not followed


# read_start of one trace with the controller's bound (64 MiB), in a process of its own.
MEASURE_READ = """import json, re, sys
sys.path.insert(0, %r)
from ansible_collections.sglang_ops.serving.plugins.module_utils.records.start_history import read_start
rec = read_start(sys.argv[1], max_trace_bytes=64 << 20)
print(json.dumps({"outcome": rec and rec["outcome"], "phases": rec and [p["phase"] for p in rec["phases"]],
                  "max_rss_mib": int(re.search(r"VmHWM:\\s+(\\d+) kB", open("/proc/self/status").read()).group(1)) / 1024.0}))
"""


def _padded_trace(path, size_bytes, line_bytes=256 << 10):
    """A valid trace of size_bytes without verdict.json beside it, made in a moment: lines of
    line_bytes, most of each a field no reader looks at."""
    header = json.dumps({"format": "sglang-trace/1", "name": "padded", "unit": "u", "poll_s": 1.0}) + "\n"
    pad = "x" * line_bytes
    with open(path, "w", encoding="utf-8") as out:
        out.write(header)
        for t in range(size_bytes // line_bytes):
            out.write('{"t": %d.0, "procs": {"count": 1, "cpu_s": %d.0}, "pad": "%s"}\n' % (t, t, pad))


def test_a_63_mib_trace_without_verdict_is_streamed_in_bounded_memory(tmp_path):
    root = tmp_path / "starts"
    start = root / "20261130T000000Z-7"
    start.mkdir(parents=True)
    trace = start / sr.TRACE
    _padded_trace(str(trace), 63 << 20)
    assert not (start / sr.VERDICT).exists() and os.path.getsize(str(trace)) > 62 << 20
    read = subprocess.run([sys.executable, "-I", "-c", MEASURE_READ % COLLECTIONS, str(trace)],
                          capture_output=True, text=True, timeout=60, check=True)
    got = json.loads(read.stdout)
    assert got["phases"] and got["max_rss_mib"] <= 60, got           # replayed whole, one line at a time
    supervisor = subprocess.run([sys.executable, "-I", "-c", MEASURE % COLLECTIONS, str(root)],
                                capture_output=True, text=True, timeout=60, check=True)
    got = json.loads(supervisor.stdout)
    assert got["history"] == [] and got["max_rss_mib"] <= 60, got    # the launch does not wait on it
    assert got["s"] < 1.0, got
