"""A server over two hosts restarted as one: two restart procedures (one per node, each
in its own thread as Ansible runs them in their own workers) meeting in one folder."""
import json
import os
import threading
import time

import pytest

from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.detector import Assessment
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.restart.server_sync import ServerAborted, ServerSync, run_folder

from ansible_collections.sglang_ops.serving.tests.unit.restart.restart_fakes import (
    Clock, FakeHost, FakeProbe, make_procedure, progressing, ready, stalled)

NODES = ["pair-0", "pair-1"]


class FollowingProbe(FakeProbe):
    """A node's probe that, in the attempts where another node decides, answers only once
    that decision is on record: the follower cannot race to its own start timeout."""

    def __init__(self, clock, host, folder, follows):
        super().__init__(clock)
        self.host, self.folder, self.follows = host, folder, set(follows)

    def __call__(self, module_args):
        n = self.host.events.count("start")
        if n in self.follows:
            path = os.path.join(self.folder, "attempt-%d.json" % n)
            deadline = time.monotonic() + 60   # generous: the suite runs beside Molecule on 2 cores
            while not os.path.exists(path) and time.monotonic() < deadline:
                time.sleep(0.01)
        return super().__call__(module_args)


def _sync(folder, node):
    return ServerSync(str(folder), "pair", NODES, node, wait_poll_s=0.01)


def _node(tmp_path, node, scripts, follows=(), host=None, **overrides):
    folder = tmp_path / "artifacts" / "pair" / "run-1"
    clock = Clock()
    host = host or FakeHost()
    probe = FollowingProbe(clock, host, str(folder), follows)
    proc = make_procedure(tmp_path, scripts, host=host, clock=clock, probe=probe, server=_sync(folder, node),
                          **overrides)[0]
    return proc, host


