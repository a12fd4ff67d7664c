"""py-spy dump parsing, rank detection, and dumps of real (also stopped) processes."""
import os
import signal
import sys
import time

import pytest

from ansible_collections.sglang_ops.serving.plugins.module_utils.host import pyspy
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain import sglang_dialect

DUMP = """Process 7187: python3 -m sglang.launch_server --model-path /m --tp-size 8
Python v3.11.7 (/usr/bin/python3.11)

Thread 7187 (idle): "MainThread"
    barrier (torch/distributed/distributed_c10d.py:4159)
    wait (sglang/srt/managers/scheduler.py:310)
    run_scheduler_process (sglang/srt/managers/scheduler.py:2990)
Thread 7201 (idle): "Thread-1 (_read_thread)"
    _recv (multiprocessing/connection.py:395)
"""


def test_main_thread_frames_innermost_first():
    threads = pyspy.parse_dump(DUMP)
    assert [t["name"] for t in threads] == ["MainThread", "Thread-1 (_read_thread)"]
    assert pyspy.main_frames(threads) == ["barrier", "wait", "run_scheduler_process"]


@pytest.mark.parametrize("text,rank", [
    ("sglang::scheduler_TP3", "TP3"),
    ("sglang::scheduler_DP1_TP5", "DP1-TP5"),
    ("python3 shard_loader.py --tp-rank 2", "TP2"),
    ("sglang::detokenizer", None),
])
def test_rank_from_process_title_or_command_line(text, rank):
    assert sglang_dialect.rank_of(text) == rank


def test_stopped_process_is_read_without_pausing_it():
    assert pyspy.dump_argv("py-spy", 5, stopped=True)[-1] == "--nonblocking"
    assert "--nonblocking" not in pyspy.dump_argv("py-spy", 5, stopped=False)


def test_without_py_spy_the_reason_is_given(monkeypatch, tmp_path):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert pyspy.dump_stacks([(1, "TP0")], venv_bin=str(tmp_path)) == (
        None, "py-spy not found (service venv bin, PATH)")


# py-spy is in requirements.txt, so it sits beside the interpreter running the tests.
BIN = os.environ.get("PYSPY_BIN") or os.path.dirname(sys.executable)
needs_pyspy = pytest.mark.skipif(pyspy.find_pyspy(BIN) is None, reason="py-spy not installed (requirements.txt)")


@needs_pyspy
def test_real_dump_of_running_and_stopped_process(child):
    p = child("""
        import sys, time
        def barrier_wait():
            sys.stdout.write("up\\n"); sys.stdout.flush()
            while True:
                time.sleep(0.2)
        barrier_wait()
        """, "--tp-rank", "4")
    assert p.stdout.readline() == b"up\n"
    running, why = pyspy.dump_stacks([(p.pid, "TP4")], venv_bin=BIN)
    assert why is None and running[0]["frames"][0] == "barrier_wait"
    os.kill(p.pid, signal.SIGSTOP)
    time.sleep(0.3)
    stopped, why = pyspy.dump_stacks([(p.pid, "TP4")], venv_bin=BIN)
    assert why is None and stopped == running
