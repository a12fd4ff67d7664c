"""Every labelled trace of the repository (tests/traces and its corpus/) against its
expect label, judged with the project's scoring rules (bench/scoring/judge.py)."""
import glob
import os
import subprocess
import sys

import pytest

from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.detector_settings import DetectorSettings
from ansible_collections.sglang_ops.serving.plugins.module_utils.records.trace_format import read_trace

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
OWN = sorted(glob.glob(os.path.join(ROOT, "tests", "traces", "*.jsonl")))
CORPUS = sorted(glob.glob(os.path.join(ROOT, "tests", "traces", "corpus", "*.jsonl")))
sys.path[:0] = [ROOT]
from bench.scoring.judge import judge  # noqa: E402
from bench.scoring.label import Label  # noqa: E402
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.shared.replay import replay  # noqa: E402


def _check(path):
    header, obs = read_trace(path)
    res = replay(header, obs, DetectorSettings())
    judgement = judge(Label.of(header, obs), res)
    assert judgement.ok, "%s: %s (%s)" % (header["name"], judgement.why, res["reason"])
    assert judgement.phase_right is not False, (res["phase"], header["expect"]["phase"])


def test_the_corpus_has_at_least_twenty_labelled_traces():
    labelled = [p for p in OWN if read_trace(p)[0].get("expect")]
    assert len(labelled) >= 20


@pytest.mark.parametrize("path", OWN, ids=os.path.basename)
def test_own_trace_meets_its_label(path):
    _check(path)


@pytest.mark.parametrize("path", CORPUS, ids=os.path.basename)
def test_corpus_trace_meets_its_label(path):
    _check(path)


def test_committed_traces_are_what_the_generator_writes(tmp_path):
    gen = os.path.join(ROOT, "tests", "traces", "generate.py")
    p = subprocess.run([sys.executable, gen, "--check"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
