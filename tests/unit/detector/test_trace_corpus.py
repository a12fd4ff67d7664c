"""Every labelled trace (../shared/traces and tests/traces) against its expect label,
judged with ../shared/tools/score.py's own rules."""
import glob
import importlib.util
import os
import subprocess
import sys

import pytest

from ansible_collections.sglang_ops.serving.plugins.module_utils.detector_settings import DetectorSettings
from ansible_collections.sglang_ops.serving.plugins.module_utils.trace_format import read_trace

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SHARED = os.path.join(os.path.dirname(ROOT), "shared")
OWN = sorted(glob.glob(os.path.join(ROOT, "tests", "traces", "*.jsonl")))
SHARED_TRACES = sorted(glob.glob(os.path.join(SHARED, "traces", "*.jsonl")))
sys.path[:0] = [ROOT]
from sglang_ops_cli.commands.replay import replay  # noqa: E402


def _judge():
    """score.py's judge(); a local copy of its rules when ../shared is absent."""
    path = os.path.join(SHARED, "tools", "score.py")
    if os.path.exists(path):
        spec = importlib.util.spec_from_file_location("shared_score", path)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        return mod.judge

    def judge(header, obs, res):
        exp, poll = header.get("expect", {}), header.get("poll_s", 10)
        v, t = res["verdict"], res["t"]
        if exp["outcome"] == "ready":
            return v == "ready", v, None
        if v not in ("stalled", "failed") or t < exp["onset_t"]:
            return False, v, None
        lat = t - exp["onset_t"]
        if exp["outcome"] == "failed":
            return lat <= 2 * poll + 1, v, lat
        return lat <= (600 if any("stacks" in o for o in obs) else 1800 + 2 * poll), v, lat
    return judge


JUDGE = _judge()


def _check(path):
    header, obs = read_trace(path)
    res = replay(header, obs, DetectorSettings())
    ok, why, _ = JUDGE(header, obs, res)
    assert ok, "%s: %s (%s)" % (header["name"], why, res["reason"])
    want_phase = header.get("expect", {}).get("phase")
    if want_phase:
        assert res["phase"] == want_phase


def test_the_corpus_has_at_least_twenty_labelled_traces():
    labelled = [p for p in OWN if read_trace(p)[0].get("expect")]
    assert len(labelled) >= 20


@pytest.mark.parametrize("path", OWN, ids=os.path.basename)
def test_own_trace_meets_its_label(path):
    _check(path)


@pytest.mark.skipif(not SHARED_TRACES, reason="../shared is absent")
@pytest.mark.parametrize("path", SHARED_TRACES, ids=os.path.basename)
def test_shared_trace_meets_its_label(path):
    _check(path)


def test_committed_traces_are_what_the_generator_writes(tmp_path):
    gen = os.path.join(ROOT, "tests", "traces", "generate.py")
    p = subprocess.run([sys.executable, gen, "--check"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
