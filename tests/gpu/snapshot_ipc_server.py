#!/usr/bin/env python3
"""tests/gpu/tp_server.py's rank at TP=1 (a NCCL communicator of one rank, weights, KV
cache, HTTP) that also hands its first weight shard out through CUDA IPC before it
serves, to see what CUDA IPC memory does to a cuda-checkpoint snapshot:

  --ipc export  the handle is made (torch's _share_cuda_: cudaIpcGetMemHandle, and an
                interprocess event) and kept; nobody opens it
  --ipc peer    a child process receives the shard through torch.multiprocessing
                (cudaIpcOpenMemHandle) and logs a checksum of it every --peer-every-s
                seconds, so a restored peer shows whether its mapping still reads

Runs the rank directly (no launcher: at TP=1 the launcher adds nothing but a parent).
Every other option is tp_server.py's. Used by snapshot_restart.py; not a unit test.
"""
import argparse
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tp_server  # noqa: E402

KEPT = []


def peer(queue, every_s):
    shard = queue.get()
    while True:
        checksum = float(shard[:1024, :1024].float().sum().item())
        sys.stderr.write("[peer %d] checksum of the shared shard %.6e\n" % (os.getpid(), checksum))
        sys.stderr.flush()
        time.sleep(every_s)


def export_then_serve(mode, every_s, serve):
    def wrapped(torch, a, weight):
        if mode == "export":
            KEPT.append(weight.untyped_storage()._share_cuda_())
            tp_server.log("CUDA IPC handle exported for %d bytes; no process opened it" % weight.untyped_storage().nbytes())
        else:
            ctx = torch.multiprocessing.get_context("spawn")
            queue = ctx.Queue()
            child = ctx.Process(target=peer, args=(queue, every_s), daemon=True)
            child.start()
            queue.put(weight)
            KEPT.extend([queue, child])
            tp_server.log("CUDA IPC: shard handed to peer process %d" % child.pid)
        serve(torch, a, weight)
    return wrapped


def main():
    ap = argparse.ArgumentParser(add_help=False)
    ap.add_argument("--ipc", choices=("export", "peer"), required=True)
    ap.add_argument("--peer-every-s", type=float, default=2.0)
    own, rest = ap.parse_known_args()
    a = tp_server.parse(rest + ["--tp-size", "1", "--tp-rank", "0"])
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(a.dist_port), **tp_server.SAFE_ENV)
    tp_server.serve = export_then_serve(own.ipc, own.peer_every_s, tp_server.serve)
    tp_server.rank_main(a)


if __name__ == "__main__":
    main()