def _run_together(*procedures):
    results = [None] * len(procedures)
    errors = []

    def run(i, proc):
        try:
            results[i] = proc.restart()
        except BaseException as exc:  # the test reports it below
            errors.append(exc)

    threads = [threading.Thread(target=run, args=(i, p)) for i, p in enumerate(procedures)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors and all(not t.is_alive() for t in threads), errors
    return results


def _json(path):
    with open(path) as fh:
        return json.load(fh)


def test_a_stall_on_node_1_restarts_both_nodes_and_node_0_calls_the_server_ready(tmp_path):
    head, head_host = _node(tmp_path, "pair-0", [[progressing()], [progressing(), ready()]], follows=[1])
    tail, tail_host = _node(tmp_path, "pair-1", [[progressing(), stalled("stall_idle")], [progressing()]],
                            follows=[2])
    head_res, tail_res = _run_together(head, tail)

    assert head_host.events == tail_host.events == ["stop", "start", "stop", "start"]
    assert head_res["outcome"] == tail_res["outcome"] == "ready"
    folder = str(tmp_path / "artifacts" / "pair" / "run-1")
    first = _json(os.path.join(folder, "attempt-1.json"))
    assert first["node"] == "pair-1" and first["reason_code"] == "stall_idle" and first["action"] == "restart"
    second = _json(os.path.join(folder, "attempt-2.json"))
    assert second["node"] == "pair-0" and second["verdict"] == "ready"
    for node, res in (("pair-0", head_res), ("pair-1", tail_res)):
        run = _json(res["run_json"])
        assert run["server"]["nodes"] == NODES and res["artifacts"] == os.path.join(folder, node)
        assert [a["reason_code"] for a in run["attempts"]] == ["stall_idle", "ready"]
        assert run["attempts"][0]["reason"].startswith("node pair-1: ")
        assert run["attempts"][0]["action"] == "restarted"
        # every node's diagnostics of the failed attempt, in the server's one folder
        assert os.path.isfile(os.path.join(folder, node, "attempt-1", "diagnostics", "journal.txt"))
    assert "server pair (node 1 of 2" in tail_res["msg"] and folder in tail_res["msg"]


def test_the_server_is_handed_over_with_the_node_named_when_the_policy_says_so(tmp_path):
    crash = ("failed", "weight_load", "cuda_oom", "CUDA out of memory")
    head, head_host = _node(tmp_path, "pair-0", [[progressing()]], follows=[1])
    tail, tail_host = _node(tmp_path, "pair-1", [[crash]])
    head_res, tail_res = _run_together(head, tail)
    assert head_host.events == tail_host.events == ["stop", "start"]
    for res in (head_res, tail_res):
        assert res["outcome"] == "gave_up" and res["reason_code"] == "cuda_oom"
        assert "node pair-1: CUDA out of memory" in res["msg"] and "server pair" in res["msg"]


def test_a_peer_that_never_came_is_named_with_its_host_and_no_node_restarts(tmp_path):
    missing = Assessment(0.0, "distributed_init", "failed", "peer_missing",
                         "node 0 never joined the rendezvous at 10.0.0.1:20000; this node waited 10m30s",
                         {"missing_node": "node 0"})
    head, head_host = _node(tmp_path, "pair-0", [[progressing("distributed_init")]], follows=[1])
    tail, tail_host = _node(tmp_path, "pair-1", [[progressing("distributed_init"), missing]])
    head_res, tail_res = _run_together(head, tail)
    assert head_host.events == tail_host.events == ["stop", "start"]
    for res in (head_res, tail_res):
        assert res["outcome"] == "gave_up" and res["reason_code"] == "peer_missing"
        assert res["missing_node"] == "node 0 (pair-0)"
        assert "The node that never came: node 0 (pair-0)." in res["msg"]
        assert _json(res["run_json"])["missing_node"] == "node 0 (pair-0)"


def test_a_node_failing_its_preflight_stops_every_node_before_anything_is_stopped(tmp_path):
    head, head_host = _node(tmp_path, "pair-0", [[ready()]])
    tail, tail_host = _node(tmp_path, "pair-1", [[ready()]], host=FakeHost(installed=False))
    head_res, tail_res = _run_together(head, tail)
    assert head_host.events == tail_host.events == []
    assert tail_res["reason_code"] == "unit_missing"
    assert head_res["reason_code"] == "server_node_gave_up" and "node pair-1: unit sglang-k26-ddtree is not installed" \
        in head_res["msg"]


def test_a_node_whose_gpus_stay_held_keeps_every_node_from_starting(tmp_path):
    stuck = FakeHost(pids_after_stop=10_000)
    head, head_host = _node(tmp_path, "pair-0", [[ready()]])
    tail, tail_host = _node(tmp_path, "pair-1", [[ready()]], host=stuck, release_timeout_s=4.0)
    head_res, tail_res = _run_together(head, tail)
    assert "start" not in head_host.events and "start" not in tail_host.events
    assert tail_res["reason_code"] == "gpu_not_released"
    assert head_res["reason_code"] == "server_node_gave_up" and "node pair-1" in head_res["msg"]


def test_a_node_that_never_comes_is_named_after_the_wait(tmp_path):
    clock = Clock()
    sync = ServerSync(str(tmp_path / "s"), "pair", NODES, "pair-0", clock=clock, sleep=clock.sleep, wait_poll_s=1)
    with pytest.raises(ServerAborted) as exc:
        sync.meet("preflight", timeout_s=30)
    assert exc.value.node == "pair-1" and "pair-1 did not reach preflight within 30 s" in str(exc.value)
    # and the others learn it from the folder
    other = ServerSync(str(tmp_path / "s"), "pair", NODES, "pair-1")
    assert other.aborted().code == "server_node_missing"


def test_the_first_node_to_decide_an_attempt_decides_it_for_all(tmp_path):
    syncs = [ServerSync(str(tmp_path / "s"), "pair", NODES, n) for n in NODES]
    barrier = threading.Barrier(2)
    won = []

    def offer(sync):
        barrier.wait()
        won.append(sync.decide(1, {"verdict": "stalled", "by": sync.node})["node"])

    threads = [threading.Thread(target=offer, args=(s,)) for s in syncs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(won) == 2 and len(set(won)) == 1 and won[0] in NODES
    assert not [f for f in os.listdir(str(tmp_path / "s")) if f.endswith(".tmp")]


def test_a_host_outside_the_server_is_refused():
    with pytest.raises(ValueError, match="gpu-host-9 is not a node of server pair"):
        ServerSync("/nonexistent", "pair", NODES, "gpu-host-9")


def test_the_nodes_of_one_run_share_a_folder_and_a_second_run_in_the_same_second_gets_its_own(tmp_path):
    root = str(tmp_path / "artifacts")
    first = run_folder(root, "pair", "4242-task-a", 1_764_450_000.0)
    assert run_folder(root, "pair", "4242-task-a", 1_764_450_001.0) == first   # the other node, a moment later
    second = run_folder(root, "pair", "4242-task-b", 1_764_450_000.0)
    assert first.endswith("/pair/20251129T210000Z") and second == first + "-2"


SPIN = Assessment(400.0, "kv_cache", "stalled", "stall_spin", "GPUs spinning with nothing moving")


def test_a_node_spinning_in_a_collective_lets_a_peer_stuck_otherwise_name_the_cause(tmp_path):
    clock = Clock()
    peer = ServerSync(str(tmp_path / "s"), "pair", NODES, "pair-1")

    def sleep(s):   # node 1's idle stall becomes final while node 0 waits
        clock.sleep(s)
        if len(clock.slept) == 3:
            peer.decide(1, {"verdict": "stalled", "phase": "weight_load", "reason_code": "stall_idle",
                            "reason": "every signal flat for 480 s", "t": 480.0, "action": "restart",
                            "why": "stall_idle: a restart can help"})

    head = ServerSync(str(tmp_path / "s"), "pair", NODES, "pair-0", clock=clock, sleep=sleep, wait_poll_s=1)
    outcome, decision = head.settle(1, SPIN, 3, [], spin_grace_s=190)
    assert outcome.reason_code == "stall_idle" and outcome.reason.startswith("node pair-1: ")
    assert decision.restarts and len(clock.slept) == 3


def test_a_server_spinning_everywhere_is_decided_as_a_hung_collective_after_the_grace(tmp_path):
    clock = Clock()
    head = ServerSync(str(tmp_path / "s"), "pair", NODES, "pair-0", clock=clock, sleep=clock.sleep, wait_poll_s=1)
    outcome, decision = head.settle(1, SPIN, 3, [], spin_grace_s=190)
    assert outcome.reason_code == "stall_spin" and outcome.reason.startswith("node pair-0: ")
    assert not decision.restarts and sum(clock.slept) == 190


def test_a_node_that_gives_up_during_the_watch_ends_every_node_s_watch_with_a_hand_over(tmp_path):
    peer = ServerSync(str(tmp_path / "s"), "pair", NODES, "pair-1")
    head = ServerSync(str(tmp_path / "s"), "pair", NODES, "pair-0")
    peer.abort("interrupted", "interrupted by SIGINT")
    own = head.peer_outcome(1, 12.0)
    assert own.reason_code == "server_node_gave_up" and "node pair-1 gave up: interrupted by SIGINT" in own.reason
    outcome, decision = head.settle(1, own, 3, [])
    assert not decision.restarts and outcome.reason_code == "server_node_gave_up"
    assert head.decision(1) is None   # an abort is no decision of the attempt


def test_a_meeting_every_node_reached_holds_even_when_a_node_gave_up_right_after_it(tmp_path):
    folder = tmp_path / "artifacts" / "pair" / "run-1"
    head, tail = _sync(folder, "pair-0"), _sync(folder, "pair-1")
    met = threading.Thread(target=tail.meet, args=("released-1", 10))
    met.start()
    stage_dir = folder / "sync" / "released-1"
    deadline = time.monotonic() + 10
    while not (stage_dir / "pair-1").exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    (stage_dir / "pair-0").write_text(json.dumps({"node": "pair-0", "stage": "released-1"}))  # node 0 arrived
    met.join(10)
    tail.abort("cuda_oom", "CUDA out of memory")   # node 1 went on, failed and gave up
    head.meet("released-1", 10)                    # before node 0 looked: its meeting still happened
    with pytest.raises(ServerAborted):
        head.meet("released-2", 10)
