"""Main process of the SGLang stand-in (test double): what `launch_server` runs.

Parses the flags, starts one `sglang::scheduler_TP{n}` process per TP rank on this
node and a `sglang::detokenizer`, waits until every rank reports `loaded`, then brings
up HTTP (uvicorn's lines), warms up through its own API, and declares itself ready.
Children die with this process (PR_SET_PDEATHSIG), except a rank the `leftover`
fault keeps alive on purpose.
"""
import json
import os
import signal
import socket
import sys
import threading
import time
import urllib.request

from sglang.srt import server_args as server_args_mod
from sglang.standin import faults as faults_mod
from sglang.standin import logs
from sglang.standin import release
from sglang.standin import settings as settings_mod
from sglang.standin import weight_cache, weights
from sglang.standin.http_api import ServerState, make_server
from sglang.standin.procs import burn, sleep_forever, spawn
from sglang.standin.rendezvous import Rendezvous, RendezvousError

MIB = 1024 * 1024
# torch.distributed's default timeout when SGLang gets no --dist-timeout.
DEFAULT_DIST_TIMEOUT_S = 600.0


def _dg_cache_dir():
    if os.environ.get("SGLANG_DG_CACHE_DIR"):
        return os.environ["SGLANG_DG_CACHE_DIR"]
    base = os.environ.get("SGLANG_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "sglang")
    return os.path.join(base, "deep_gemm")


def _args_line(args, family):
    d = vars(args)
    if family == "0.5.16":
        inner = ", ".join(f"{k}={v!r}" for k, v in d.items())
        return f"server_args=ServerArgs({inner})"
    return f"server_args={d!r}"


class Main:
    def __init__(self, args, settings, faults, argv):
        self.args = args
        self.s = settings
        self.faults = faults
        self.argv = argv
        self.family = settings.log_family
        self.children = []        # Popen objects killed with us
        self.leftover = None
        self.socks = {}           # rank -> socket
        self.sock_lock = threading.Lock()
        self.loaded = {}
        self.weights_loaded = set()   # ranks of this node with their weights (the cross-node barrier)
        self.all_loaded = threading.Event()
        self.dying = threading.Lock()
        self.state = None

    # -- lifecycle -------------------------------------------------------------
    def kill_children(self):
        for p in self.children:
            try:
                p.kill()
            except OSError:
                pass
        for p in self.children:
            try:
                p.wait(timeout=2)
            except Exception:  # noqa: BLE001 - best effort reaping before we go
                pass

    def die(self, code, kill_self=False):
        if not self.dying.acquire(blocking=False):
            sleep_forever()
        self.kill_children()
        if kill_self:
            os.kill(os.getpid(), signal.SIGKILL)
        os._exit(code)

    def on_term(self, signum, frame):
        self.dying.acquire(blocking=False)   # children going away now is expected
        self.kill_children()
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    def fail(self, *messages, code=1):
        for m in messages:
            logs.log(m)
        self.die(code)

    # -- ranks -----------------------------------------------------------------
    def rank_command(self, cmd, rank=None):
        data = (json.dumps(cmd) + "\n").encode()
        with self.sock_lock:
            for r, sock in self.socks.items():
                if rank is None or r == rank:
                    try:
                        sock.sendall(data)
                    except OSError:
                        pass

    def _watch(self, rank, sock, proc):
        buf = b""
        while True:
            try:
                data = sock.recv(65536)
            except OSError:
                data = b""
            if not data:
                if proc is self.leftover or self.dying.locked():
                    return
                code = proc.wait()
                logs.log(f"Child process unexpectedly failed with exitcode={code}. pid={proc.pid}")
                logs.log("Received sigquit from a child process. It usually means the child failed.")
                self.die(1, kill_self=True)
            buf += data
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                ev = json.loads(line)
                if ev["event"] == "exit":
                    time.sleep(0.2)   # let the other ranks' lines reach the log
                    self.die(int(ev["code"]))
                elif ev["event"] == "sigquit":
                    logs.log("Received sigquit from a child process. It usually means the child failed.")
                    self.die(1, kill_self=True)
                elif ev["event"] == "weights_loaded":
                    self.weights_loaded.add(rank)
                    if len(self.weights_loaded) == len(self.socks):
                        threading.Thread(target=self.cross_node_barrier, daemon=True).start()
                elif ev["event"] == "loaded":
                    self.loaded[rank] = ev.get("times", {})
                    if len(self.loaded) == len(self.socks):
                        self.all_loaded.set()

    def start_children(self, shards, model_cfg):
        args, s = self.args, self.s
        nnodes = max(1, args.nnodes)
        per_node = max(1, args.tp_size // nnodes)
        gpus = [args.base_gpu_id + i * args.gpu_id_step for i in range(per_node)]
        if max(gpus) >= s.gpus:
            self.fail("Scheduler hit an exception: Traceback (most recent call last):\n"
                      "RuntimeError: CUDA error: invalid device ordinal\n"
                      f"(tp_size={args.tp_size} needs GPU {max(gpus)}, this host has {s.gpus})")
        left_idx = None
        escape = True
        for f in self.faults:
            if f.kind == "leftover":
                left_idx = f.rank if 0 <= f.rank < per_node else per_node - 1
                escape = f.escape_cgroup
        weights_mib = int(s.gpu_mem_mib * s.weights_mem_frac)
        kv_mib = None
        if args.mem_fraction_static:
            kv_mib = max(256, int(s.gpu_mem_mib * args.mem_fraction_static) - weights_mib - s.ctx_mem_mib)
        kv_eff = kv_mib if kv_mib is not None else int(s.gpu_mem_mib * s.kv_mem_frac)
        quant = (model_cfg.get("quantization_config") or {}).get("quant_method")
        context_len = args.context_length or model_cfg.get("max_position_embeddings") or 131072
        common = {
            "settings": settings_mod.to_dict(s), "faults": faults_mod.to_json(self.faults),
            "shards": shards, "architecture": (model_cfg.get("architectures") or ["DeepseekV3ForCausalLM"])[0],
            "dtype": "torch." + str(model_cfg.get("torch_dtype", "bfloat16")), "quant": str(quant),
            "kv_mem_mib": kv_mib, "kv_tokens": int(kv_eff / 1024 * 43750) // 64 * 64,
            "kv_dtype": "torch.bfloat16" if args.kv_cache_dtype == "auto" else args.kv_cache_dtype,
            "chunked_prefill_size": args.chunked_prefill_size or 8192,
            "max_prefill_tokens": args.max_prefill_tokens,
            "max_running_requests": args.max_running_requests or 128, "context_len": context_len,
            "disable_cuda_graph": args.disable_cuda_graph, "speculative": bool(args.speculative_algorithm),
            "dg_cache_dir": _dg_cache_dir(), "ranks_on_node": per_node, "gpus_of_server": gpus, "nnodes": nnodes,
            "weight_cache_mode": args.weight_cache_mode, "weight_cache_socket": args.weight_cache_socket,
            "ipc_quant": list(weight_cache.quant_of(args.quantization, model_cfg)),
            "tensors": weight_cache.tensor_count(model_cfg),
        }
        det = spawn("sglang::detokenizer", "sglang.standin.detokenizer", {})
        self.children.append(det)
        procs = {}
        for i in range(per_node):
            rank = args.node_rank * per_node + i
            mine, theirs = socket.socketpair()
            is_left = i == left_idx
            spec = dict(common, rank=rank, local_index=i, gpu=gpus[i], fd=theirs.fileno(),
                        leftover=is_left, escape_cgroup=escape,
                        cache_config=weight_cache.config_of_args(args, model_cfg, rank))
            proc = spawn(f"sglang::scheduler_TP{rank}", "sglang.standin.rank", spec,
                         pass_fds=(theirs.fileno(),), new_session=is_left)
            theirs.close()
            if is_left:
                self.leftover = proc
            else:
                self.children.append(proc)
            self.socks[rank] = mine
            procs[rank] = proc
        self.procs = procs
        self.per_node = per_node
        for rank, sock in list(self.socks.items()):
            threading.Thread(target=self._watch, args=(rank, sock, procs[rank]), daemon=True).start()

    # -- nodes ---------------------------------------------------------------------
    def join_nodes(self):
        """The ranks wait after `Init parallel begin.` until every node has joined."""
        args = self.args
        first = min(self.procs)
        timeout_s = float(args.dist_timeout) if args.dist_timeout else DEFAULT_DIST_TIMEOUT_S
        if not args.dist_init_addr:
            self.fail("ValueError: the SGLang stand-in needs --dist-init-addr HOST:PORT with --nnodes > 1")
        try:
            rdv = Rendezvous(args.dist_init_addr, args.nnodes, args.node_rank,
                             self.per_node, timeout_s, self.on_node_lost, logs.write_raw)
            rdv.join()
            self.rdv = rdv
        except RendezvousError as e:
            self.fail(f"Scheduler hit an exception: Traceback (most recent call last):\n"
                      '  File "/opt/sglang/venvs/0.5.23/lib/python3.11/site-packages/sglang/srt/distributed/bootstrap.py", '
                      "line 321, in _init_parallel_groups\n"
                      "    init_distributed_environment(\n"
                      f"{e.args[0]}")
        self.first_rank = first
        self.rank_command({"cmd": "joined"})

    def cross_node_barrier(self):
        """Every rank of this node has its weights: the memory check after loading is an
        all-reduce over the ranks of every node, so they go on only once all nodes are there."""
        self.rdv.barrier("weights_loaded")
        self.rank_command({"cmd": "proceed"})

    def on_node_lost(self, node_rank):
        """A node's connection closed after the rendezvous: the next collective fails, as
        NCCL reports a remote process gone, and the server goes down with it."""
        time.sleep(self.s.phase_s("node_lost_s"))
        rank = self.first_rank
        logs.log("Scheduler hit an exception: Traceback (most recent call last):\n"
                 '  File "/opt/sglang/venvs/0.5.23/lib/python3.11/site-packages/sglang/srt/managers/scheduler.py", '
                 "line 3104, in run_scheduler_process\n"
                 "    scheduler.event_loop_overlap()\n"
                 f"torch.distributed.DistBackendError: NCCL error in: ProcessGroupNCCL.cpp:3690, remote process "
                 f"exited or there was a network error, NCCL version 2.28.9\n"
                 "ncclRemoteError: A call failed possibly due to a network error or a remote process exiting "
                 f"prematurely.\nLast error:\nnet.cc: connection closed by remote peer (node {node_rank})", rank)
        logs.log(f"Child process unexpectedly failed with exitcode=1. pid={self.procs[rank].pid}")
        logs.log("Received sigquit from a child process. It usually means the child failed.")
        self.die(1, kill_self=True)

    # -- main-process faults -----------------------------------------------------
    def checkpoint(self, phase):
        for f in self.faults:
            if f.phase != phase or f.kind not in ("stall", "fatal", "exit"):
                continue
            for preset in f.line:
                for m in logs.fatal_messages(preset, 0, self.s):
                    logs.log(m)
            if f.kind == "exit" or f.then == "exit":
                self.die(f.code)
            self.rank_command({"cmd": "hang", "mode": f.mode})
            if f.mode == "spin":
                burn(None, self.s.spin_duty)
            sleep_forever()

    # -- HTTP --------------------------------------------------------------------
    def bind_error(self):
        host, port = self.args.host, self.args.port
        logs.uvicorn(f"[Errno 98] error while attempting to bind on address ({host!r}, {port}): "
                     "address already in use", level="ERROR")
        logs.uvicorn("Waiting for application shutdown.")
        logs.uvicorn("Application shutdown complete.")
        self.die(1)

    def start_http(self, dummy=False):
        args = self.args
        model_cfg = weights.model_config(args.model_path)
        model_info = {
            "model_path": args.model_path, "tokenizer_path": args.tokenizer_path, "is_generation": True,
            "preferred_sampling_params": None, "weight_version": "default",
            "has_image_understanding": False, "has_audio_understanding": False,
            "model_type": model_cfg.get("model_type"), "architectures": model_cfg.get("architectures"),
        }
        server_args = {k: v for k, v in vars(args).items() if k != "api_key"}
        self.state = ServerState(args, model_info, server_args,
                                 lambda cmd: self.rank_command(cmd, rank=0 if cmd.get("cmd") == "prefill" else None),
                                 self.s.health_check_timeout_s, dummy=dummy,
                                 decode_s_per_token=self.s.decode_s_per_token)
        if not dummy:
            logs.uvicorn(f"Started server process [{os.getpid()}]")
            logs.uvicorn("Waiting for application startup.")
            logs.uvicorn("Application startup complete.")
        if any(f.kind == "port_in_use" for f in self.faults):
            self.bind_error()
        try:
            httpd = make_server(args.host, args.port, self.state)
        except OSError as e:
            if e.errno == 98:
                self.bind_error()
            raise
        threading.Thread(target=httpd.serve_forever, daemon=True).start()
        if dummy:
            # 0.5.23's dummy server runs uvicorn at log level warning: only SGLang's own line.
            logs.log(f"Dummy health check server started in background thread at {args.host}:{args.port}")
        else:
            logs.uvicorn(f"Uvicorn running on http://{args.host}:{args.port} (Press CTRL+C to quit)")

    def _request(self, method, path, body=None):
        host = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}.get(self.args.host, self.args.host)
        if ":" in host:
            host = f"[{host}]"
        req = urllib.request.Request(f"http://{host}:{self.args.port}{path}", method=method,
                                     data=json.dumps(body).encode() if body is not None else None,
                                     headers={"Content-Type": "application/json"})
        if self.args.api_key:
            req.add_header("Authorization", f"Bearer {self.args.api_key}")
        with urllib.request.urlopen(req, timeout=600) as r:
            return r.read()

    def warmup(self):
        self.rank_command({"cmd": "busy"})
        try:
            self._request("GET", "/get_model_info" if self.family == "0.5.16" else "/model_info")
            time.sleep(self.s.phase_s("warmup_s"))
            self._request("POST", "/generate", {"text": "The capital city of France is",
                                                "sampling_params": {"temperature": 0, "max_new_tokens": 8}})
        except Exception as e:  # noqa: BLE001 - any failure is SGLang's "warmup error"
            self.fail(f"Initialization failed. warmup error: {e!r}")

    # -- run ---------------------------------------------------------------------
    def run(self):
        args, s = self.args, self.s
        if args.tokenizer_path is None:
            args.tokenizer_path = args.model_path
        logs.log(_args_line(args, self.family))
        try:
            json.loads(args.model_loader_extra_config)
        except ValueError as e:
            self.fail(f"json.decoder.JSONDecodeError: {e} (--model-loader-extra-config)")
        if not os.path.isdir(args.model_path):
            self.fail(f"OSError: {args.model_path} is not a local folder and is not a valid model identifier "
                      "(the SGLang stand-in loads local folders only)")
        if args.nnodes < 1 or args.tp_size % args.nnodes or not 0 <= args.node_rank < args.nnodes:
            self.fail("AssertionError: tp_size must be divisible by number of nodes" if args.nnodes >= 1
                      and args.tp_size % args.nnodes else
                      f"ValueError: --node-rank {args.node_rank} is not in 0..{args.nnodes - 1} (--nnodes {args.nnodes})")
        shards = weights.shard_files(args.model_path)
        if not shards:
            self.fail(f"RuntimeError: Cannot find any model weights with `{args.model_path}`")
        signal.signal(signal.SIGTERM, self.on_term)
        signal.signal(signal.SIGINT, self.on_term)
        t_start = time.monotonic()
        self.start_children(shards, weights.model_config(args.model_path))
        if args.nnodes > 1:
            self.join_nodes()
        while not self.all_loaded.wait(1.0):
            pass
        if args.nnodes > 1:
            self.rdv.barrier("loaded")   # CUDA graph capture runs TP forwards: no node ends it alone
        times = dict(self.loaded.get(min(self.loaded), {}))
        t_http = time.monotonic()
        self.checkpoint("http_server")
        time.sleep(s.phase_s("http_start_s"))
        dummy = args.node_rank > 0
        self.start_http(dummy=dummy)
        times["http_server"] = time.monotonic() - t_http
        self.state.startup_time.update({k: round(v, 3) for k, v in times.items()})
        if not dummy:
            t_warm = time.monotonic()
            self.checkpoint("warmup")
            self.warmup()
            self.state.startup_time["warmup"] = round(time.monotonic() - t_warm, 3)
        self.state.startup_time["total"] = round(time.monotonic() - t_start, 3)
        self.state.ready.set()
        if not dummy:
            logs.log("The server is fired up and ready to roll!")
        self.rank_command({"cmd": "idle"})
        for f in self.faults:
            if f.kind == "hang_after_ready":
                time.sleep(f.after_s)
                self.state.hung.set()
                self.rank_command({"cmd": "hang", "mode": f.mode})
            elif f.kind == "prefill_saturation":
                time.sleep(f.after_s)
                self.state.saturate(f)
                self.rank_command({"cmd": "busy"})
                time.sleep(f.seconds)
                self.state.end_saturation()
                self.rank_command({"cmd": "idle"})
        sleep_forever()


def run(argv, prog="launch_server.py"):
    args = server_args_mod.parse_args(argv, prog)
    release.load_kernels()
    if args.weight_cache_mode == "daemon":
        sys.stderr.write("SGLang stand-in: --weight-cache-mode daemon (weight cache daemons spawned by the "
                         "engine, gone with it) is not imitated; run `python -m sglang.srt.weight_cache.daemon` "
                         "and start the server with --weight-cache-mode client\n")
        return 2
    try:
        settings = settings_mod.load()
        text, _origin = faults_mod.read_source(settings)
        all_faults = faults_mod.parse(json.loads(text)) if text else []
    except (ValueError, OSError) as e:
        sys.stderr.write(f"SGLang stand-in configuration error: {e}\n")
        return 2
    try:
        os.makedirs(settings.state_dir, exist_ok=True)
        start_no = faults_mod.count_start(settings.state_dir, text) if text else 0
    except OSError as e:
        sys.stderr.write(f"SGLang stand-in: state directory {settings.state_dir} is not writable: {e}\n")
        return 1
    active = faults_mod.active(all_faults, start_no)
    Main(args, settings, active, argv).run()
    return 0
