import functools
import os

import pytest

from ansible_collections.sglang_ops.serving.plugins.module_utils.host import prewarm_reader
from ansible_collections.sglang_ops.serving.plugins.modules import sglang_prewarm
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.restart import prewarm_step

MIB = 2**20


@pytest.fixture
def model_dir(disk_dir, write_file, monkeypatch):
    monkeypatch.setattr(prewarm_reader, "SEGMENT_BYTES", MIB)
    for i in range(2):
        write_file(os.path.join(disk_dir, "model-%05d-of-00002.safetensors" % (i + 1)), 4 * MIB)
    return disk_dir


def _executor(calls, defaults):
    def execute(args):
        calls.append(args)
        return sglang_prewarm.run(dict(defaults, **args), check_mode=False)
    return execute


DEFAULTS = {"extra_paths": [], "include": ["*.safetensors"], "mode": "auto", "reserve_gib": 0.0,
            "threads": 1, "read_block_mib": 1, "max_duration_s": 0.0, "evict": False}


def test_steps_continue_until_the_model_is_resident_with_a_line_per_step(model_dir, monkeypatch):
    sglang_prewarm.run(dict(DEFAULTS, model_path=model_dir, evict=True), check_mode=False)
    # A tiny step budget: each call reads about one segment.
    monkeypatch.setattr(prewarm_reader, "warm",
                        functools.partial(prewarm_reader.warm, clock=_ticking_clock()))
    calls, lines = [], []
    summary = prewarm_step.prewarm(_executor(calls, DEFAULTS), lines.append,
                                   {"model_path": model_dir}, step_s=1.5)
    assert len(calls) >= 2 and all(c["max_duration_s"] == 1.5 for c in calls)
    assert summary["done"] and summary["resident_fraction_after"] == 1.0
    assert summary["resident_fraction_before"] < 0.05
    assert summary["steps"] == len(calls)
    assert lines[0].startswith("prewarm: ")  # the decision, once
    assert all(line.startswith("prewarm ") and "% resident" in line for line in lines[1:])
    # The last call may find the model resident already (readahead) and print no line.
    assert len(lines) >= 3


def test_no_prewarm_decision_is_one_call_and_the_words_are_the_summary(model_dir):
    calls, lines = [], []
    summary = prewarm_step.prewarm(_executor(calls, DEFAULTS), lines.append,
                                   {"model_path": model_dir, "mode": "off"})
    assert len(calls) == 1 and summary["read_bytes"] == 0
    assert summary["msg"].startswith("no prewarm: mode is off")
    assert lines == [summary["msg"]]


def test_failed_step_is_reported_not_raised():
    summary = prewarm_step.prewarm(lambda a: {"failed": True, "msg": "boom"}, lambda t: None,
                                   {"model_path": "/x"})
    assert summary == {"failed": True, "msg": "boom", "steps": 1}


def test_unknown_option_is_rejected():
    with pytest.raises(ValueError, match="thread_count"):
        prewarm_step.prewarm(lambda a: {}, lambda t: None, {"model_path": "/x", "thread_count": 4})


def test_progress_line_reads_like_the_restart_progress():
    line = prewarm_step.progress_line(
        {"resident_fraction_after": 0.41, "resident_bytes_after": 226e9, "model_bytes": 548e9},
        elapsed_s=108, read_bytes=226e9)
    assert line == "prewarm 41% resident · 226/548 GB · 2.09 GB/s · 1m48s"
    small = prewarm_step.progress_line(
        {"resident_fraction_after": 1.0, "resident_bytes_after": 3.2e9, "model_bytes": 3.2e9},
        elapsed_s=5, read_bytes=3.2e9)
    assert small == "prewarm 100% resident · 3.2/3.2 GB · 0.64 GB/s · 5s"


def _ticking_clock():
    t = [0.0]

    def clock():
        t[0] += 1.0
        return t[0]
    return clock
