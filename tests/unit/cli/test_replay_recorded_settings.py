"""A start decided with non-default windows replays to the same verdict: the trace's
header carries the settings that decided (and the code that ran), and `replay` uses them."""
import json
import os
import shutil
import subprocess
import sys

from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.detector_settings import DetectorSettings
from ansible_collections.sglang_ops.serving.plugins.module_utils.services.start_watch import (
    TraceTarget, WatchOptions, watch_start)
from ansible_collections.sglang_ops.serving.plugins.module_utils.records.trace_format import read_trace

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
BIN = os.path.join(ROOT, "bin", "sglang-ops")
PYTHON = shutil.which("python3") or sys.executable
# A stall in CUDA graph capture: every signal flat from t=150.
RECORDED = os.path.join(ROOT, "tests", "traces", "stall_capture_error_swallowed_idle.jsonl")
# The demo's supervisor windows (inventories/demo/group_vars/sglang.yml), scaled to this trace's poll.
SUPERVISOR_WINDOWS = {"stall_idle_window_s": 60, "stall_frozen_window_s": 60, "suspect_after_s": 30}


class _ReplayedHost:
    """The watch's host access serving a recorded start's observations one poll at a time."""

    def __init__(self, observations, poll_s):
        self.observations, self.poll_s, self.now = list(observations), poll_s, 1000.0

    def probe(self, cursor, stacks, since_epoch_s):
        del cursor, stacks, since_epoch_s
        return {"observation": self.observations.pop(0), "cursor": None}

    def verb(self, name):
        return 1, "", name

    def clock(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds

    def emit(self, line):
        del line


def _supervised_start(tmp_path):
    header, observations = read_trace(RECORDED)
    settings = DetectorSettings().with_overrides(SUPERVISOR_WINDOWS)
    trace = str(tmp_path / "start" / "trace.jsonl")
    options = WatchOptions(poll_s=header["poll_s"], settings=settings,
                           trace=TraceTarget(trace, "start-x", header["unit"], "start watched by its supervisor"))
    result = watch_start(_ReplayedHost(observations, header["poll_s"]), options, 1000.0)
    return result.assessment, trace


def _replay(*args):
    p = subprocess.run([PYTHON, BIN, "replay", *args], capture_output=True, text=True, cwd=ROOT, timeout=60)
    assert p.returncode == 0, p.stderr
    return json.loads(p.stdout.strip().splitlines()[-1])


def test_the_trace_header_records_the_settings_that_decided_and_the_code_version(tmp_path):
    dummy_decided, trace = _supervised_start(tmp_path)
    header, dummy_obs = read_trace(trace)
    assert header["settings"]["stall_idle_window_s"] == 60.0
    assert header["settings"]["stall_spin_window_s"] == DetectorSettings().stall_spin_window_s
    with open(os.path.join(ROOT, "galaxy.yml"), encoding="utf-8") as fh:
        version = next(line.split(":", 1)[1].strip() for line in fh if line.startswith("version:"))
    assert header["code"]["collection"] == version


def test_replay_of_a_supervised_start_reaches_the_supervisor_verdict(tmp_path):
    decided, trace = _supervised_start(tmp_path)
    assert decided.verdict == "stalled" and decided.reason_code == "stall_idle"
    replayed = _replay(trace)
    assert (replayed["verdict"], replayed["reason_code"], replayed["t"]) == (
        decided.verdict, decided.reason_code, decided.t)


def test_replay_with_default_settings_ignores_the_recorded_ones(tmp_path):
    dummy_decided, trace = _supervised_start(tmp_path)
    # The trace ends where the supervisor decided, before the default windows have passed.
    assert _replay(trace, "--settings-from", "default")["verdict"] == "undecided"


def test_an_override_applies_on_top_of_the_recorded_settings(tmp_path):
    decided, trace = _supervised_start(tmp_path)
    shorter = _replay(trace, "--set", "stall_frozen_window_s=30", "--set", "stall_idle_window_s=30")
    assert shorter["reason_code"] == "stall_idle" and shorter["t"] < decided.t
