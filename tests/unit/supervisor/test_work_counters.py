"""After ready, what counts as the server's work (work_counters.py), read from /metrics
bodies in the form SGLang serves them: several TP ranks, the realtime counter by mode."""
import pytest

from ansible_collections.sglang_ops.serving.plugins.module_utils.services import work_counters

LABELS = 'engine_type="unified",model_name="kimi-k2",tp_rank="%d"'


def body(prompt=0.0, generated=0.0, prefill_compute=0.0, running=(0, 0), queued=(0, 0)):
    """A /metrics body of a two-rank server: the tokenizer's counters once, the scheduler's
    gauges and realtime counter per rank."""
    lines = ["# HELP sglang:prompt_tokens_total Number of prefill tokens processed.",
             "# TYPE sglang:prompt_tokens_total counter",
             'sglang:prompt_tokens_total{model_name="kimi-k2"} %r' % prompt,
             'sglang:generation_tokens_total{model_name="kimi-k2"} %r' % generated]
    for rank in (0, 1):
        labels = LABELS % rank
        lines += ["sglang:num_running_reqs{%s} %r" % (labels, float(running[rank])),
                  "sglang:num_queue_reqs{%s} %r" % (labels, float(queued[rank])),
                  'sglang:realtime_tokens_total{%s,mode="prefill_compute"} %r' % (labels, prefill_compute / 2),
                  'sglang:realtime_tokens_total{%s,mode="decode"} 0.0' % labels]
    return "\n".join(lines) + "\n"


SATURATED = dict(prompt=1e6, prefill_compute=1e6, running=(4, 4), queued=(20, 20))


def test_a_reading_sums_every_rank():
    reading = work_counters.parse(body(**SATURATED))
    assert reading["sglang:num_running_reqs"] == 8 and reading["sglang:num_queue_reqs"] == 40
    assert reading["sglang:realtime_tokens_total"] == 1e6 and reading["sglang:generation_tokens_total"] == 0


@pytest.mark.parametrize("after, words", [
    # prefill-only saturation: prompts finish prefilled, nothing generated, the backlog steady
    (dict(SATURATED, prompt=1.1e6, prefill_compute=1.1e6),
     ["prompt tokens +100000", "tokens processed +100000"]),
    # one long prefill still running: only the scheduler's realtime counter has moved
    (dict(SATURATED, prefill_compute=1.05e6), ["tokens processed +50000"]),
    (dict(SATURATED, generated=5.0), ["generated tokens +5"]),
    # requests leaving the queue for the running batch, or finishing
    (dict(SATURATED, queued=(19, 20)), ["queued requests 40 -> 39"]),
    (dict(SATURATED, running=(4, 3)), ["running requests 8 -> 7"]),
])
def test_work_moving_is_named(after, words):
    assert work_counters.moved(work_counters.parse(body(**SATURATED)), work_counters.parse(body(**after))) == words


@pytest.mark.parametrize("after", [
    SATURATED,                                     # a queue that does not move, nothing else moving
    dict(SATURATED, queued=(25, 20)),              # requests arriving at a server that takes none
    dict(SATURATED, running=(5, 5)),
])
def test_a_backlog_that_stands_still_or_only_grows_is_no_work(after):
    assert work_counters.moved(work_counters.parse(body(**SATURATED)), work_counters.parse(body(**after))) == []


def test_no_reading_is_no_work():
    reading = work_counters.parse(body(**SATURATED))
    assert work_counters.moved(None, reading) == [] and work_counters.moved(reading, None) == []
    # a server without a series says nothing about it, either way
    bare = work_counters.parse('sglang:num_queue_reqs{tp_rank="0"} 3.0\n')
    assert bare["sglang:prompt_tokens_total"] is None
    assert work_counters.moved(bare, reading) == []
    assert work_counters.moved(reading, bare) == ["queued requests 40 -> 3"]
