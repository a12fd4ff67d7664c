"""The HAProxy runtime API logic against a real HAProxy: drain, ready, maint, idempotence,
check mode, sessions, and one-line errors."""
import threading
import time
import urllib.request

import pytest

from ansible_collections.sglang_ops.serving.plugins.module_utils.host import haproxy_runtime
from ansible_collections.sglang_ops.serving.plugins.module_utils.host.haproxy_runtime import RuntimeApiError

from .conftest import NO_HAPROXY

pytestmark = NO_HAPROXY


def test_a_fresh_server_reads_ready_with_no_sessions(haproxy):
    state = haproxy_runtime.server_state(haproxy.admin_socket, "sglang", "gpu-a")
    assert state == {"state": "ready", "status": "no check", "sessions": 0, "queued": 0}


def test_drain_then_ready_each_change_once(haproxy):
    first = haproxy_runtime.set_server_state(haproxy.admin_socket, "sglang", "gpu-a", "drain")
    assert first["changed"] is True and first["previous_state"] == "ready" and first["state"] == "drain"
    assert haproxy.status("gpu-a") == "DRAIN" and haproxy.status("gpu-b") == "no check"
    again = haproxy_runtime.set_server_state(haproxy.admin_socket, "sglang", "gpu-a", "drain")
    assert again["changed"] is False and again["state"] == "drain"
    back = haproxy_runtime.set_server_state(haproxy.admin_socket, "sglang", "gpu-a", "ready")
    assert back["changed"] is True and back["previous_state"] == "drain"
    assert haproxy.status("gpu-a") == "no check"
    assert haproxy_runtime.set_server_state(haproxy.admin_socket, "sglang", "gpu-a", "ready")["changed"] is False


def test_maint_from_drain_and_back_to_ready(haproxy):
    haproxy_runtime.set_server_state(haproxy.admin_socket, "sglang", "gpu-b", "drain")
    maint = haproxy_runtime.set_server_state(haproxy.admin_socket, "sglang", "gpu-b", "maint")
    assert maint["changed"] is True and maint["previous_state"] == "drain" and maint["state"] == "maint"
    assert haproxy.status("gpu-b") == "MAINT"
    assert haproxy_runtime.set_server_state(haproxy.admin_socket, "sglang", "gpu-b", "maint")["changed"] is False
    ready = haproxy_runtime.set_server_state(haproxy.admin_socket, "sglang", "gpu-b", "ready")
    assert ready["changed"] is True and haproxy.status("gpu-b") == "no check"


def test_check_mode_says_what_would_change_and_changes_nothing(haproxy):
    would = haproxy_runtime.set_server_state(haproxy.admin_socket, "sglang", "gpu-a", "drain", check_mode=True)
    assert would["changed"] is True and would["state"] == "drain" and would["previous_state"] == "ready"
    assert haproxy.status("gpu-a") == "no check"


def test_the_tcp_stats_socket_works_as_the_unix_one(haproxy):
    result = haproxy_runtime.set_server_state(haproxy.tcp_socket, "sglang", "gpu-b", "drain")
    assert result["changed"] is True and haproxy.status("gpu-b") == "DRAIN"


def test_a_drained_server_keeps_its_session_and_reports_it(haproxy):
    # both replicas answer /slow after 2 s; gpu-b in maint so the request goes to gpu-a
    haproxy_runtime.set_server_state(haproxy.admin_socket, "sglang", "gpu-b", "maint")
    answers = []
    url = "http://127.0.0.1:%d/slow" % haproxy.frontend_port
    request = threading.Thread(target=lambda: answers.append(urllib.request.urlopen(url, timeout=10).status))
    request.start()
    try:
        deadline = time.monotonic() + 1.5
        while (haproxy_runtime.server_state(haproxy.admin_socket, "sglang", "gpu-a")["sessions"] != 1
               and time.monotonic() < deadline):
            time.sleep(0.02)
        drained = haproxy_runtime.set_server_state(haproxy.admin_socket, "sglang", "gpu-a", "drain")
        assert drained["sessions"] == 1 and drained["status"] == "DRAIN"
    finally:
        request.join()
    assert answers == [200]
    assert haproxy_runtime.server_state(haproxy.admin_socket, "sglang", "gpu-a")["sessions"] == 0


def test_unknown_server_and_backend_fail_with_one_line(haproxy):
    with pytest.raises(RuntimeApiError) as err:
        haproxy_runtime.set_server_state(haproxy.admin_socket, "sglang", "gpu-z", "drain")
    assert str(err.value) == "HAProxy backend 'sglang' has no server 'gpu-z' (it has: gpu-a, gpu-b)"
    with pytest.raises(RuntimeApiError) as err:
        haproxy_runtime.server_state(haproxy.admin_socket, "nosuch", "gpu-a")
    assert "has no backend 'nosuch'" in str(err.value) and "\n" not in str(err.value)


def test_a_socket_that_is_not_there_fails_with_one_line(tmp_path):
    with pytest.raises(RuntimeApiError) as err:
        haproxy_runtime.server_state(str(tmp_path / "none.sock"), "sglang", "gpu-a")
    assert str(err.value).startswith("cannot reach the HAProxy runtime API at %s: " % (tmp_path / "none.sock"))
    assert "No such file" in str(err.value)


def test_a_socket_without_level_admin_is_refused_by_name(haproxy):
    with pytest.raises(RuntimeApiError) as err:
        haproxy_runtime.set_server_state(haproxy.user_socket, "sglang", "gpu-a", "drain")
    assert "Permission denied" in str(err.value) and "level admin" in str(err.value)
    assert haproxy.status("gpu-a") == "no check"


@pytest.mark.parametrize("text, expected", [("/run/haproxy/admin.sock", "unix"), ("10.0.0.5:9999", ("10.0.0.5", 9999)),
                                            ("[::1]:9999", ("::1", 9999))])
def test_socket_addresses(text, expected):
    family, address = haproxy_runtime.parse_address(text)
    assert address == (text if expected == "unix" else expected)


def test_a_bad_port_is_named():
    with pytest.raises(RuntimeApiError, match="neither a unix socket path nor HOST:PORT"):
        haproxy_runtime.parse_address("lb:stats")
