"""The probe's `peers` reading: a real TCP connect to where the nodes meet (--dist-init-addr)."""
import socket

import pytest

from ansible_collections.sglang_ops.serving.plugins.module_utils.host import peer_probe, probe


@pytest.fixture
def listener():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(4)
    yield sock.getsockname()[1]
    sock.close()


@pytest.fixture
def closed_port():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()     # nothing listens there now: a connect is refused
    return port


def test_an_address_with_a_listener_is_open_and_one_without_refused(listener, closed_port):
    assert peer_probe.connect_state("127.0.0.1:%d" % listener) == "open"
    assert peer_probe.connect_state("127.0.0.1:%d" % closed_port) == "refused"


def test_addresses_that_are_not_one_are_unreachable():
    assert peer_probe.split_addr("[::1]:20000") == ("::1", 20000)
    assert peer_probe.connect_state("no-port") == "unreachable"
    assert peer_probe.connect_state("host.invalid:20000", timeout_s=1.0) == "unreachable"


def test_the_peers_reading_comes_from_the_main_processes_command_line(listener, closed_port):
    cmd = "python3 -m sglang.launch_server --nnodes 2 --node-rank 1 --dist-init-addr 127.0.0.1:%d --dist-timeout 600"
    up = probe.read_peers(cmd % listener)
    assert up == {"nnodes": 2, "node_rank": 1, "dist_init_addr": "127.0.0.1:%d" % listener, "dist_timeout_s": 600.0,
                  "nodes": [{"node": 0, "addr": "127.0.0.1:%d" % listener, "state": "open"}]}
    assert probe.read_peers(cmd % closed_port)["nodes"][0]["state"] == "refused"
    assert probe.read_peers("python3 -m sglang.launch_server --tp-size 8") is None
    assert probe.read_peers(None) is None
