"""A peer that is late (peer_wait.py): a rank at the rendezvous of a server over several nodes
waits for the other node up to the rendezvous's timeout, then `peer_missing` names it; on one
node the same wait is a local stall."""
import pytest

from ansible_collections.sglang_ops.serving.plugins.module_utils.domain import failure_classes as fc
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.detector import Detector
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.server_layout import (
    TORCH_DEFAULT_DIST_TIMEOUT_S, ServerLayout, layout_of)

BEGIN = "[2026-11-29 10:00:00 TP0] Init torch distributed begin."
ARGV = ["python3", "-m", "sglang.launch_server", "--nnodes", "2", "--node-rank", "1", "--dist-init-addr", "10.0.0.1:20000"]


def waiting(start, layout=None, peers=None, poll_s=5.0):
    s = start(gpus=1, poll_s=poll_s)
    s.det = Detector(s.det.settings, layout=layout)
    extra = {"peers": peers} if peers else {}
    first = s.poll(log=[BEGIN], cpu_pct=300, extra=extra)
    s.mem = [500]
    return s, first, extra


def test_the_layout_is_read_from_the_servers_arguments():
    assert layout_of(ARGV + ["--dist-timeout", "600"]) == ServerLayout(2, 1, "10.0.0.1:20000", 600.0)
    assert layout_of("python3 -m sglang.launch_server --nnodes=4 --node-rank=0").nnodes == 4
    assert not layout_of(["python3", "-m", "sglang.launch_server"]).several_nodes
    assert layout_of(["--nnodes", "two"]) == ServerLayout()
    assert ServerLayout(2).rendezvous_timeout_s == TORCH_DEFAULT_DIST_TIMEOUT_S == 600.0


def test_a_rank_waiting_for_a_late_peer_is_shown_waiting_and_never_stopped(start):
    s, first, extra = waiting(start, layout_of(ARGV))
    peers = {"nnodes": 2, "node_rank": 1, "dist_init_addr": "10.0.0.1:20000",
             "nodes": [{"node": 0, "addr": "10.0.0.1:20000", "state": "refused"}]}
    verdicts = s.polls(217, cpu_pct=1.5, extra={"peers": peers})
    assert not any(v.final for v in verdicts)
    last = verdicts[-1]
    assert (last.verdict, last.reason_code) == ("quiet", "waiting_peer")
    assert last.reason.startswith("waiting for node 0 at 10.0.0.1:20000: refused")
    assert last.progress["peer"] == last.reason
    a = s.poll(log=["[2026-11-29 10:03:40 TP0] Init torch distributed ends. mem usage=1.07 GB"], cpu_pct=300)
    assert a.verdict == "progressing" and "peer" not in a.progress


def test_the_layout_may_come_with_the_peers_reading_alone(start):
    peers = {"nnodes": 2, "node_rank": 0, "dist_init_addr": "127.0.0.1:20000", "dist_timeout_s": 300,
             "nodes": [{"node": 0, "addr": "127.0.0.1:20000", "state": "open"}]}
    s, first, extra = waiting(start, peers=peers)
    verdicts = s.polls(200, cpu_pct=1.5, extra=extra)
    assert verdicts[-1].reason_code == "waiting_peer" and "waiting for node 1 at 127.0.0.1:20000: open" in verdicts[-1].reason


def test_a_peer_that_never_comes_ends_as_peer_missing_after_the_timeout_naming_the_node(start):
    s, first, extra = waiting(start, layout_of(ARGV + ["--dist-timeout", "300"]))
    verdicts = s.polls(400, cpu_pct=1.5)
    final = [v for v in verdicts if v.final]
    assert final, [v.reason for v in verdicts[-3:]]
    a = final[0]
    assert (a.verdict, a.reason_code, a.phase) == ("failed", "peer_missing", "distributed_init")
    assert 300 <= a.t - first.t <= 300 + 60
    assert a.reason.startswith("node 0 never joined the rendezvous at 10.0.0.1:20000")
    assert a.evidence["missing_node"] == "node 0"
    assert not fc.restart_helps("peer_missing") and fc.exit_code("peer_missing") in fc.restart_prevent_exit_statuses()


def test_ranks_that_die_at_the_timeout_are_the_peers_fault_not_this_nodes(start):
    s, first, extra = waiting(start, layout_of(ARGV + ["--dist-timeout", "300"]))
    s.polls(295, cpu_pct=1.5)
    s.unit = {"active": "failed", "sub": "failed", "main_pid": 4242, "restarts": 0}
    a = s.poll(log=["torch.distributed.DistStoreError: Timed out after 301 seconds waiting for clients. 1/2 clients joined."])
    assert (a.verdict, a.reason_code) == ("failed", "peer_missing")


def test_a_death_early_in_the_wait_keeps_its_own_class(start):
    s, first, extra = waiting(start, layout_of(ARGV + ["--dist-timeout", "300"]))
    s.polls(30, cpu_pct=1.5)
    s.unit = {"active": "failed", "sub": "failed", "main_pid": 4242, "restarts": 0}
    a = s.poll()
    assert a.reason_code == "process_exited"


@pytest.mark.parametrize("layout", [None, ServerLayout(1)])
def test_on_one_node_a_rank_at_the_rendezvous_is_a_local_stall(start, layout):
    s, first, extra = waiting(start, layout)
    verdicts = s.polls(300, cpu_pct=1.5)
    final = [v for v in verdicts if v.final]
    assert final and final[0].verdict == "stalled" and final[0].t - first.t <= 200
