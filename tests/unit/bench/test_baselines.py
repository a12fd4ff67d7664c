"""bench/scoring/baselines.py: the reference watchers, on traces built in the test."""
import pytest

from bench.scoring.baselines import watch

from bench_fixtures import obs


def silent_start(n=40, poll_s=10.0, **kw):
    return [obs(i * poll_s, **kw) for i in range(n)]


def test_every_watcher_declares_ready_on_an_answered_completion():
    observations = silent_start(3) + [obs(30, completion_ok=True)]
    for kind in ("deadline", "silence", "activity"):
        assert watch(kind, 1000, observations)["verdict"] == "ready"


def test_every_watcher_calls_a_unit_that_is_not_running_failed():
    observations = silent_start(3) + [obs(30, active="failed")]
    assert watch("deadline", 1000, observations) == {"verdict": "failed", "t": 30.0, "phase": None,
                                                     "reason": "unit not running"}


def test_the_deadline_gives_up_at_its_time_whatever_moves():
    observations = [obs(i * 10, log=[(i * 10, "busy")], read_bytes=i * 10**9) for i in range(100)]
    assert watch("deadline", 300, observations)["t"] == 300.0


def test_silence_gives_up_that_long_after_the_last_journal_line():
    observations = [obs(0, log=[(0, "a")]), obs(10, log=[(10, "b")])] + silent_start(40)[2:]
    assert watch("silence", 120, observations) == {"verdict": "stalled", "t": 130.0, "phase": None,
                                                   "reason": "log silence"}


@pytest.mark.parametrize("moving, stalled_t", [
    ({"read_bytes": 2 * 10**7}, 220.0),    # 2 MB/s of reads is activity
    ({"mem_mib": 64}, 220.0),              # 64 MiB more GPU memory is activity
    ({"read_bytes": 5 * 10**6}, 120.0),    # 0.5 MB/s is not
    ({"mem_mib": 63}, 120.0),              # nor 63 MiB
])
def test_activity_counts_reads_of_1_mb_s_and_gpu_memory_steps_of_64_mib(moving, stalled_t):
    def at(i):
        step = {k: v * i if i <= 10 else v * 10 for k, v in moving.items()}
        return obs(i * 10.0, **step)
    assert watch("activity", 120, [at(i) for i in range(40)])["t"] == stalled_t


def test_a_trace_that_ends_first_is_undecided():
    assert watch("deadline", 10**6, silent_start(3))["verdict"] == "undecided"


def test_an_unknown_watcher_is_refused():
    with pytest.raises(ValueError, match="unknown reference watcher"):
        watch("patience", 10, silent_start(2))
