"""The Weight Cache Daemon of SGLang 0.5.23 as the SGLang stand-in (test double) plays it:
`python -m sglang.srt.weight_cache.daemon` (sglang/srt/weight_cache/daemon.py).

Process shape as SGLang's: without --gpu-id/--tp-rank the launcher (the main process)
starts one daemon per local TP rank through multiprocessing's spawn context (so a
resource tracker runs beside them), waits for every ready file (polling every 2 s),
logs `All K weight cache daemons on node X are ready (...)` and then watches them: the
first one to exit takes the others down and the launcher fails. With --gpu-id or
--tp-rank the process is that one daemon.

A daemon reads its share of every weight shard as a server's rank does (same read
model, cap and phase lengths), holds the weights on its stand-in GPU, waits until every
daemon of the world has loaded, then binds its Unix socket, writes the ready file and
serves `ping`, `query_config` and `fetch_state` until SIGTERM/SIGINT, after which it
removes both files.

Playing a later SGLang (setting weight_cache_delivery_budget > 0, sglang-facts.md "Delivery
budget"): each daemon generation serves at most --weight-cache-max-deliveries attaches (the
setting is its default); an attach reserves one before it is answered and is never refunded
(a client that fails afterwards has still spent it); once none is left, `fetch_state` answers
`budget_exhausted` (no silent fallback); `status` and `python -m
sglang.srt.weight_cache.daemon --status --model-path P --gpu-id G` report the configured,
reserved and remaining budget without loading weights. The status line's shape is the
stand-in's own: the sources name its three numbers, not its format. Children die with the launcher (PR_SET_PDEATHSIG), so SIGTERM to
the launcher (it has no handler, as SGLang's) leaves the files behind, stale; SIGINT
stops the daemons cleanly.
"""
import argparse
import dataclasses
import hashlib
import json
import logging
import multiprocessing
import os
import signal
import socket
import sys
import time

from sglang.srt import server_args as server_args_mod
from sglang.srt.weight_cache import protocol
from sglang.standin import faults as faults_mod
from sglang.standin import logs, release, weights
from sglang.standin import settings as settings_mod
from sglang.standin.gpustate import Holder
from sglang.standin.procs import burn, kill_itself_when_parent_died, sleep_forever
from sglang.standin.weight_cache import check_ipc_quant_support, config_of_args, quant_of, tensor_count

logger = logging.getLogger("sglang.srt.weight_cache.daemon")

CLIENT_CONNECTION_TIMEOUT = 30.0
READY_POLL_S = 2          # the launcher's check_interval
UTIL_LOADING = (0, 3)
UTIL_IDLE = (0, 1)
UTIL_SPIN = (97, 100)
TRANSPORT = "torch_ipc"


@dataclasses.dataclass
class WeightCacheDaemonArgs:
    """The daemon's own flags, as 0.5.23 declares them; every other flag is a server flag."""

    gpu_id: int = None
    tp_rank: int = None
    pp_rank: int = 0
    dist_init_method: str = None
    timeout: int = 1800
    force: bool = False
    # A later SGLang's (settings weight_cache_delivery_budget > 0); 0.5.23 has neither.
    weight_cache_max_deliveries: int = None
    status: bool = False

    @staticmethod
    def add_cli_args(parser):
        parser.add_argument("--gpu-id", type=int, default=None,
                            help="GPU device ID for a single daemon. If omitted, launches all local ranks.")
        parser.add_argument("--tp-rank", type=int, default=None,
                            help="TP rank for a single daemon. If omitted, launches all local ranks.")
        parser.add_argument("--pp-rank", type=int, default=0)
        parser.add_argument("--dist-init-method", default=None,
                            help="Daemon distributed init method (for example tcp://host:29500).")
        parser.add_argument("--timeout", type=int, default=1800)
        parser.add_argument("--force", action="store_true")
        budget = _delivery_budget_default()
        if budget:
            parser.add_argument("--weight-cache-max-deliveries", type=int, default=budget,
                                help="Attaches one daemon generation serves before it answers budget_exhausted.")
            parser.add_argument("--status", action="store_true",
                                help="Print the daemon's delivery budget (configured, reserved, remaining) and exit.")


def _delivery_budget_default():
    """The later SGLang's default budget the stand-in plays, 0 when it plays 0.5.23."""
    try:
        return settings_mod.load().weight_cache_delivery_budget
    except (ValueError, OSError):
        return 0


