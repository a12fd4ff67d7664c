"""One node of a server over two hosts under its supervisor (real processes: the SGLang stand-in
joins a real TCP rendezvous at --dist-init-addr): while node 0 is missing the start is shown
waiting for it, never stopped as a local stall; when the rendezvous gives up the verdict names
node 0 and exits with a status systemd does not restart."""
import socket

from ansible_collections.sglang_ops.serving.plugins.module_utils.domain import failure_classes as fc
from ansible_collections.sglang_ops.serving.plugins.module_utils.records.trace_format import read_trace


def _closed_port():
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    return port


def test_a_node_whose_peer_never_comes_waits_for_it_then_pages_naming_it(supervise):
    addr = "127.0.0.1:%d" % _closed_port()
    run = supervise(tp=2, extra_args=("--nnodes", "2", "--node-rank", "1", "--dist-init-addr", addr, "--dist-timeout", "25"),
                    settings={"detector": {"stall_idle_window_s": 4, "suspect_after_s": 1.5, "stall_frozen_window_s": 4}})
    status = run.wait(120)
    record = run.record()
    assert record["reason_code"] == "peer_missing", record
    assert status == fc.exit_code("peer_missing") and status in fc.restart_prevent_exit_statuses()
    assert "node 0 never joined the rendezvous at %s" % addr in record["reason"]
    waiting = [s for s in run.notify.values("STATUS") if "waiting for node 0 at %s: refused" % addr in s]
    assert waiting, run.notify.values("STATUS")
    header, observations = read_trace(run.current_dir() + "/trace.jsonl")
    assert header["server"] == {"nnodes": 2, "node_rank": 1, "dist_init_addr": addr, "dist_timeout_s": 25.0}
