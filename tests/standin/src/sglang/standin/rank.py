"""One TP rank of the SGLang stand-in (title `sglang::scheduler_TP{n}`).

Runs the start-up phases the way a real scheduler process does (own log lines with
its TP prefix, rank 0 draws the bars), reads its share of every weight shard from
disk, holds stand-in GPU memory, then reports `loaded` to the main process and obeys
its commands (busy / idle / prefill / hang). Faults take effect at phase checkpoints.
"""
import json
import os
import signal
import socket
import threading
import time

from sglang.standin import faults as faults_mod
from sglang.srt.weight_cache import protocol
from sglang.standin import inductor, logs, wc_client, weights
from sglang.standin.gpustate import Holder, read_holders
from sglang.standin.procs import burn, child_setup, sleep_forever, spawn
from sglang.standin.settings import from_dict
from sglang.standin.weight_cache import check_ipc_quant_support

UTIL_LOADING = (0, 3)
UTIL_BUSY = (45, 96)
UTIL_SPIN = (97, 100)
UTIL_IDLE = (0, 1)


def batch_sizes(n):
    sizes = [1, 2, 4]
    while len(sizes) < n:
        sizes.append(8 * (len(sizes) - 2))
    return sizes[:n]


def escape_cgroup():
    """Best effort: leave the unit's cgroup(s) so stopping the unit cannot reach us."""
    targets = []
    try:
        with open("/proc/self/cgroup", encoding="utf-8") as f:
            for line in f:
                _, controllers, _ = line.rstrip("\n").split(":", 2)
                if controllers == "":
                    targets.append("/sys/fs/cgroup/cgroup.procs")
                    targets.append("/sys/fs/cgroup/unified/cgroup.procs")
                else:
                    for c in controllers.split(","):
                        targets.append(f"/sys/fs/cgroup/{c.replace('name=', '')}/cgroup.procs")
    except OSError:
        return
    for path in targets:
        try:
            with open(path, "w", encoding="utf-8") as f:
                f.write(str(os.getpid()))
        except OSError:
            pass


