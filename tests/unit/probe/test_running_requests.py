"""The running_requests read: SGLang's /metrics over real HTTP on ephemeral ports, and the
Prometheus text it is parsed from."""
import socket
from http.server import BaseHTTPRequestHandler

import pytest

from ansible_collections.sglang_ops.serving.plugins.module_utils.records import prometheus_text
from ansible_collections.sglang_ops.serving.plugins.module_utils.host.probe import ProbeRequest, probe
from ansible_collections.sglang_ops.serving.tests.unit.probe.conftest import LoopbackHTTP

# What SGLang 0.5.23 serves, two schedulers (label sets) and one label value with a space
# and a brace; num_running_reqs also appears inside another metric's name.
METRICS = """\
# HELP sglang:num_running_reqs The number of running requests.
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{model_name="kimi-k2",tp_rank="0"} 3.0
sglang:num_running_reqs{model_name="kimi {k2}",tp_rank="1"} 2.0
# HELP sglang:num_queue_reqs The number of requests in the waiting queue.
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{model_name="kimi-k2",tp_rank="0"} 1.0
sglang:num_queue_reqs{model_name="kimi-k2",tp_rank="1"} 0.0
sglang:num_running_reqs_total{model_name="kimi-k2"} 99.0
"""


class _Metrics(LoopbackHTTP):
    def __init__(self, status=200, body=METRICS):
        self.status, self.body, self.paths = status, body, []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_GET(self):
                outer.paths.append(self.path)
                data = outer.body.encode() if outer.status == 200 else b'{"detail":"Not Found"}'
                self.send_response(outer.status)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        super().__init__(Handler)


@pytest.fixture
def metrics_server(closing):
    return lambda **kw: closing(_Metrics(**kw))


def _read(base_url, timeout_s=3.0):
    res = probe(ProbeRequest(pid=1, base_url=base_url, observation=False, running_requests=True,
                             http_timeout_s=timeout_s))
    return res["running_requests"], res["missing"].get("running_requests")


def test_samples_are_summed_over_label_sets_and_other_names_are_left_out():
    assert prometheus_text.sample_sum(METRICS, "sglang:num_running_reqs") == 5.0
    assert prometheus_text.sample_sum(METRICS, "sglang:num_queue_reqs") == 1.0
    assert prometheus_text.sample_sum("up 1\nup 2 1700000000000\n", "up") == 3.0
    assert prometheus_text.sample_sum(METRICS, "sglang:gen_throughput") is None
    assert prometheus_text.sample_sum('x{a="b} 7"} 2\n', "x") == 2.0


def test_running_and_queued_come_from_the_servers_metrics(metrics_server):
    server = metrics_server()
    assert _read(server.url) == ({"running": 5, "queued": 1}, None)
    assert server.paths == ["/metrics"]


def test_an_idle_server_reads_zero(metrics_server):
    server = metrics_server(body=METRICS.replace(" 3.0", " 0.0").replace(" 2.0", " 0").replace(" 1.0", " 0"))
    assert _read(server.url) == ({"running": 0, "queued": 0}, None)


def test_metrics_off_is_null_with_the_reason(metrics_server):
    server = metrics_server(status=404)
    counts, why = _read(server.url)
    assert counts is None and "404" in why and "--enable-metrics" in why


def test_a_server_that_does_not_answer_is_null_with_the_reason():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    counts, why = _read("http://127.0.0.1:%d" % port)
    assert counts is None and why == "nothing answers at http://127.0.0.1:%d/metrics" % port


def test_a_silent_server_times_out():
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        counts, why = _read("http://127.0.0.1:%d" % listener.getsockname()[1], timeout_s=0.3)
    assert counts is None and "did not answer within 0.3 s" in why


def test_metrics_without_the_gauges_are_null_with_the_reason(metrics_server):
    server = metrics_server(body="# nothing of SGLang here\nprocess_cpu_seconds_total 1.5\n")
    counts, why = _read(server.url)
    assert counts is None and why.endswith("has no sglang:num_running_reqs")


def test_not_asked_for_is_not_read(metrics_server):
    server = metrics_server()
    res = probe(ProbeRequest(pid=1, base_url=server.url, observation=False))
    assert "running_requests" not in res and server.paths == []
