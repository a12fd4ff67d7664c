"""The textfile the restart action and the supervisor write for node_exporter."""
import os
import shutil
import subprocess

import pytest

from ansible_collections.sglang_ops.serving.plugins.module_utils.records.eta import EtaEstimator
from ansible_collections.sglang_ops.serving.plugins.module_utils.records.start_metrics import (
    StartMetrics, file_name, read_counters, write_textfile)

UNIT = "sglang-k26-ddtree"


def a(t, phase, verdict="progressing", **progress):
    return {"t": t, "phase": phase, "verdict": verdict, "reason": "", "final": verdict in ("ready", "stalled", "failed"),
            "progress": dict({"gpu_mem_used_mib": 4096.0, "gpu_mem_total_mib": 8 * 97887.0, "read_bytes": 2**30,
                              "shards_done": 29, "shards_total": 64}, **progress)}


def samples(text):
    """{(metric, frozenset(labels)): value} of the text."""
    out = {}
    for line in text.splitlines():
        if line.startswith("#") or not line:
            continue
        name_labels, value = line.rsplit(" ", 1)
        name, dummy_brace, labels = name_labels.partition("{")
        pairs = frozenset(tuple(p.split("=", 1)) for p in labels.rstrip("}").split(",") if p)
        out[(name, frozenset((k, v.strip('"')) for k, v in pairs))] = float(value)
    return out


def value(text, metric, **labels):
    labels = frozenset(dict(labels, unit=UNIT).items())
    return samples(text)[(metric, labels)]


def watched_run(clock=lambda: 1700000000.0):
    m = StartMetrics(UNIT, clock=clock)
    est = EtaEstimator([{"outcome": "ready", "ready_after_s": 640.0,
                         "phases": [{"phase": "weight_load", "started_s": 0, "duration_s": 300.0, "read_bytes": 0},
                                    {"phase": "post_load", "started_s": 300, "duration_s": 340.0, "read_bytes": 0}]}])
    m.start(attempt=1)
    for obs in (a(0, "weight_load"), a(50, "weight_load")):
        m.observe(obs, est.update(obs))
    return m


def test_a_watched_start_shows_its_phase_progress_and_eta():
    text = watched_run().render()
    assert value(text, "sglang_start_in_progress") == 1
    assert value(text, "sglang_start_phase", phase="weight_load") == 1
    assert value(text, "sglang_start_phase", phase="post_load") == 0
    assert value(text, "sglang_start_verdict", verdict="progressing") == 1
    assert value(text, "sglang_start_elapsed_seconds") == 50
    assert value(text, "sglang_start_shards_loaded") == 29 and value(text, "sglang_start_shards") == 64
    assert value(text, "sglang_start_read_bytes") == 2**30
    assert value(text, "sglang_start_gpu_memory_used_bytes") == 4096 * 2**20
    assert value(text, "sglang_start_eta_seconds") == 590
    assert value(text, "sglang_start_usual_seconds") == 640


def test_a_finished_run_shows_its_outcome_attempts_phase_durations_and_time_to_ready():
    m = watched_run()
    m.observe(a(60, "weight_load", verdict="stalled"))
    m.restarted("stall_idle")
    m.start(attempt=2)
    m.observe(a(700, "ready", verdict="ready"))
    m.finish("ready", "ready", attempts=2, ready_after_s=700.0,
             phases=[{"phase": "weight_load", "duration_s": 400.0}, {"phase": "post_load", "duration_s": 300.0}],
             slower=[("weight_load", 400.0, 250.0)])
    text = m.render()
    assert value(text, "sglang_start_in_progress") == 0
    assert value(text, "sglang_last_start_info", outcome="ready", reason_code="ready") == 1
    assert value(text, "sglang_last_start_attempts") == 2
    assert value(text, "sglang_last_start_needed_human") == 0
    assert value(text, "sglang_last_start_phase_duration_seconds", phase="weight_load") == 400
    assert value(text, "sglang_last_start_time_to_ready_seconds") == 700
    assert value(text, "sglang_last_start_slower_than_usual_phases") == 1
    assert value(text, "sglang_restarts_total", reason_code="stall_idle") == 1
    assert value(text, "sglang_starts_total", verdict="stalled") == 1
    assert value(text, "sglang_starts_total", verdict="ready") == 1
    assert ("sglang_start_eta_seconds", frozenset({("unit", UNIT)})) not in samples(text)


def test_counters_carry_on_from_the_previous_file():
    first = watched_run()
    first.restarted("stall_idle")
    first.hang_after_ready()
    again = StartMetrics(UNIT, previous_text=first.render())
    again.restarted("stall_idle")
    text = again.render()
    assert value(text, "sglang_restarts_total", reason_code="stall_idle") == 2
    assert value(text, "sglang_hangs_after_ready_total") == 1
    assert read_counters("garbage\nsglang_restarts_total{unit=\"x\"} nope\n") == {}


def test_a_run_that_gave_up_needs_a_human():
    m = watched_run()
    m.finish("gave_up", "fatal_oom", attempts=1)
    text = m.render()
    assert value(text, "sglang_last_start_needed_human") == 1
    assert value(text, "sglang_last_start_info", outcome="gave_up", reason_code="fatal_oom") == 1


def test_promtool_accepts_the_file():
    promtool = shutil.which("promtool")
    assert promtool, "promtool is missing: apt-get install prometheus (.ci/run installs it)"
    m = watched_run()
    m.restarted("stall_idle")
    m.finish("gave_up", "stall_spin", attempts=3,
             phases=[{"phase": "weight_load", "duration_s": 40.0}])
    for text in (watched_run().render(), m.render()):
        check = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True, check=False)
        assert check.returncode == 0 and not check.stdout.strip() and not check.stderr.strip(), \
            check.stdout + check.stderr


def test_the_file_is_replaced_atomically_and_leaves_nothing_else(tmp_path):
    name = file_name(UNIT)
    assert name == "sglang_ops_sglang_k26_ddtree.prom"
    write_textfile(str(tmp_path), name, "old\n")
    write_textfile(str(tmp_path), name, "new\n")
    assert os.listdir(tmp_path) == [name]
    assert (tmp_path / name).read_text() == "new\n"
    assert oct((tmp_path / name).stat().st_mode & 0o777) == "0o644"


def test_a_failed_write_leaves_the_old_file_and_no_temporary(tmp_path, monkeypatch):
    name = file_name(UNIT)
    write_textfile(str(tmp_path), name, "old\n")

    def refuse(src, dst, **dummy_dir_fds):
        raise OSError("disk full")
    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(OSError):
        write_textfile(str(tmp_path), name, "new\n")
    assert os.listdir(tmp_path) == [name] and (tmp_path / name).read_text() == "old\n"
