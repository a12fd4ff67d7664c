"""The work a serving SGLang server shows on /metrics, read at each liveness check after
ready: a server whose one-token completion goes unanswered but whose work moves is busy,
not hung (docs/architecture.md, "Every start watched").

Names as SGLang exports them (python/sglang/srt/metrics/collector.py):

- counters that only rise: `sglang:prompt_tokens_total` and `sglang:generation_tokens_total`
  (the tokenizer's, added when a request finishes), `sglang:realtime_tokens_total{mode}`
  (the scheduler's, prefill_compute / prefill_cache / decode, added every log interval:
  a long prefill moves it before any request finishes);
- gauges the scheduler sets: `sglang:num_running_reqs`, `sglang:num_queue_reqs`.

Every series is summed over its label sets (TP/DP ranks, modes). A counter moves when it
rose; a gauge moves when it fell (requests left the queue or finished): a count that only
grows is requests arriving, which a hung server sees as well, and one that stays put is no
work at all.
"""
from ansible_collections.sglang_ops.serving.plugins.module_utils.host import http_check
from ansible_collections.sglang_ops.serving.plugins.module_utils.records import prometheus_text

# (metric, words)
COUNTERS = (("sglang:prompt_tokens_total", "prompt tokens"),
            ("sglang:generation_tokens_total", "generated tokens"),
            ("sglang:realtime_tokens_total", "tokens processed"))
GAUGES = (("sglang:num_running_reqs", "running requests"),
          ("sglang:num_queue_reqs", "queued requests"))
READ_TIMEOUT_S = 5.0


def parse(text):
    """{metric: sum or None} of the work series in a /metrics body."""
    return {name: prometheus_text.sample_sum(text, name) for name, _words in COUNTERS + GAUGES}


def read(base_url, timeout_s=READ_TIMEOUT_S):
    """The work series the server serves now, or None when /metrics does not answer (not
    enabled, or the server does not answer it)."""
    text = http_check.get_text(base_url, "/metrics", timeout_s)
    return parse(text) if text else None


def moved(before, after):
    """What moved from one reading to the next, in words ("prompt tokens +50000", "queued
    requests 40 -> 38"); [] when nothing did or a reading is missing."""
    if not before or not after:
        return []
    words = []
    for name, what in COUNTERS:
        was, now = before.get(name), after.get(name)
        if was is not None and now is not None and now > was:
            words.append("%s +%g" % (what, now - was))
    for name, what in GAUGES:
        was, now = before.get(name), after.get(name)
        if was is not None and now is not None and now < was:
            words.append("%s %g -> %g" % (what, was, now))
    return words