class _OneWrite(logging.Handler):
    """Each record in one write() to stderr, as the stand-in writes every log record."""

    def emit(self, record):
        try:
            logs.write_raw(self.format(record) + "\n")
        except Exception:  # noqa: BLE001 - logging must not raise
            self.handleError(record)


def _log_to_stderr(fmt, datefmt=None):
    handler = _OneWrite()
    handler.setFormatter(logging.Formatter(fmt, datefmt))
    logging.basicConfig(level=logging.INFO, handlers=[handler], force=True)


class WeightCacheDaemon:
    """One daemon: the weights of one TP rank on one stand-in GPU."""

    def __init__(self, spec):
        self.args = argparse.Namespace(**spec["args"])
        self.s = settings_mod.from_dict(spec["settings"])
        self.faults = faults_mod.parse_daemon(spec["faults"])
        self.gpu_id = spec["gpu_id"]
        self.tp_rank = spec["tp_rank"]
        self.pp_rank = spec["pp_rank"]
        self.owner = spec["owner"]
        self.dist_init_method = spec["dist_init_method"]
        uuid = protocol.device_uuid(self.gpu_id)
        self.socket_path = protocol.get_socket_path(uuid)
        self.ready_path = protocol.get_ready_path(uuid)
        self.model_cfg = weights.model_config(self.args.model_path)
        self.config = None
        self.tensors = 0
        self.holder = None
        self._running = False
        self.max_deliveries = spec.get("max_deliveries") or 0     # 0: no budget (0.5.23)
        self.reserved = 0

    @property
    def tag(self):
        return f"[WeightCacheDaemon gpu={self.gpu_id} tp_rank={self.tp_rank}]"

    @property
    def gpu_tag(self):
        return f"[WeightCacheDaemon gpu={self.gpu_id}]"

    # -- faults --------------------------------------------------------------------
    def hang(self, mode):
        self.holder.set(util=UTIL_SPIN if mode == "spin" else UTIL_IDLE)
        if mode == "spin":
            burn(None, self.s.spin_duty)
        sleep_forever()

    def checkpoint(self, phase, at=0):
        for f in self.faults:
            if f.phase != phase or f.at != at or f.kind not in ("stall", "fatal", "exit"):
                continue
            mine = self.tp_rank in f.ranks if f.ranks else (f.kind == "stall" or self.tp_rank == 0)
            if f.kind == "stall":
                self.hang(f.mode if mine else "idle")
            if mine:
                for preset in f.line:
                    for msg in logs.fatal_messages(preset, self.tp_rank, self.s):
                        logger.error(msg)
                if f.kind == "exit" or f.then == "exit":
                    os._exit(f.code)
            self.hang(f.mode if mine else "idle")

    # -- load ----------------------------------------------------------------------
    def load(self):
        args, s = self.args, self.s
        method, quant_config = quant_of(args.quantization, self.model_cfg)
        check_ipc_quant_support(method, quant_config, where="daemon")
        if self.gpu_id >= s.gpus:
            raise RuntimeError("CUDA error: invalid device ordinal")
        self.holder = Holder(s.state_dir, self.gpu_id, self.owner)
        self.holder.set(mem_mib=s.ctx_mem_mib // 4, util=UTIL_LOADING)
        self.checkpoint("distributed_init")
        time.sleep(s.phase_s("init_s"))
        self.holder.set(mem_mib=s.ctx_mem_mib)
        world = args.tp_size * args.pp_size
        logger.info(f"{self.tag} Distributed backend initialized (tp_size={args.tp_size}, "
                    f"pp_size={args.pp_size}, world_size={world})")
        self.config = config_of_args(args, self.model_cfg, self.tp_rank, self.pp_rank)

        logger.info(f"{self.tag} Loading model from disk: {args.model_path}")
        tic = time.perf_counter()
        self.checkpoint("weight_load", 0)
        shards = weights.shard_files(args.model_path)
        n = max(1, len(shards))
        weights_mib = int(s.gpu_mem_mib * s.weights_mem_frac)
        per_node = max(1, args.tp_size // max(1, args.nnodes))
        bar = None
        if self.tp_rank == 0 and self.pp_rank == 0:
            bar = logs.Bar("Loading safetensors checkpoint shards" if s.log_family == "0.5.16"
                           else "Multi-thread loading shards", len(shards))
        for i in weights.load_shards(shards, s, self.faults, self.tp_rank % per_node, per_node):
            self.holder.set(mem_mib=s.ctx_mem_mib + weights_mib * (i + 1) // n)
            if bar:
                bar.update()
            self.checkpoint("weight_load", i + 1)
        if bar:
            bar.close()
        self.checkpoint("post_load")
        time.sleep(s.phase_s("post_load_s"))
        logger.info(f"{self.tag} Model loaded from disk in {time.perf_counter() - tic:.2f}s")

        self.tensors = tensor_count(self.model_cfg)
        logger.info(f"[weight_cache] Using transport backend: {TRANSPORT}")
        logger.info(f"{self.gpu_tag} Exported {self.tensors} tensors (1 non-persistent buffers), "
                    f"transport={TRANSPORT}, metadata size ~{self.tensors * 152 / 1024 / 1024:.1f} MB")
        logger.info(f"{self.tag} Exported {self.tensors} tensors as IPC handles.")
        self.holder.set(util=UTIL_IDLE)

    def await_cluster_ready_to_serve(self):
        """Every daemon of the world has loaded (SGLang: a gloo monitored_barrier)."""
        timeout_s = self.args.weight_cache_timeout
        if timeout_s <= 0:
            raise ValueError(f"--weight-cache-timeout must be positive, got {timeout_s}")
        world = self.args.tp_size * self.args.pp_size
        me = self.args.tp_size * self.pp_rank + self.tp_rank
        key = hashlib.sha256(str(self.dist_init_method).encode()).hexdigest()[:16]
        folder = os.path.join(self.s.state_dir, f"weight-cache-barrier-{key}")
        os.makedirs(folder, exist_ok=True)
        with open(os.path.join(folder, str(me)), "w", encoding="utf-8") as f:
            f.write(str(os.getpid()))
        end = time.monotonic() + timeout_s
        while True:
            arrived = set()
            for name in os.listdir(folder):
                try:
                    with open(os.path.join(folder, name), encoding="utf-8") as f:
                        if protocol.is_pid_alive(int(f.read())):
                            arrived.add(int(name))
                except (OSError, ValueError):
                    continue
            if len(arrived) >= world:
                return
            if time.monotonic() > end:
                missing = sorted(set(range(world)) - arrived)
                try:
                    raise RuntimeError(f"Rank {me} failed to pass monitoredBarrier in {timeout_s * 1000} ms; "
                                       f"ranks {missing} did not reach it")
                except RuntimeError:
                    logger.exception("[weight_cache] cluster readiness barrier failed; exiting without serving.")
                os._exit(1)
            time.sleep(0.1)

    # -- serve ---------------------------------------------------------------------
    def serve(self):
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        old_umask = os.umask(0o177)
        try:
            sock.bind(self.socket_path)
        finally:
            os.umask(old_umask)
        sock.listen(8)
        sock.settimeout(1.0)
        with open(self.ready_path, "w", encoding="utf-8") as f:
            f.write(f"pid={os.getpid()}\n")
            f.write(f"config={self.config}\n")
        logger.info(f"{self.gpu_tag} Listening on {self.socket_path}")
        self._running = True

        def _signal_handler(signum, frame):
            logger.info(f"{self.gpu_tag} Received signal {signum}, shutting down")
            self._running = False

        signal.signal(signal.SIGTERM, _signal_handler)
        signal.signal(signal.SIGINT, _signal_handler)
        try:
            while self._running:
                try:
                    conn, _ = sock.accept()
                except socket.timeout:
                    continue
                conn.settimeout(CLIENT_CONNECTION_TIMEOUT)
                try:
                    self._handle_connection(conn)
                except Exception as e:  # noqa: BLE001 - one bad client must not end the daemon
                    logger.error(f"{self.gpu_tag} Error handling connection: {e}", exc_info=True)
                finally:
                    conn.close()
        finally:
            sock.close()
            for path in (self.socket_path, self.ready_path):
                if os.path.exists(path):
                    os.unlink(path)
            logger.info(f"{self.gpu_tag} Shutdown complete")

    def _handle_connection(self, conn):
        req = protocol.recv_msg(conn)
        kind = req.get("type")
        if kind == "query_config":
            protocol.send_msg(conn, {"status": "ok", "config": dict(self.config)})
        elif kind == "fetch_state":
            engine = req["config"]
            if engine != self.config:
                mismatches = {k: (self.config.get(k), engine.get(k)) for k in self.config
                              if self.config.get(k) != engine.get(k)}
                logger.warning(f"{self.gpu_tag} Config mismatch: {mismatches}")
                protocol.send_msg(conn, {"status": "mismatch", "daemon_config": dict(self.config)})
                return
            if self.max_deliveries and self.reserved >= self.max_deliveries:
                logger.warning(f"{self.gpu_tag} Delivery budget exhausted: {self.reserved} of "
                               f"{self.max_deliveries} attaches served by this daemon; drain the engines "
                               f"and restart the daemon")
                protocol.send_msg(conn, dict(self.budget(), status="budget_exhausted"))
                return
            self.reserved += 1     # reserved before the answer: never refunded
            logger.info(f"{self.gpu_tag} Serving {self.tensors} tensors via {TRANSPORT} transport")
            protocol.send_msg(conn, {"status": "ok", "config": dict(self.config), "tensors": self.tensors,
                                     "pid": os.getpid(), "transport_backend": TRANSPORT,
                                     "preloaded_weights_bytes": self.holder.mem_mib * 1024 * 1024})
        elif kind == "ping":
            protocol.send_msg(conn, {"status": "ok"})
        elif kind == "status" and self.max_deliveries:
            protocol.send_msg(conn, dict(self.budget(), status="ok"))
        else:
            protocol.send_msg(conn, {"status": "error", "message": f"Unknown request type: {kind}"})


    def budget(self):
        return {"max_deliveries": self.max_deliveries, "reserved": self.reserved,
                "remaining": max(0, self.max_deliveries - self.reserved), "pid": os.getpid()}


def print_status(gpu_id):
    """--status: ask the daemon of one GPU for its budget over its socket; no weights loaded.
    Exit 0 with one JSON line, 1 when no daemon answers."""
    path = protocol.get_socket_path(protocol.device_uuid(gpu_id))
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(CLIENT_CONNECTION_TIMEOUT)
            sock.connect(path)
            protocol.send_msg(sock, {"type": "status"})
            answer = protocol.recv_msg(sock)
    except (OSError, ConnectionError) as e:
        sys.stderr.write(f"No weight cache daemon answers at {path}: {e}\n")
        return 1
    answer.pop("status", None)
    print(json.dumps(dict(answer, gpu_id=gpu_id)), flush=True)
    return 0


def run_weight_cache_daemon(spec):
    """Entry point of one daemon process. Its log format is SGLang's basicConfig of the
    daemon, which takes effect only where nothing configured logging before (a spawned
    daemon; a single one keeps the launcher format)."""
    if not logging.getLogger().handlers:
        _log_to_stderr(f"%(asctime)s [Daemon gpu={spec['gpu_id']} tp_rank={spec['tp_rank']}] "
                       "%(levelname)s %(message)s")
    kill_itself_when_parent_died()
    daemon = WeightCacheDaemon(spec)
    daemon.load()
    daemon.await_cluster_ready_to_serve()
    daemon.serve()


def _free_init_method():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return f"tcp://127.0.0.1:{s.getsockname()[1]}"


def launch_weight_cache_daemons(base_spec, args, dist_init_method, timeout, force):
    """The launcher: one daemon per local rank, ready files awaited, then watched."""
    tp_size_per_node = args.tp_size // args.nnodes
    tp_ranks = range(tp_size_per_node * args.node_rank, tp_size_per_node * (args.node_rank + 1))
    if args.nnodes > 1 and dist_init_method is None:
        raise ValueError(
            "dist_init_method is required for multi-node weight cache daemons. "
            "Use --dist-init-method tcp://<node0-ip>:<port> to specify the "
            "rendezvous address accessible from all nodes.")
    if dist_init_method is None:
        dist_init_method = _free_init_method()
    gpus = {r: args.base_gpu_id + (r % tp_size_per_node) * args.gpu_id_step for r in tp_ranks}
    for r in tp_ranks:
        protocol.cleanup_stale_daemon_files(protocol.device_uuid(gpus[r]), force=force)
    ctx = multiprocessing.get_context("spawn")
    procs = []
    for r in tp_ranks:
        spec = dict(base_spec, gpu_id=gpus[r], tp_rank=r, pp_rank=0, dist_init_method=dist_init_method)
        proc = ctx.Process(target=run_weight_cache_daemon, args=(spec,))
        proc.start()
        procs.append(proc)
        logger.info(f"Launched weight cache daemon gpu={gpus[r]} pp_rank=0 tp_rank={r} pid={proc.pid}")

    start = time.time()
    for r in tp_ranks:
        ready_path = protocol.get_ready_path(protocol.device_uuid(gpus[r]))
        while not os.path.exists(ready_path):
            time.sleep(READY_POLL_S)
            if time.time() - start > timeout:
                logger.error(f"Weight cache daemon pp_rank=0 tp_rank={r} did not become ready within {timeout}s")
                for p in procs:
                    p.terminate()
                raise TimeoutError(f"Weight cache daemon pp_rank=0 tp_rank={r} did not become ready within {timeout}s")
            for p in procs:
                if not p.is_alive():
                    logger.error(f"Weight cache daemon exited prematurely with code {p.exitcode}")
                    for other in procs:
                        if other.is_alive():
                            other.terminate()
                    raise RuntimeError(f"Weight cache daemon exited prematurely with code {p.exitcode}")
        logger.info(f"Weight cache daemon pp_rank=0 tp_rank={r} is ready")
    logger.info(f"All {len(procs)} weight cache daemons on node {args.node_rank} are ready "
                f"(pp_ranks=0..0, tp_ranks={tp_ranks.start}..{tp_ranks.stop - 1}, "
                f"dist_init_method={dist_init_method})")

    exited = None
    try:
        while exited is None:
            for proc in procs:
                if not proc.is_alive():
                    exited = proc
                    break
            else:
                time.sleep(1)
    except KeyboardInterrupt:
        logger.info("Received KeyboardInterrupt, shutting down daemons")
    finally:
        for proc in procs:
            if proc.is_alive():
                proc.terminate()
        for proc in procs:
            proc.join(timeout=5)
            if proc.is_alive():
                proc.kill()
                proc.join()
        logger.info("All weight cache daemons have been terminated")
    if exited is not None:
        raise RuntimeError(f"Weight cache daemon (pid={exited.pid}) exited with code {exited.exitcode}; "
                           "terminated the remaining daemons.")


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    worker_parser = argparse.ArgumentParser(add_help=False)
    WeightCacheDaemonArgs.add_cli_args(worker_parser)
    worker_ns, server_argv = worker_parser.parse_known_args(argv)
    args = server_args_mod.parse_args(server_argv, prog="sglang serve")
    _log_to_stderr("[%(asctime)s] %(message)s", "%Y-%m-%d %H:%M:%S")
    release.load_kernels()
    try:
        settings = settings_mod.load()
        text, _origin = faults_mod.read_daemon_source(settings)
        all_faults = faults_mod.parse_daemon(json.loads(text)) if text else []
        os.makedirs(settings.state_dir, exist_ok=True)
        start_no = faults_mod.count_start(settings.state_dir, "weight_cache:" + text) if text else 0
    except (ValueError, OSError) as e:
        sys.stderr.write(f"SGLang stand-in configuration error: {e}\n")
        return 2
    if args.nnodes > 1:
        sys.stderr.write("SGLang stand-in: its weight cache daemon runs on one node (--nnodes 1)\n")
        return 2
    if getattr(worker_ns, "status", False):
        return print_status(worker_ns.gpu_id if worker_ns.gpu_id is not None else (worker_ns.tp_rank or 0))
    base_spec = {"args": vars(args), "settings": settings_mod.to_dict(settings),
                 "max_deliveries": getattr(worker_ns, "weight_cache_max_deliveries", None) or 0,
                 "faults": faults_mod.to_json(faults_mod.active(all_faults, start_no)), "owner": os.getpid()}
    if worker_ns.gpu_id is not None or worker_ns.tp_rank is not None:
        gpu_id = worker_ns.gpu_id if worker_ns.gpu_id is not None else worker_ns.tp_rank
        tp_rank = worker_ns.tp_rank if worker_ns.tp_rank is not None else worker_ns.gpu_id
        protocol.cleanup_stale_daemon_files(protocol.device_uuid(gpu_id), force=worker_ns.force)
        run_weight_cache_daemon(dict(base_spec, gpu_id=gpu_id, tp_rank=tp_rank, pp_rank=worker_ns.pp_rank,
                                     dist_init_method=worker_ns.dist_init_method or _free_init_method()))
    else:
        launch_weight_cache_daemons(base_spec, args, worker_ns.dist_init_method, worker_ns.timeout,
                                    worker_ns.force)
    return 0
