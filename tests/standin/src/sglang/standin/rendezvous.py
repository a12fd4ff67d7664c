"""Rendezvous of a multi-node server's nodes, over real TCP, as torch.distributed's TCP
store gives SGLang one at `--dist-init-addr`.

Node 0 listens on the address's port; every other node connects there, retrying while
nothing listens. torch retries a refused connection silently: its "not yet listening"
line is a TRACE record, printed only with TORCH_CPP_LOG_LEVEL=INFO and
TORCH_DISTRIBUTED_DEBUG=DETAIL, and so is it here. Handshake, one JSON line each way:
the node sends {"node_rank": R, "nnodes": N}; node 0 answers {"go": true} once every
node has joined (or {"error": "..."} and closes). The connections stay open afterwards:
one that closes is a node gone (`on_lost`), and they carry the barriers of the
collectives that span the nodes (`barrier`): a node sends {"arrived": NAME}, node 0
answers {"release": NAME} to all once every node has arrived.
"""
import errno
import json
import os
import socket
import threading
import time

RETRY_S = 0.25


class RendezvousError(Exception):
    """The rendezvous failed; args are the log lines torch would have printed."""


def parse_addr(text):
    """(host, port) of HOST:PORT or [V6]:PORT."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise RendezvousError(f"ValueError: --dist-init-addr must be HOST:PORT, got {text!r}")
    return host.strip("[]"), int(port)


def _trace_enabled():
    return (os.environ.get("TORCH_CPP_LOG_LEVEL", "").upper() == "INFO"
            and os.environ.get("TORCH_DISTRIBUTED_DEBUG", "").upper() == "DETAIL")


def _c10d_line(message, source="socket.cpp:931"):
    now = time.time()
    stamp = time.strftime("%m%d %H:%M:%S", time.localtime(now))
    return f"[I{stamp}.{int(now * 1e9) % 1_000_000_000:09d} {source}] [c10d] {message}\n"


def _send(sock, obj):
    sock.sendall((json.dumps(obj) + "\n").encode())


def _read_line(sock, deadline):
    buf = b""
    while b"\n" not in buf:
        sock.settimeout(max(0.01, deadline - time.monotonic()))
        data = sock.recv(4096)
        if not data:
            raise ConnectionError("closed")
        buf += data
    sock.settimeout(None)
    return json.loads(buf.split(b"\n", 1)[0])


class Rendezvous:
    """One node's side. `join()` returns when every node is in, or raises RendezvousError;
    afterwards `on_lost(node_rank)` is called (once) when a peer's connection closes."""

    def __init__(self, addr, nnodes, node_rank, ranks_per_node, timeout_s, on_lost, write):
        self.host, self.port = parse_addr(addr)
        self.nnodes = nnodes
        self.node_rank = node_rank
        self.ranks_per_node = ranks_per_node
        self.timeout_s = timeout_s
        self.on_lost = on_lost
        self.write = write            # writes raw text to the log (c10d lines carry no SGLang prefix)
        self.peers = {}               # node rank -> socket
        self.lost = threading.Event()
        self.lock = threading.Lock()
        self.arrived = {}             # barrier name -> node ranks there (node 0's view)
        self.released = {}            # barrier name -> threading.Event

    def join(self):
        if self.node_rank == 0:
            self._serve()
        else:
            self._connect()
        for rank, sock in self.peers.items():
            threading.Thread(target=self._watch, args=(rank, sock), daemon=True).start()

    # -- node 0 -----------------------------------------------------------------
    def _serve(self):
        listener = socket.socket(socket.AF_INET6 if ":" in self.host else socket.AF_INET)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            listener.bind(("" if self.host in ("0.0.0.0", "::") else self.host, self.port))
            listener.listen(64)
        except OSError as e:
            raise RendezvousError(
                "torch.distributed.DistNetworkError: The server socket has failed to listen on any local "
                f"network address. port: {self.port}, useIpv6: {str(':' in self.host).lower()}, code: -{e.errno}, "
                f"name: {errno.errorcode.get(e.errno, '?')}, message: {os.strerror(e.errno or 0).lower()}") from e
        deadline = time.monotonic() + self.timeout_s
        while len(self.peers) < self.nnodes - 1:
            listener.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                conn, _ = listener.accept()
            except (socket.timeout, TimeoutError):
                listener.close()
                joined = (len(self.peers) + 1) * self.ranks_per_node
                world = self.nnodes * self.ranks_per_node
                raise RendezvousError(
                    f"torch.distributed.DistStoreError: Timed out after {self.timeout_s:g} seconds waiting for "
                    f"clients. {joined}/{world} clients joined.") from None
            self._admit(conn, deadline)
        listener.close()
        for sock in self.peers.values():
            try:
                _send(sock, {"go": True})
            except OSError:
                pass    # that node is gone already: its watch reports it

    def _admit(self, conn, deadline):
        try:
            hello = _read_line(conn, deadline)
            rank, nnodes = int(hello["node_rank"]), int(hello["nnodes"])
        except (OSError, ValueError, KeyError, TypeError, ConnectionError):
            conn.close()
            return
        problem = None
        if nnodes != self.nnodes:
            problem = f"node {rank} was started with --nnodes {nnodes}, node 0 with --nnodes {self.nnodes}"
        elif not 0 < rank < self.nnodes:
            problem = f"--node-rank {rank} is not in 1..{self.nnodes - 1}"
        elif rank in self.peers:
            problem = f"--node-rank {rank} has joined already"
        if problem:
            try:
                _send(conn, {"error": problem})
            finally:
                conn.close()
            return
        self.peers[rank] = conn

    # -- nodes 1.. ---------------------------------------------------------------
    def _connect(self):
        deadline = time.monotonic() + self.timeout_s
        target = f"[{self.host}]:{self.port}"
        while True:
            try:
                sock = socket.create_connection((self.host, self.port), timeout=RETRY_S * 4)
                break
            except OSError as e:
                if time.monotonic() >= deadline:
                    raise RendezvousError(
                        "torch.distributed.DistNetworkError: The client socket has timed out after "
                        f"{int(self.timeout_s * 1000)}ms while trying to connect to ({self.host}, {self.port}).") from e
                if _trace_enabled():
                    self.write(_c10d_line(f"The server socket on {target} is not yet listening "
                                          f"(errno: {e.errno} - {os.strerror(e.errno or 0)}), will retry."))
                time.sleep(RETRY_S)
        _send(sock, {"node_rank": self.node_rank, "nnodes": self.nnodes})
        try:
            answer = _read_line(sock, deadline)
        except (socket.timeout, TimeoutError):
            raise RendezvousError(
                f"torch.distributed.DistStoreError: wait timeout after {int(self.timeout_s * 1000)}ms, "
                f"keys: /rendezvous of {self.nnodes} nodes at {target}") from None
        except (OSError, ConnectionError, ValueError) as e:
            raise RendezvousError(f"torch.distributed.DistNetworkError: {target} closed the rendezvous: {e}") from e
        if "error" in answer:
            raise RendezvousError(f"RuntimeError: the rendezvous at {target} refused this node: {answer['error']}")
        sock.settimeout(None)
        self.peers[0] = sock

    # -- after the rendezvous ----------------------------------------------------
    def _event(self, name):
        with self.lock:
            return self.released.setdefault(name, threading.Event())

    def barrier(self, name):
        """Return once every node has reached barrier `name`; a node that never does
        keeps the others here, as a collective with a missing peer keeps them in NCCL."""
        released = self._event(name)
        if self.node_rank == 0:
            self._arrive(name, 0)
        else:
            _send(self.peers[0], {"arrived": name})
        released.wait()

    def _arrive(self, name, node_rank):
        with self.lock:
            there = self.arrived.setdefault(name, set())
            there.add(node_rank)
            complete = len(there) == self.nnodes
        if complete:
            for sock in self.peers.values():
                try:
                    _send(sock, {"release": name})
                except OSError:
                    pass    # that node is gone: its watch reports it
            self._event(name).set()

    def _watch(self, rank, sock):
        buf = b""
        while True:
            try:
                data = sock.recv(4096)
            except OSError:
                data = b""
            if not data:
                break
            buf += data
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                message = json.loads(line)
                if "arrived" in message and self.node_rank == 0:
                    self._arrive(message["arrived"], rank)
                elif "release" in message:
                    self._event(message["release"]).set()
        if not self.lost.is_set():
            self.lost.set()
            self.on_lost(rank)
