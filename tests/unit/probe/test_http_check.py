"""HTTP checks against real sockets on ephemeral ports."""
import json
import socket
from http.server import BaseHTTPRequestHandler

import pytest

from ansible_collections.sglang_ops.serving.plugins.module_utils.host import api_key_config, http_check
from ansible_collections.sglang_ops.serving.tests.unit.probe.conftest import LoopbackHTTP


class _Server(LoopbackHTTP):
    def __init__(self, health_status=200, key=None):
        self.health_status, self.key, self.seen_auth = health_status, key, []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def _send(self, code, obj):
                body = json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_GET(self):
                self._send(outer.health_status, {})

            def do_POST(self):
                req = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                auth = self.headers.get("Authorization")
                outer.seen_auth.append(auth)
                if outer.key and auth != "Bearer " + outer.key:
                    self._send(401, {"detail": "unauthorized"})
                    return
                assert req["max_tokens"] == 1 and req["temperature"] == 0
                self._send(200, {"choices": [{"index": 0, "text": " x", "finish_reason": "length"}]})

        super().__init__(Handler)


@pytest.fixture
def server(closing):
    return lambda **kw: closing(_Server(**kw))


def test_health_status_codes_come_back_as_ints(server):
    assert http_check.get_health(server(health_status=200).url) == 200
    assert http_check.get_health(server(health_status=503).url) == 503


def test_refused_connection_is_none():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    assert http_check.get_health("http://127.0.0.1:%d" % port, timeout_s=1.0) is None


def test_listening_but_silent_server_is_timeout():
    # A stopped server: the kernel still accepts connections, nobody answers.
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(5)
    try:
        assert http_check.get_health("http://127.0.0.1:%d" % s.getsockname()[1], timeout_s=0.5) == "timeout"
    finally:
        s.close()


HOSTILE_KEY = "k$y with \"quotes\", 'single', \\ and `ticks` %n #no: comment"


def test_completion_sends_the_key_from_the_config_file_as_bearer(server, tmp_path):
    config = tmp_path / "unit.yaml"
    config.write_text("# SGLang --config\n" + api_key_config.render(HOSTILE_KEY) + "\n")
    key, why = api_key_config.read_api_key(str(config))
    assert (key, why) == (HOSTILE_KEY, None)
    srv = server(key=HOSTILE_KEY)
    res = http_check.post_completion(srv.url, "m", key, timeout_s=5.0)
    assert res["ok"] is True and res["status"] == 200 and res["ms"] >= 0
    assert srv.seen_auth == ["Bearer " + HOSTILE_KEY]
    assert HOSTILE_KEY not in json.dumps(res)


def test_completion_without_the_right_key_is_not_ok(server):
    res = http_check.post_completion(server(key="s3cret").url, "m", None, timeout_s=5.0)
    assert res["ok"] is False and res["status"] == 401


def test_unreadable_config_file_gives_a_reason(tmp_path):
    key, why = api_key_config.read_api_key(str(tmp_path / "absent.yaml"))
    assert key is None and "unreadable" in why
