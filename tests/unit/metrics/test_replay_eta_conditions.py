"""`replay --eta` gives the estimate the live start gave: the watch records the load
conditions its ETA started from in the trace header, a line's own where they changed, and
the estimate it showed on every line; replay estimates from the same conditions."""
import json
import os
import shutil
import subprocess
import sys

import pytest

from ansible_collections.sglang_ops.serving.plugins.module_utils.records.eta import LoadConditions
from ansible_collections.sglang_ops.serving.plugins.module_utils.records.start_history import record_from_trace
from ansible_collections.sglang_ops.serving.plugins.module_utils.records.trace_format import (
    TraceFormatError, TraceWriter, read_trace, trace_header)
from ansible_collections.sglang_ops.serving.plugins.module_utils.services.start_outlook import (
    StartOutlook, residency_conditions)
from ansible_collections.sglang_ops.serving.plugins.module_utils.services.start_watch import (
    TraceTarget, WatchOptions, watch_start)
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.shared.replay import eta_history

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
BIN = os.path.join(ROOT, "bin", "sglang-ops")
PYTHON = shutil.which("python3") or sys.executable
COLD = os.path.join(ROOT, "tests", "traces", "corpus", "healthy_cold_cache_silent.jsonl")
RECORDED_MODEL = "/models/Kimi-K2.6"
FALLBACK_AT_POLL = 20          # the engine says it fell back to a disk load at this poll


class _ReplayedHost:
    """The watch's host access serving a recorded start's observations one poll at a time;
    at FALLBACK_AT_POLL the start's kind changes (as the supervisor's reading of the engine's
    lines changes it before the poll's estimate)."""

    def __init__(self, observations, outlook):
        self.observations, self.outlook, self.now, self.polls = list(observations), outlook, 1000.0, 0

    def probe(self, cursor, stacks, since_epoch_s):
        del cursor, stacks, since_epoch_s
        self.polls += 1
        if self.polls == FALLBACK_AT_POLL:
            self.outlook.restart_kind("cold_fallback", "fallback_to_disk")
        return {"observation": self.observations.pop(0), "cursor": None}

    def clock(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds

    def emit(self, line):
        del line


def _model_folder(tmp_path):
    folder = tmp_path / "Kimi-K2.6"
    folder.mkdir()
    for i in range(3):
        (folder / ("model-%05d-of-00003.safetensors" % (i + 1))).write_bytes(os.urandom(64 * 1024))
    return str(folder)


def _naming(observations, model):
    """The recorded start, its server_args naming `model` (a folder this test can read)."""
    text = json.dumps(observations).replace(RECORDED_MODEL, model)
    return json.loads(text)


@pytest.fixture()
def live_start(tmp_path):
    """A cold start watched live with the ETA (history: one earlier start of the same host),
    the page-cache residency read from a real model folder when SGLang names it, attached to
    the weight cache until the engine falls back to disk; its trace and the history's."""
    header, observations = read_trace(COLD)
    model = _model_folder(tmp_path)
    observations = _naming(observations, model)
    history = tmp_path / "history"
    history.mkdir()
    earlier = str(history / "earlier.jsonl")
    with TraceWriter(earlier, dict(header, name="earlier")) as writer:
        for obs in observations:
            writer.append(obs)
    outlook = StartOutlook(header["unit"], [record_from_trace(header, observations)],
                           read_residency=lambda path: residency_conditions(path))
    outlook.weight_cache = True
    outlook.begin_attempt(1)
    trace = str(tmp_path / "start" / "trace.jsonl")
    options = WatchOptions(poll_s=header["poll_s"], outlook=outlook,
                           trace=TraceTarget(trace, "start-x", header["unit"], "start watched with its ETA"))
    result = watch_start(_ReplayedHost(observations, outlook), options, 1000.0)
    assert result.ready
    return trace, earlier, model


def _replay(*args):
    p = subprocess.run([PYTHON, BIN, "replay", *args], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert p.returncode == 0, p.stderr
    return p.stdout.strip().splitlines()


def test_the_header_records_the_conditions_and_a_line_where_they_changed(live_start):
    trace, dummy_earlier, model = live_start
    header, observations = read_trace(trace)
    size = sum(os.path.getsize(os.path.join(model, n)) for n in os.listdir(model))
    recorded = LoadConditions.from_dict(header["load_conditions"])
    assert recorded.model_bytes == size and recorded.weight_cache is True
    changed = [(i, o["load_conditions"]) for i, o in enumerate(observations) if "load_conditions" in o]
    assert [i for i, dummy in changed] == [FALLBACK_AT_POLL - 1]
    assert changed[0][1]["restart_kind"] == "cold_fallback" and changed[0][1]["weight_cache"] is False
    assert all("eta" in o for o in observations)


def test_replay_gives_the_estimate_the_live_start_gave_at_every_poll(live_start):
    trace, earlier, dummy_model = live_start
    lines = _replay(trace, "--eta", "--history", earlier)
    polls = len(read_trace(trace)[1])
    assert lines[0].startswith("load conditions (trace header): weights attached from the weight cache")
    assert any("load conditions: " in line and "cold_fallback restart" in line for line in lines)
    assert lines[-2] == "ETA as the live start estimated it at %d of %d polls" % (polls, polls)
    assert json.loads(lines[-1])["verdict"] == "ready"


def test_without_the_recorded_conditions_the_replay_no_longer_gives_the_live_estimate(live_start, tmp_path):
    trace, earlier, dummy_model = live_start
    header, observations = read_trace(trace)
    header.pop("load_conditions")
    stripped = str(tmp_path / "stripped.jsonl")
    with TraceWriter(stripped, header) as writer:
        for obs in observations:
            writer.append({k: v for k, v in obs.items() if k != "load_conditions"})
    said = _replay(stripped, "--eta", "--history", earlier)[-2]
    agreed, total = [int(w) for w in said.split(" at ")[1].split(" polls")[0].split(" of ")]
    assert total == len(observations) and agreed < total, said


def test_a_header_with_bad_conditions_is_a_malformed_trace(tmp_path):
    path = tmp_path / "bad.jsonl"
    header = trace_header("x", "u", 5, 1, load_conditions={"model_bytes": "548 GB"})
    path.write_text(json.dumps(header) + "\n" + json.dumps({"t": 0.0}) + "\n")
    with pytest.raises(TraceFormatError, match=":1: load_conditions.model_bytes must be a byte count"):
        read_trace(str(path))
    path.write_text(json.dumps(trace_header("x", "u", 5, 1)) + "\n"
                    + json.dumps({"t": 0.0, "load_conditions": {"restart_kind": "hot"}}) + "\n")
    with pytest.raises(TraceFormatError, match=":2: load_conditions.restart_kind must be one of"):
        read_trace(str(path))


def test_a_history_folder_holding_the_trace_gives_the_starts_before_it(tmp_path):
    header, observations = read_trace(COLD)
    names = ["20261201T000000Z", "20261202T000000Z", "20261203T000000Z"]
    for name in names:
        with TraceWriter(str(tmp_path / name / "trace.jsonl"), dict(header, name=name)) as writer:
            for obs in observations:
                writer.append(obs)
    middle = str(tmp_path / names[1] / "trace.jsonl")
    assert [r["source"] for r in eta_history(middle, [str(tmp_path)])] == [str(tmp_path / names[0] / "trace.jsonl")]
    newest = str(tmp_path / names[2] / "trace.jsonl")
    assert len(eta_history(newest, [str(tmp_path)])) == 2