class Rank:
    def __init__(self, spec):
        self.spec = spec
        self.rank = spec["rank"]
        self.gpu = spec["gpu"]
        self.s = from_dict(spec["settings"])
        self.faults = faults_mod.parse(spec["faults"])
        self.family = self.s.log_family
        self.sock = socket.socket(fileno=spec["fd"])
        self.sock_lock = threading.Lock()
        self.holder = Holder(self.s.state_dir, self.gpu, spec["parent_pid"])
        self.total = self.s.gpu_mem_mib
        self.weights_mib = int(self.total * self.s.weights_mem_frac)
        kv = spec.get("kv_mem_mib")
        self.kv_mib = int(kv if kv is not None else self.total * self.s.kv_mem_frac)
        self.times = {}
        self.inbox = b""              # bytes from the main process not yet read as commands

    # -- plumbing --------------------------------------------------------------
    def send(self, event, **kw):
        data = (json.dumps(dict(kw, event=event, rank=self.rank)) + "\n").encode()
        with self.sock_lock:
            try:
                self.sock.sendall(data)
            except OSError:
                pass

    def log(self, msg):
        logs.log(msg, self.rank)

    def sleep(self, key_or_s):
        s = self.s.phase_s(key_or_s) if isinstance(key_or_s, str) else key_or_s
        if s > 0:
            time.sleep(s)

    def avail_gb(self):
        """Free memory of this GPU: ours and every other holder's (a weight cache daemon) taken."""
        others = sum(h.mem_mib for h in read_holders(self.s.state_dir) if h.gpu == self.gpu and h.pid != os.getpid())
        return (self.total - self.s.gpu_idle_mem_mib - self.holder.mem_mib - others) / 1024

    def gb(self, mib):
        return mib / 1024

    # -- faults ----------------------------------------------------------------
    def _mine(self, fault, default_all):
        return (default_all and not fault.ranks) or self._prints(fault, self.rank)

    def _sends_exit(self, fault):
        """Whether this rank tells the server to exit after `fault`'s lines: a rank that prints
        them, once they are out; rank 0 only when none of them runs on this node (an exit
        from rank 0 beside a printing rank let the server kill it before its lines on a
        loaded host)."""
        return self._prints(fault, self.rank) or (self.rank == 0 and not self._printer_on_node(fault))

    def _printer_on_node(self, fault):
        """Whether a rank this node runs prints `fault`'s lines (its ranks; none named: rank 0)."""
        first = self.rank - self.spec["local_index"]
        return any(self._prints(fault, r) for r in range(first, first + self.spec["ranks_on_node"]))

    @staticmethod
    def _prints(fault, rank):
        """Whether `rank` prints `fault`'s lines: a rank it names, else rank 0."""
        return rank in fault.ranks if fault.ranks else rank == 0

    def hang(self, mode):
        self.holder.set(util=UTIL_SPIN if mode == "spin" else UTIL_IDLE)
        if mode == "spin":
            burn(None, self.s.spin_duty)
        sleep_forever()

    def benign(self, phase, at):
        """The behaviours of a healthy start that look alarming (faults.BENIGN_KINDS)."""
        for f in self.faults:
            if f.kind not in faults_mod.BENIGN_KINDS or f.phase != phase or f.at != at:
                continue
            if f.kind == "benign_line" and self._mine(f, False):
                for preset in f.line:
                    if preset == "inductor_oom":
                        logs.write_raw(inductor.autotune_record() + "\n")
                    else:
                        for msg in logs.fatal_messages(preset, self.rank, self.s):
                            self.log(msg)
            elif f.kind == "autotune" and self._mine(f, False):
                inductor.autotune(f, self.holder, self.s)
            elif f.kind == "tuning_loop" and self._mine(f, True):
                inductor.tuning_loop(f, self.holder)

    def checkpoint(self, phase, at=0):
        self.benign(phase, at)
        for f in self.faults:
            if f.phase != phase or f.at != at or f.kind not in ("stall", "fatal", "exit"):
                continue
            if f.kind == "stall":
                self.hang(f.mode if self._mine(f, True) else "idle")
            prints = self._mine(f, False)
            if prints:
                for preset in f.line:
                    for msg in logs.fatal_messages(preset, self.rank, self.s):
                        self.log(msg)
            if f.kind == "exit" or f.then == "exit":
                if self._sends_exit(f):
                    self.send("exit", code=f.code)
                self.hang("idle")
            self.hang(f.mode)

    # -- phases ----------------------------------------------------------------
    def distributed_init(self):
        t0 = time.monotonic()
        self.holder.set(mem_mib=self.s.ctx_mem_mib // 4, util=UTIL_LOADING)
        if self.family == "0.5.16":
            self.log("Init torch distributed begin.")
        else:
            self.log("Init parallel begin.")
        self.checkpoint("distributed_init")
        if self.spec.get("nnodes", 1) > 1:
            self.wait_for("joined")
        if self.family != "0.5.16" and self.rank == 0:
            self.log("sglang is using nccl==2.28.9")
        self.sleep("init_s")
        self.holder.set(mem_mib=self.s.ctx_mem_mib)
        self.check_balanced()
        used = self.gb(self.s.ctx_mem_mib)
        if self.family == "0.5.16":
            self.log(f"Init torch distributed ends. mem usage={used:.2f} GB")
        else:
            self.log(f"Init parallel ends. elapsed={time.monotonic() - t0:.2f} s, mem usage={used:.2f} GB")
        self.times["distributed_init"] = time.monotonic() - t0

    def check_balanced(self):
        """SGLang's memory check: a GPU of this server with much less free memory than this
        rank's (held by another server's processes, e.g. a leftover rank) makes it refuse
        to start. Memory held alike on every GPU (a weight cache daemon's) is balanced."""
        ours = set(self.spec["gpus_of_server"])
        foreign = {g: 0 for g in ours}
        for h in read_holders(self.s.state_dir):
            if h.gpu in ours and h.owner != self.spec["parent_pid"]:
                foreign[h.gpu] += h.mem_mib
        free = {g: self.total - m for g, m in foreign.items()}
        if min(free.values()) < max(free.values()) * 0.9:
            if free[self.gpu] * 0.9 > min(free.values()):
                for msg in logs.fatal_messages("unbalanced", self.rank, self.s):
                    self.log(msg)
            self.send("exit", code=1)
            self.hang("idle")

    def weight_load(self):
        t0 = time.monotonic()
        self.log(f"Load weight begin. avail mem={self.avail_gb():.2f} GB")
        self.checkpoint("weight_load", 0)
        attached = self.spec.get("weight_cache_mode") == "client" and self.attach_weights()
        if attached:
            self.checkpoint("post_load")
            used = 0.0
        else:
            self.load_from_disk()
            used = self.gb(self.weights_mib)
        arch, dtype = self.spec["architecture"], self.spec["dtype"]
        if self.family == "0.5.16":
            self.log(f"Load weight end. type={arch}, dtype={dtype}, avail mem={self.avail_gb():.2f} GB, "
                     f"mem usage={used:.2f} GB.")
        else:
            self.log(f"Load weight end. elapsed={time.monotonic() - t0:.2f} s, type={arch}, "
                     f"quant={self.spec['quant']}, avail mem={self.avail_gb():.2f} GB, mem usage={used:.2f} GB.")
        self.times["load_weight"] = time.monotonic() - t0

    def load_from_disk(self):
        shards = self.spec["shards"]
        n = max(1, len(shards))
        bar = None
        if self.rank == 0:
            desc = ("Loading safetensors checkpoint shards" if self.family == "0.5.16"
                    else "Multi-thread loading shards")
            bar = logs.Bar(desc, len(shards))
        for i in weights.load_shards(shards, self.s, self.faults, self.spec["local_index"],
                                     self.spec["ranks_on_node"]):
            self.holder.set(mem_mib=self.s.ctx_mem_mib + self.weights_mib * (i + 1) // n)
            if bar:
                bar.update()
            self.checkpoint("weight_load", i + 1)
        if not shards:
            self.holder.set(mem_mib=self.s.ctx_mem_mib + self.weights_mib)
        if bar:
            bar.close()
        self.checkpoint("post_load")
        self.sleep("post_load_s")

    def attach_weights(self):
        """--weight-cache-mode client: map the daemon's weights (True), or fall back to a
        disk load when its socket file does not exist (False). Any other trouble ends
        the start, as in SGLang."""
        tic = time.monotonic()
        try:
            check_ipc_quant_support(*self.spec["ipc_quant"], where="client")
            path = self.spec["weight_cache_socket"] or protocol.get_socket_path(protocol.device_uuid(self.gpu))
            result = wc_client.fetch_from_cache(path, self.spec["cache_config"], self.log)
        except (RuntimeError, ValueError) as e:
            self.scheduler_exception(e)
        if result is None:
            self.log("[IpcModelLoader] Weight cache not available or config mismatch, falling back to disk load")
            return False
        attach_s = self.s.phase_s("weight_cache_attach_s")
        n = result.get("tensors", self.spec["tensors"])
        self.sleep(attach_s * 0.1)
        self.log(f"[IpcModelLoader] Fetched {n} tensors from daemon (transport={result['transport_backend']}) "
                 f"in {time.monotonic() - tic:.2f}s")
        m0 = time.monotonic()
        self.sleep(attach_s * 0.9)
        self.log(f"[IpcModelLoader] Zero-copy: mapped {n} tensors (0 new post-quant), "
                 f"time={time.monotonic() - m0:.3f}s")
        wc_client.start_liveness_watchdog(int(result["pid"]), self.log, self.log)
        self.log(f"[IpcModelLoader] Loaded model via IPC (mode=client), total={time.monotonic() - tic:.2f}s")
        return True

    def scheduler_exception(self, error):
        """SGLang's scheduler: the traceback in its log, SIGQUIT to the main process."""
        name = type(error).__name__
        if name == "UnsupportedQuantForIPCError":
            name = "sglang.srt.weight_cache.protocol." + name
        self.log("Scheduler hit an exception: Traceback (most recent call last):\n"
                 f'  File "{wc_client.IPC_LOADER}", line 118, in load_model\n'
                 "    cache_data = self._fetch_from_cache(model_config, device_config)\n"
                 f"{name}: {error}")
        self.send("sigquit")
        self.hang("idle")

    def cross_node_barrier(self):
        """The memory check after loading is an all-reduce over every node's ranks: here a
        node waits for the slowest one, its GPUs spinning in the collective."""
        if self.spec.get("nnodes", 1) <= 1:
            return
        self.holder.set(util=UTIL_SPIN)
        self.send("weights_loaded")
        self.wait_for("proceed")
        self.holder.set(util=UTIL_LOADING)

    def kv_cache(self):
        t0 = time.monotonic()
        self.cross_node_barrier()
        self.checkpoint("kv_cache")
        self.sleep("kv_cache_s")
        self.holder.set(mem_mib=self.holder.mem_mib + self.kv_mib)
        tokens = self.spec["kv_tokens"]
        line = f"KV Cache is allocated. #tokens: {tokens}, KV size: {self.gb(self.kv_mib):.2f} GB"
        if self.family != "0.5.16":
            line += f", dtype: {self.spec['kv_dtype']}"
        self.log(line)
        self.log(f"Memory pool end. avail mem={self.avail_gb():.2f} GB")
        self.times["kv_cache_allocation"] = time.monotonic() - t0

    def jit(self):
        long_jit = [f for f in self.faults if f.kind == "long_jit"]
        forced = any(f.phase == "jit_compile" for f in self.faults if f.kind in ("stall", "fatal", "exit"))
        marker = os.path.join(self.spec["dg_cache_dir"], "standin-kernels.json")
        if long_jit:
            seconds = long_jit[0].seconds
            compilers = long_jit[0].compilers or self.s.jit_compilers
        elif self.s.jit_s > 0 and not os.path.exists(marker):
            seconds, compilers = self.s.phase_s("jit_s"), self.s.jit_compilers
        elif forced:
            seconds, compilers = max(0.5, self.s.phase_s("jit_s")), self.s.jit_compilers
        else:
            return
        t0 = time.monotonic()
        self.holder.set(util=(0, 0))
        if self.rank == 0:
            self.log("Entering DeepGEMM JIT Pre-Compile session. It may take a long time (typically 10-20 mins) "
                     "if you have not run `sglang.compile_deep_gemm`. It is recommended to run "
                     "`sglang.compile_deep_gemm` with same args as `sglang.launch_server` for pre-compilation "
                     "to reduce the overhead if you have not run it before. For example: "
                     "`python3 -m sglang.compile_deep_gemm --model deepseek-ai/DeepSeek-V3 --tp 8 "
                     "--trust-remote-code`")
        self.checkpoint("jit_compile")
        if self.rank == 0:
            os.makedirs(self.spec["dg_cache_dir"], exist_ok=True)
            names = ["nvcc", "cc1plus", "ptxas"]
            procs = [spawn(names[i % 3], "sglang.standin.compiler",
                           {"seconds": seconds, "cache_dir": self.spec["dg_cache_dir"],
                            "duty": self.s.spin_duty})
                     for i in range(compilers)]
            for p in procs:
                p.wait()
            with open(marker, "w", encoding="utf-8") as f:
                json.dump({"kernels": compilers, "compiled_s": seconds}, f)
            open(self.jit_barrier(), "w").close()
        else:
            # The other ranks wait for rank 0 at the next collective.
            self.sleep(seconds)
            while not os.path.exists(self.jit_barrier()):
                time.sleep(0.2)
        self.times["jit_compile"] = time.monotonic() - t0

    def jit_barrier(self):
        return os.path.join(self.s.state_dir, f"jit-done-{self.spec['parent_pid']}")

    def cuda_graph(self):
        t0 = time.monotonic()
        if self.spec["disable_cuda_graph"]:
            self.checkpoint("cuda_graph")
            return
        groups = ["decode"]
        if self.spec["speculative"]:
            groups = ["target verify", "draft decode"]
        n = max(1, self.s.cuda_graph_batches)
        sizes = batch_sizes(n)
        per_batch = self.s.phase_s("cuda_graph_s") / (n * len(groups))
        graph_step = self.s.graph_mem_mib / (n * len(groups))
        self.holder.set(util=UTIL_BUSY)
        done = 0
        for g, group in enumerate(groups):
            if self.family == "0.5.16":
                self.log(f"Capture cuda graph begin. This can take up to several minutes. "
                         f"avail mem={self.avail_gb():.2f} GB")
            else:
                self.log(f"Capture {group if group != 'decode' else 'target decode'} CUDA graph begin. "
                         f"This can take up to several minutes. avail mem={self.avail_gb():.2f} GB")
            g0 = time.monotonic()
            if g == 0:
                self.checkpoint("cuda_graph", 0)
            bar = None
            if self.rank == 0:
                bar = logs.Bar(f"Capturing batches (bs={sizes[-1]} avail_mem={self.avail_gb():.2f} GB)", n,
                               style="classic")
            for k, bs in enumerate(reversed(sizes)):
                time.sleep(per_batch)
                self.holder.mem_mib += graph_step
                self.holder.set()
                done += 1
                if bar:
                    nxt = sizes[-k - 2] if k + 1 < n else bs
                    bar.update(desc=f"Capturing batches (bs={nxt} avail_mem={self.avail_gb():.2f} GB)")
                if g == 0:
                    self.checkpoint("cuda_graph", k + 1)
            if bar:
                bar.close()
            usage = self.gb(graph_step * n)
            if self.family == "0.5.16":
                self.log(f"Capture cuda graph end. Time elapsed: {time.monotonic() - g0:.2f} s. "
                         f"mem usage={usage:.2f} GB. avail mem={self.avail_gb():.2f} GB.")
            else:
                name = group if group != "decode" else "target decode"
                self.log(f"Capture {name} CUDA graph end. bs={sizes}, elapsed={time.monotonic() - g0:.2f} s, "
                         f"mem usage={usage:.2f} GB, avail mem={self.avail_gb():.2f} GB.")
        self.times["cuda_graph"] = time.monotonic() - t0

    def summary(self):
        if self.rank != 0:
            return
        line = (f"max_total_num_tokens={self.spec['kv_tokens']}, chunked_prefill_size="
                f"{self.spec['chunked_prefill_size']}, max_prefill_tokens={self.spec['max_prefill_tokens']}, "
                f"max_running_requests={self.spec['max_running_requests']}, "
                f"context_len={self.spec['context_len']}")
        if self.family != "0.5.16":
            line += f", available_gpu_mem={self.avail_gb():.2f} GB"
        self.log(line)

    def wait_for(self, name):
        """Block until the main process sends command `name` (every node has joined the
        rendezvous, every node has its weights), serving the other commands meanwhile."""
        while b"\n" not in self.inbox:
            data = self.sock.recv(65536)
            if not data:
                sleep_forever()       # the main process is gone; PR_SET_PDEATHSIG ends us
            self.inbox += data
        line, self.inbox = self.inbox.split(b"\n", 1)
        cmd = json.loads(line)
        if cmd.get("cmd") != name:
            self.command(cmd)
            self.wait_for(name)

    # -- after loading -----------------------------------------------------------
    def serve_commands(self):
        buf, self.inbox = self.inbox, b""
        while True:
            try:
                data = self.sock.recv(65536)
            except OSError:
                data = b""
            if not data:
                # The main process is gone: a leftover rank keeps holding its memory.
                self.holder.set(util=UTIL_IDLE)
                sleep_forever()
            buf += data
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                self.command(json.loads(line))

    def command(self, cmd):
        what = cmd.get("cmd")
        if what == "busy":
            self.holder.set(util=UTIL_BUSY)
        elif what == "idle":
            self.holder.set(util=UTIL_IDLE)
        elif what == "prefill" and self.rank == 0:
            self.log(f"Prefill batch. #new-seq: 1, #new-token: {cmd.get('tokens', 1)}, #cached-token: 0, "
                     "token usage: 0.00, #running-req: 0, #queue-req: 0")
        elif what == "hang":
            self.hang(cmd.get("mode", "idle"))

    def run(self):
        self.distributed_init()
        self.weight_load()
        self.kv_cache()
        self.jit()
        self.cuda_graph()
        self.summary()
        self.holder.set(util=UTIL_IDLE)
        self.send("loaded", times=self.times)
        self.serve_commands()


def child_main(spec):
    leftover = spec.get("leftover", False)
    child_setup(spec, comm=spec["title"], with_parent=not leftover)
    if leftover:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        if spec.get("escape_cgroup"):
            escape_cgroup()
    Rank(spec).run()
