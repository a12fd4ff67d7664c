"""The restart procedure and trace writer with the real detector, on recorded starts."""
import json
import os
import subprocess
import sys

import pytest

from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.detector import Detector
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.detector_settings import DetectorSettings
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.progress_line import progress_line
from ansible_collections.sglang_ops.serving.plugins.module_utils.records.trace_format import (
    TraceWriter, read_trace, relative_observation, trace_header)

from ansible_collections.sglang_ops.serving.tests.unit.restart.restart_fakes import Clock, FakeHost, make_procedure

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
PROJECT_TRACES = os.path.join(ROOT, "tests", "traces")
CORPUS_TRACES = os.path.join(PROJECT_TRACES, "corpus")


def _trace(name):
    for folder in (PROJECT_TRACES, CORPUS_TRACES):
        path = os.path.join(folder, name)
        if os.path.exists(path):
            return path
    pytest.skip("trace %s not available" % name)


class ReplayProbe:
    """Answers each poll with the next observation of a recorded trace, as the probe
    would: epoch `ts`, log records with `ts`; the clock jumps to the observation's time."""

    def __init__(self, clock, observations_per_attempt):
        self.clock = clock
        self.attempts = [list(obs) for obs in observations_per_attempt]
        self.calls = []
        self.t0 = None

    def __call__(self, module_args):
        self.calls.append(module_args)
        if "since_epoch_s" in module_args:  # first poll of an attempt
            self.current = self.attempts.pop(0)
            self.t0 = module_args["since_epoch_s"]
        obs = dict(self.current.pop(0)) if len(self.current) > 1 else dict(self.current[0])
        self.clock.now = max(self.clock.now, self.t0 + obs["t"])
        obs["ts"] = self.t0 + obs.pop("t")
        obs["log"] = [dict(r, ts=self.t0 + r["t"]) for r in obs.get("log", [])]
        for r in obs["log"]:
            r.pop("t")
        return {"observation": obs, "cursor": "c%d" % len(self.calls), "missing": {}, "cost": {"cpu_s": 0.05}}


def _procedure_on(tmp_path, attempts, **overrides):
    clock = Clock()
    proc, host, probe, clock, lines, _ = make_procedure(
        tmp_path, [], clock=clock, probe=ReplayProbe(clock, attempts), detector=Detector, poll_s=10.0, **overrides)
    return proc, host, lines


def test_recorded_stall_is_detected_restarted_and_a_recorded_warm_start_is_ready(tmp_path):
    _, stalled_obs = read_trace(_trace("stall_idle_after_load.jsonl"))
    _, healthy_obs = read_trace(_trace("healthy_warm_cache.jsonl"))
    proc, host, lines = _procedure_on(tmp_path, [stalled_obs, healthy_obs])
    res = proc.restart()
    assert res["outcome"] == "ready"
    first, second = res["attempts"]
    assert first["verdict"] == "stalled" and first["phase"] == "post_load"
    assert first["reason_code"].startswith("stall_") and first["action"] == "restarted"
    assert second["action"] == "ready"
    assert host.events == ["stop", "start", "stop", "start"]
    # one progress line per poll, each naming the phase
    assert any(line.startswith("post_load") for line in lines)


def test_recorded_packing_error_that_repeats_is_handed_over_when_no_attempt_is_left(tmp_path):
    _, obs = read_trace(_trace("seed_packing_error.jsonl"))
    proc, host, _ = _procedure_on(tmp_path, [obs, obs], max_attempts=2)
    res = proc.restart()
    assert res["outcome"] == "gave_up" and res["failed"]
    codes = [a["reason_code"] for a in res["attempts"]]
    assert len(codes) == 2 and codes[0] == codes[1]
    assert res["gave_up_because"] == "same failure twice: %s" % codes[0]


def test_progress_line_names_phase_and_elapsed_time():
    detector = Detector(DetectorSettings())
    _, obs = read_trace(_trace("healthy_warm_cache.jsonl"))
    lines = [progress_line(detector.observe(o)) for o in obs[:5]]
    assert len(lines) == 5
    assert all(" \u00b7 " in line for line in lines)
    assert lines[-1].split(" \u00b7 ")[0].split()[0] in (
        "starting", "distributed_init", "weight_load", "post_load", "kv_cache", "jit_compile",
        "cuda_graph", "http_server", "warmup", "ready")


def test_detector_override_with_unknown_name_is_refused_before_anything_runs():
    with pytest.raises(ValueError, match="unknown detector setting"):
        DetectorSettings().with_overrides({"stall_idel_window_s": 30})


def _replay(path):
    out = subprocess.run([sys.executable, os.path.join(ROOT, "bin", "sglang-ops"), "replay", path],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_a_written_trace_replays_like_the_recorded_one(tmp_path):
    src = _trace("stall_idle_after_load.jsonl")
    header, observations = read_trace(src)
    t0 = 1_795_000_000.0
    out = str(tmp_path / "attempt-1" / "trace.jsonl")
    with TraceWriter(out, trace_header("x", header["unit"], header["poll_s"], header["gpus"])) as w:
        for obs in observations:
            as_probe = dict(obs, ts=t0 + obs["t"], log=[dict(r, ts=t0 + r["t"]) for r in obs.get("log", [])])
            del as_probe["t"]
            for r in as_probe["log"]:
                del r["t"]
            w.append(relative_observation(as_probe, t0))
    mine, original = _replay(out), _replay(src)
    assert (mine["verdict"], mine["t"], mine["phase"]) == (original["verdict"], original["t"], original["phase"])


def test_a_peer_that_never_comes_is_handed_over_at_once_naming_the_node(tmp_path):
    """Node 1 of two, node 0 never up: the probe's `peers` reading (as on the host) says where the
    nodes meet and that nothing answers there; no restart of this node, the summary names node 0."""
    _, obs = read_trace(_trace("failed_peer_never_comes_dist_timeout.jsonl"))
    peers = {"nnodes": 2, "node_rank": 1, "dist_init_addr": "10.0.0.1:20000", "dist_timeout_s": 600,
             "nodes": [{"node": 0, "addr": "10.0.0.1:20000", "state": "refused"}]}
    proc, host, lines = _procedure_on(tmp_path, [[dict(o, peers=peers) for o in obs]])
    res = proc.restart()
    assert res["outcome"] == "gave_up" and res["reason_code"] == "peer_missing"
    assert [a["action"] for a in res["attempts"]] == ["handed_over"] and host.events == ["stop", "start"]
    assert res["missing_node"] == "node 0" and "The node that never came: node 0." in res["msg"]
    assert "a restart cannot fix peer_missing" in res["gave_up_because"]
    assert any("waiting for node 0 at 10.0.0.1:20000: refused" in line for line in lines)
    with open(res["run_json"]) as fh:
        assert json.load(fh)["missing_node"] == "node 0"
