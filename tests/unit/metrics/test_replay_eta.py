"""`bin/sglang-ops replay --eta`: the estimate per poll, the verdict JSON still last."""
import json
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
CORPUS = os.path.join(ROOT, "tests", "traces", "corpus")
WARM = os.path.join(CORPUS, "healthy_warm_cache.jsonl")
JITTER = os.path.join(ROOT, "tests", "traces", "healthy_jitter_missing_signals_tp8.jsonl")


def replay(*args):
    return subprocess.run([sys.executable, os.path.join(ROOT, "bin", "sglang-ops"), "replay", *args],
                          capture_output=True, text=True, cwd=ROOT, timeout=120)


def test_with_an_earlier_start_every_poll_has_an_eta_and_the_usual_time():
    p = replay(WARM, "--eta", "--history", JITTER)
    assert p.returncode == 0, p.stderr
    lines = p.stdout.strip().splitlines()
    assert json.loads(lines[-1])["verdict"] == "ready"
    polls = lines[:-1]
    assert len(polls) == 27
    assert all("usual 8m19s)" in line for line in polls[:-2]), polls
    assert polls[-1].split()[1:] == ["ready", "ready"]


def test_without_history_it_says_so():
    p = replay(WARM, "--eta")
    assert p.returncode == 0, p.stderr
    assert "ETA unknown (no earlier start)" in p.stdout.splitlines()[0]


def test_verbose_puts_the_eta_in_the_progress_line():
    p = replay(WARM, "--eta", "--verbose", "--history", JITTER)
    assert p.returncode == 0, p.stderr
    assert " \u00b7 ETA " in p.stdout.splitlines()[3]


def test_a_missing_history_path_is_one_clear_line():
    p = replay(WARM, "--eta", "--history", "/nonexistent/starts")
    assert p.returncode == 2
    assert p.stderr.strip() == "sglang-ops replay: --history /nonexistent/starts: no such file or folder"
