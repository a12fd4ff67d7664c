"""A server over two nodes: two stand-in servers on 127.0.0.1 meet over a real TCP
rendezvous at --dist-init-addr; only node 0 serves the API."""
import os
import signal
import socket
import time

from .conftest import alive, free_port, query_gpus, wait_until

TRACE_ENV = {"TORCH_CPP_LOG_LEVEL": "INFO", "TORCH_DISTRIBUTED_DEBUG": "DETAIL"}
NOT_LISTENING = "is not yet listening"


def node(launch, rank, rdv_port, *extra, env=None, fault=None):
    # Node 1 takes the other two stand-in GPUs: both "hosts" share this machine's GPU state.
    return launch("--nnodes", "2", "--node-rank", str(rank), "--dist-init-addr", f"127.0.0.1:{rdv_port}",
                  "--base-gpu-id", str(2 * rank), *extra, tp=4, env=env, fault=fault)


def test_node_1_waits_for_node_0_then_both_load_and_only_node_0_serves_the_api(launch):
    rdv = free_port()
    node1 = node(launch, 1, rdv)
    node1.wait_log(r"Init parallel begin\.")
    time.sleep(1.0)   # node 0 is not there yet: nothing may load, and torch's retries are silent
    assert "Load weight begin" not in node1.output()
    assert NOT_LISTENING not in node1.output()
    assert alive(node1.pid)

    node0 = node(launch, 0, rdv)
    node0.wait_ready()
    node1.wait_log(r"Dummy health check server started in background thread at 127\.0\.0\.1:%d" % node1.port)
    assert sorted(node0.ranks()) == [0, 1] and sorted(node1.ranks()) == [2, 3]
    status, body = node0.http("/v1/completions", "POST", {"model": "m", "prompt": "hi", "max_tokens": 2})
    assert status == 200, body
    assert node1.http("/health")[0] == 200
    assert node1.http("/v1/models")[0] == 404
    assert node1.http("/v1/completions", "POST", {"model": "m", "prompt": "hi", "max_tokens": 2})[0] != 200
    assert "The server is fired up and ready to roll!" not in node1.output()
    assert "Uvicorn running" not in node1.output()


def test_a_node_alone_keeps_retrying_and_says_so_with_c10d_tracing_on(launch):
    node1 = node(launch, 1, free_port(), env=TRACE_ENV)
    wait_until(lambda: node1.output().count(NOT_LISTENING) >= 3, timeout=10, what="three retry lines")
    assert "Load weight begin" not in node1.output()
    assert alive(node1.pid)


def test_a_node_that_cannot_reach_the_rendezvous_fails_after_dist_timeout(launch):
    rdv = free_port()
    node1 = node(launch, 1, rdv, "--dist-timeout", "1")
    assert node1.proc.wait(timeout=15) == 1
    assert (f"torch.distributed.DistNetworkError: The client socket has timed out after 1000ms while trying to "
            f"connect to (127.0.0.1, {rdv}).") in node1.output()
    assert "Load weight begin" not in node1.output()


def test_node_0_refuses_a_node_started_with_another_nnodes(launch):
    rdv = free_port()
    node0 = node(launch, 0, rdv, "--dist-timeout", "30")
    node0.wait_log(r"Init parallel begin\.")
    odd = launch("--nnodes", "4", "--node-rank", "1", "--dist-init-addr", f"127.0.0.1:{rdv}", "--base-gpu-id", "2",
                 tp=8)
    assert odd.proc.wait(timeout=15) == 1
    assert "refused this node: node 1 was started with --nnodes 4, node 0 with --nnodes 2" in odd.output()
    assert alive(node0.pid) and "Load weight begin" not in node0.output()


def test_node_1_killed_after_the_rendezvous_takes_node_0_down(launch):
    rdv = free_port()
    node0 = node(launch, 0, rdv)
    node1 = node(launch, 1, rdv)
    node0.wait_ready()
    node1.wait_log(r"Dummy health check server started")
    os.killpg(node1.pid, signal.SIGKILL)
    node1.proc.wait(timeout=5)
    node0.wait_log(r"ncclRemoteError: A call failed possibly due to a network error or a remote process exiting",
                   timeout=10)
    assert "connection closed by remote peer (node 1)" in node0.output()
    assert node0.proc.wait(timeout=10) == -signal.SIGKILL
    assert "Child process unexpectedly failed with exitcode=1" in node0.output()


def test_node_0_alone_fails_after_dist_timeout_counting_the_ranks_that_joined(launch):
    node0 = node(launch, 0, free_port(), "--dist-timeout", "1")
    assert node0.proc.wait(timeout=15) == 1
    assert ("torch.distributed.DistStoreError: Timed out after 1 seconds waiting for clients. 2/4 clients joined."
            in node0.output())
    assert "Load weight begin" not in node0.output()


def test_node_0_cannot_listen_on_a_taken_rendezvous_port(launch):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        node0 = node(launch, 0, taken.getsockname()[1])
        assert node0.proc.wait(timeout=15) == 1
    assert "DistNetworkError: The server socket has failed to listen on any local network address." in node0.output()
    assert "name: EADDRINUSE, message: address already in use" in node0.output()


def test_a_stall_on_node_1_during_load_holds_node_0_in_the_collective_after_loading(launch, base_env):
    rdv = free_port()
    stall = {"kind": "stall", "phase": "weight_load", "at": 1, "mode": "idle"}
    node0 = node(launch, 0, rdv)
    node1 = node(launch, 1, rdv, fault=stall)
    node0.wait_log(r"Load weight end\.")
    time.sleep(1.5)   # many times what the rest of a start takes at this time scale
    assert "Load weight end" not in node1.output()
    assert "KV Cache is allocated" not in node0.output() and "fired up" not in node0.output()
    gpus = {g["index"]: g for g in query_gpus(base_env)}
    assert all(gpus[i]["util_pct"] >= 97 for i in (0, 1)), gpus   # node 0 spins in the all-reduce
    assert alive(node0.pid) and alive(node1.pid)


def test_the_faster_node_waits_for_the_slower_one_after_loading_then_both_go_on(launch):
    rdv = free_port()
    node0 = node(launch, 0, rdv)
    node1 = node(launch, 1, rdv, env={"SGLANG_STANDIN_TIME_SCALE": "0.3"})
    node0.wait_log(r"Load weight end\.")
    assert "Load weight end" not in node1.output() and "KV Cache is allocated" not in node0.output()
    node0.wait_ready(timeout=60)
    assert "KV Cache is allocated" in node1.output()
