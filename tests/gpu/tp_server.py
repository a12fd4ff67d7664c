#!/usr/bin/env python3
"""A real tensor-parallel start on NVIDIA GPUs that logs like an SGLang server: a
launcher process starts one rank process per GPU (`--tp-rank N` on their command
lines, as py-spy's rank lookup expects), the ranks join a NCCL process group, "load"
random bf16 weights onto their GPU (SGLang's `--load-format dummy`) and agree on free
memory with an all-reduce, then:

  --scenario tune   every rank runs a GPU-bound kernel autotune for --tune-s seconds
                    (matmul candidates replayed as CUDA graphs and timed with CUDA
                    events, a synchronize after each: a constant Python stack, flat
                    memory, no log lines), then graph capture, HTTP up, ready.
  --scenario hang   graph capture runs a TP forward (matmul + NCCL all-reduce) per
                    batch size; at batch --hang-at-batch the last rank stops entering
                    the collective (it blocks on an event nobody sets) while rank 0 is
                    inside the all-reduce and waits for it in a synchronize. The rank
                    writes the moment it stopped to --hang-mark first.
  --scenario compile  graph capture preceded by a cold `torch.compile(mode="max-autotune")`
                    of matmul blocks of several shapes (fresh Inductor and Triton caches):
                    Inductor's own autotuner, its compile workers and its log records,
                    for about --compile-s seconds, then capture, HTTP up, ready.
  --scenario spin     graph capture; at batch --hang-at-batch rank 0 launches a kernel that
                    never ends in time (torch.cuda._sleep for --spin-cycles cycles) and
                    waits for it in a synchronize. Writes the moment to --hang-mark.
  --scenario init_hang  the launcher starts ranks 0..tp_size-2 only: the last rank never
                    comes (its host is down), so the others wait in the rendezvous of
                    init_process_group. Writes the moment to --hang-mark.
  --scenario sparse   a tuning loop that times short kernels with a synchronize, then
                    waits --gap-min-s..--gap-max-s in the same function before the next
                    config (GPU idle on most polls, bursts between), for --tune-s seconds.
  --scenario capture  graph capture that runs GPU-bound TP forwards for --capture-s seconds
                    (time-based, so one rank only): a constant stack in synchronize, no log
                    line while the bar moves by \r frames; then HTTP up, ready.
  --scenario soft_oom after the KV cache a memory probe asks for more than the GPU has: a real
                    torch.OutOfMemoryError, caught and logged with its traceback; then
                    --cpu-phase-s seconds of pure-Python CPU work (one core, no log line, no
                    GPU work), capture, HTTP up, ready.
  --scenario sticky   two ranks on one GPU (gloo collectives): in graph capture rank 0 indexes
                    out of bounds on the GPU (a real device-side assert, sticky for its
                    context), logs the error and waits for a result that never comes; rank 1
                    waits for rank 0 in the next all-reduce. Writes the moment to --hang-mark.
  --scenario bind     after capture the HTTP server cannot bind its port (another process
                    holds it): uvicorn's error line, then the rank and --idle-procs helper
                    processes sit in their poll loops. Writes the moment to --hang-mark.
  --scenario long_sync  graph capture whose forwards are queued as one CUDA graph replayed
                    for about --sync-s seconds of bf16 matmuls, with one synchronize after
                    them: the rank sits in that one call, the GPU flat out; then ready.
  --scenario workers  --workers short-lived helper processes (compile workers) start and exit
                    one after another, then --gemm-s seconds of silent bf16 matmuls with a
                    synchronize every --sync-every-s seconds; then capture, HTTP up, ready.
  --scenario vanish   graph capture of GPU-bound forwards (--capture-s); the rank writes
                    "time pid" to --hang-mark when it begins, so that another process can
                    kill it; the launcher (--launcher-waits) reaps it without a word and
                    waits on forever.
  --scenario frozen   like vanish, but the mark is written right after "Load weight end",
                    for another process to stop the start there (SIGSTOP).
  --scenario nodes    a start over --nnodes "nodes" (one launcher each, --node-rank,
                    --dist-init-addr HOST:PORT, gloo): each launcher starts its node's ranks;
                    rank 0 writes "time pid" to --hang-mark as it enters the rendezvous, where
                    it waits until every node's ranks have come; then load, capture, ready.

Used by record_real_traces.py on a machine with NVIDIA GPUs; not a unit test.
"""
import argparse
import datetime
import json
import os
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

RANK = None
# NVLink multicast must stay off on shared hosts (it can take the GPUs out of service).
SAFE_ENV = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}


def log(msg, rank=True):
    stamp = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime())
    prefix = "[%s TP%d] " % (stamp, RANK) if rank and RANK is not None else ("[%s] " % stamp if rank else "")
    sys.stderr.write(prefix + msg + "\n")
    sys.stderr.flush()


# ---------------------------------------------------------------------- launcher
def launch(a, argv):
    log("server_args=ServerArgs(model_path='%s', tp_size=%d, port=%d, load_format='dummy')"
        % (a.model_path, a.tp_size, a.port), rank=False)
    host, port = (a.dist_init_addr.rsplit(":", 1) if a.dist_init_addr else ("127.0.0.1", str(a.dist_port)))
    env = dict(os.environ, PYTHONUNBUFFERED="1", MASTER_ADDR=host, MASTER_PORT=port, **SAFE_ENV)
    per_node = a.tp_size // a.nnodes
    first = a.node_rank * per_node
    started = per_node - 1 if a.scenario == "init_hang" else per_node
    ranks = [subprocess.Popen([sys.executable, os.path.abspath(__file__)] + argv + ["--tp-rank", str(r)], env=env)
             for r in range(first, first + started)]
    # SGLang's other processes (tokenizer, detokenizer): poll loops, a CPU floor and no more.
    helpers = [subprocess.Popen([sys.executable, os.path.abspath(__file__), "--helper"], env=env)
               for _ in range(a.idle_procs)]
    if a.launcher_waits:
        wait_forever()
    # As SGLang's launcher: a rank that dies takes the others down with it.
    while True:
        pid, status = os.wait()
        code = os.waitstatus_to_exitcode(status)
        if code != 0:
            log("Rank %d scheduler is dead. exit code %d" % ([p.pid for p in ranks].index(pid), code), rank=False)
            for p in ranks + helpers:
                if p.poll() is None:
                    p.kill()
            sys.exit(1)
        if all(p.poll() is not None for p in ranks):
            return


def wait_forever():
    """The launcher waits for its server to come up: a child that dies is reaped without a
    word (its exit leaves the process tree) and the launcher waits on."""
    while True:
        try:
            os.wait()
        except ChildProcessError:
            time.sleep(3600)


def post_load_work(torch, w, seconds):
    """GPU work after the load (repacking, as a quantized checkpoint needs), no log line."""
    x = w[:4096, :4096].clone()
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        x = torch.tanh(x @ x) * 0.5
        torch.cuda.synchronize()


def write_mark(path):
    with open(path, "w") as f:
        f.write("%.3f %d\n" % (time.time(), os.getpid()))


# ---------------------------------------------------------------------- ranks
def gib(nbytes):
    return nbytes / 2**30


def load_dummy_weights(torch, a, bar_cls):
    weights = []
    bar = bar_cls(a.n_shards, "Loading safetensors checkpoint shards") if RANK == 0 else None
    rows = int(a.shard_gib * 2**30 / 2 / 8192)
    for _ in range(a.n_shards):
        w = torch.randn(rows, 8192, dtype=torch.bfloat16, device="cuda")
        weights.append(w)
        x = w[:4096, :4096].clone()
        end = time.monotonic() + a.shard_s
        while time.monotonic() < end:
            x = torch.tanh(x @ x) * 0.5
            torch.cuda.synchronize()
        if bar:
            bar.update(1)
    if bar:
        bar.close()
    return weights


WEIGHT_SHAPES = {"large": ((4096, 7168), (7168, 2048), (2048, 7168), (14336, 4096)),
                 "small": ((1024, 1024), (1024, 2048), (2048, 1024), (2048, 2048))}


def candidate_configs(max_m, shapes="large"):
    """(M, N, K, transposed) shapes as a fused-MoE tuner walks them: every batch size
    from 1 to max_m for each weight shape, two layouts each. Small weights with small
    batches give kernels of a few microseconds, short beside the host's share of a step."""
    out = []
    for n, k in WEIGHT_SHAPES[shapes]:
        for m in (m for m in (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192) if m <= max_m):
            for transposed in (False, True):
                out.append((m, n, k, transposed))
    return out


def benchmark_config(torch, pool, a_buf, b_buf, cfg, iters):
    m, n, k, transposed = cfg
    x = a_buf[:m * k].view(m, k)
    w = b_buf[:n * k].view(k, n) if not transposed else b_buf[:n * k].view(n, k).t()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph, pool=pool):
        for _ in range(10):
            y = x @ w
    del y
    for _ in range(3):
        graph.replay()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(iters):
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) / 10)
    return sorted(times)[len(times) // 2], graph


def tune(torch, seconds, iters, max_m, shapes):
    """GPU-bound: kernels run while the host waits in synchronize, config after config."""
    configs = candidate_configs(max_m, shapes)
    max_mk = max(m * k for m, _, k, _ in configs)
    max_nk = max(n * k for _, n, k, _ in configs)
    a_buf = torch.randn(max_mk, dtype=torch.bfloat16, device="cuda")
    b_buf = torch.randn(max_nk, dtype=torch.bfloat16, device="cuda")
    # One memory pool for every candidate's graph, so memory stays flat; the first graph
    # is kept alive, since a pool whose last graph is freed cannot be captured into again.
    pool = torch.cuda.graph_pool_handle()
    keeper = benchmark_config(torch, pool, a_buf, b_buf, configs[0], 1)[1]
    best = {}
    end, done, i = time.monotonic() + seconds, 0, 0
    while time.monotonic() < end:
        cfg = configs[i % len(configs)]
        ms, _graph = benchmark_config(torch, pool, a_buf, b_buf, cfg, iters)
        key = cfg[:3]
        best[key] = min(best.get(key, ms), ms)
        i += 1
        done += 1
    del keeper
    return done, len(best)


def compile_autotune(torch, seconds, log_fn):
    """A cold max-autotune compile: every new shape is a new graph whose matmuls Inductor
    benchmarks config by config (Triton kernels compiled in its worker processes). What
    Inductor logs on the way (configs that do not fit, their tracebacks) goes to stderr as
    Inductor writes it."""
    import torch._dynamo
    end, shapes = time.monotonic() + seconds, 0
    sizes = [(m, n, k) for m in (256, 512, 1024, 2048, 4096) for n, k in ((4096, 7168), (7168, 2048), (2048, 7168), (14336, 4096), (3072, 5120))]
    for dtype in (torch.float32, torch.bfloat16):
        for m, n, k in sizes:
            if time.monotonic() >= end:
                return shapes
            torch._dynamo.reset()
            x = torch.randn(m, k, dtype=dtype, device="cuda")
            w1 = torch.randn(k, n, dtype=dtype, device="cuda")
            w2 = torch.randn(n, k, dtype=dtype, device="cuda")

            def block(x, w1, w2):
                return torch.relu(x @ w1) @ w2 + x
            compiled = torch.compile(block, mode="max-autotune-no-cudagraphs", dynamic=False, fullgraph=True)
            compiled(x, w1, w2)
            torch.cuda.synchronize()
            shapes += 1
    return shapes


def pace(torch, seconds):
    # Between configs the tuner waits here (a slot, a result from elsewhere): one place,
    # so every stack sample taken in a gap is the same.
    time.sleep(seconds)


def sparse_tune(torch, seconds, gap_min_s, gap_max_s, burst_s):
    """Short kernels timed with a synchronize, a burst every gap_min_s..gap_max_s."""
    import random
    rng = random.Random(RANK)
    x = torch.randn(2048, 2048, dtype=torch.bfloat16, device="cuda")
    end, bursts = time.monotonic() + seconds, 0
    while time.monotonic() < end:
        burst_end = time.monotonic() + burst_s * rng.uniform(0.3, 1.0)
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        while time.monotonic() < burst_end:
            start.record()
            for _ in range(20):
                y = x @ x
            stop.record()
            torch.cuda.synchronize()
        bursts += 1
        pace(torch, min(rng.uniform(gap_min_s, gap_max_s), max(0.0, end - time.monotonic())))
    del y
    return bursts


def forward(torch, dist, w, x):
    y = torch.tanh(x @ w) * 0.5
    if dist.get_backend() == "gloo":   # gloo reduces host tensors
        y = y.cpu()
        dist.all_reduce(y)
        return y.cuda()
    dist.all_reduce(y)
    return y


def sticky_error(torch):
    """An out-of-bounds gather on the GPU: the index kernel's device-side assert, sticky
    for this context (every later CUDA call fails), reported at the next synchronize.
    Logged as SGLang's scheduler logs an exception it caught."""
    import traceback
    try:
        table = torch.zeros(1024, device="cuda")   # 1-D: a 2-D table printed the assert once per thread
        rows = torch.tensor([0, 1, 1 << 20], device="cuda")
        table[rows].sum().item()
        torch.cuda.synchronize()
    except Exception:  # pylint: disable=broad-except  # logged, as the scheduler does
        log("Scheduler hit an exception: %s" % traceback.format_exc().rstrip())


def memory_probe(torch):
    """Asks for more memory than the GPU has (a probe of the largest batch that fits, as
    a profile run does): a real OutOfMemoryError, caught and logged with its traceback."""
    import traceback
    total = torch.cuda.get_device_properties(0).total_memory
    try:
        torch.empty(int(total * 1.5) // 2, dtype=torch.bfloat16, device="cuda")
    except torch.OutOfMemoryError:
        log("Memory probe at max_running_requests=4096 failed, retrying with fewer requests:\n%s"
            % traceback.format_exc().rstrip())


def cpu_phase(seconds):
    """Pure-Python CPU work on one core (a tokenizer's vocabulary index, a grammar
    compile): no GPU work, no log line."""
    end, table, n = time.monotonic() + seconds, {}, 0
    while time.monotonic() < end:
        for i in range(10000):
            table[(n * 2654435761 + i) % 1000003] = i
        n += 1
    return len(table)


def helper_main():
    # A poll loop on a socket that never speaks, as a detokenizer waits on its zmq socket.
    import select
    import socket
    a, b = socket.socketpair()
    while True:
        select.select([a], [], [], 0.005)


def capture(torch, dist, a, w, bar_cls):
    batch_sizes = list(range(a.capture_batches, 0, -1))
    bar = bar_cls(len(batch_sizes), None, capture=True) if RANK == 0 else None
    never = threading.Event()
    for i, bs in enumerate(batch_sizes):
        if bar:
            bar.set_description("Capturing batches (bs=%d avail_mem=%.2f GB)" % (bs, gib(torch.cuda.mem_get_info()[0])))
        if a.scenario == "spin" and i == a.hang_at_batch and RANK == 0:
            with open(a.hang_mark, "w") as f:
                f.write("%.3f\n" % time.time())
            spin_kernel(torch, a)
            torch.cuda.synchronize()
        if a.scenario == "hang" and i == a.hang_at_batch and RANK == a.tp_size - 1:
            with open(a.hang_mark, "w") as f:
                f.write("%.3f\n" % time.time())
            wait_for_next_batch(never)
        if a.scenario == "sticky" and i == a.hang_at_batch and RANK == 0:
            with open(a.hang_mark, "w") as f:
                f.write("%.3f\n" % time.time())
            sticky_error(torch)
            wait_for_next_batch(never)
        x = w[:bs * 64, :4096]
        if a.capture_s > 0:   # one rank only: a time budget would not pair collectives up
            end = time.monotonic() + a.capture_s / len(batch_sizes)
            while time.monotonic() < end:
                y = forward(torch, dist, w[:4096, :4096], x)
                torch.cuda.synchronize()
        # A fixed count on every rank: collectives must pair up one to one.
        for _ in range(a.capture_iters if a.capture_s <= 0 else 0):
            y = forward(torch, dist, w[:4096, :4096], x)
            torch.cuda.synchronize()
        if bar:
            bar.update(1)
    if bar:
        bar.close()
    return y


def spin_kernel(torch, a):
    """A kernel that never ends: one warp polling a flag in GPU memory that nobody sets (a
    collective's wait for a peer), or torch.cuda._sleep for --spin-cycles clock cycles."""
    if a.spin_kind == "flag":
        try:
            import cupy
            kernel = cupy.RawKernel(r'''extern "C" __global__ void wait_flag(volatile int *flag) { while (*flag == 0) { } }''',
                                    "wait_flag")
            flag = cupy.zeros(1, dtype=cupy.int32)
            kernel((1,), (32,), (flag,))   # the legacy default stream: the synchronize below waits for it
            spin_kernel.flag = flag   # kept alive while the kernel polls it
            return
        except Exception as exc:  # pylint: disable=broad-except  # no cupy, or no compiler: the other spin
            log("no flag kernel (%s): spinning with torch.cuda._sleep instead" % exc, rank=False)
    torch.cuda._sleep(int(a.spin_cycles))


def matmul_graph(torch, size, count):
    """A CUDA graph of `count` bf16 matmuls of size x size, and the seconds one replay takes."""
    a_mat = torch.randn(size, size, dtype=torch.bfloat16, device="cuda")
    b_mat = torch.randn(size, size, dtype=torch.bfloat16, device="cuda")
    out = torch.empty(size, size, dtype=torch.bfloat16, device="cuda")
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(count):
            torch.matmul(a_mat, b_mat, out=out)
    graph.replay()
    torch.cuda.synchronize()
    t0 = time.monotonic()
    graph.replay()
    torch.cuda.synchronize()
    matmul_graph.keep.append((graph, a_mat, b_mat, out))
    return graph, max(time.monotonic() - t0, 1e-3)


matmul_graph.keep = []   # the graphs' tensors live as long as their graphs


def long_sync(torch, seconds):
    """The forwards of a capture queued as replays of one CUDA graph of bf16 matmuls, about
    `seconds` of work, and one synchronize for all of it."""
    graph, per_replay = matmul_graph(torch, 8192, 500)
    for _ in range(max(1, int(seconds / per_replay))):
        graph.replay()
    torch.cuda.synchronize()
    return per_replay


def compile_workers(n, gap_s):
    """Short-lived helpers (compile workers): each starts, works on the CPU a few seconds
    and exits 0, one after another."""
    code = "import time\nend = time.monotonic() + %f\nx = 0\nwhile time.monotonic() < end:\n    x += 1\n"
    procs = []
    for i in range(n):
        procs.append(subprocess.Popen([sys.executable, "-c", code % (4.0 + 2.0 * (i % 3))]))
        time.sleep(gap_s)
    for p in procs:
        p.wait()


def silent_gemms(torch, seconds, sync_every_s):
    """bf16 matmuls back to back, a synchronize every few seconds, no log line."""
    graph, per_replay = matmul_graph(torch, 6144, 200)
    end, steps = time.monotonic() + seconds, 0
    while time.monotonic() < end:
        for _ in range(max(1, int(sync_every_s / per_replay))):
            graph.replay()
        torch.cuda.synchronize()
        steps += 1
    return steps


def wait_for_next_batch(event):
    # The straggler: blocked on something that will not come (a lost broadcast, a
    # diverged code path), so it never enters the next collective.
    event.wait()


class Bar:
    def __init__(self, total, desc, capture=False):
        from tqdm import tqdm
        fmt = ("{desc}: {percentage:3.0f}%|{bar}| {n_fmt}/{total_fmt} [{elapsed}<{remaining}, {rate_fmt}]" if capture
               else "{desc}: {percentage:3.0f}% Completed | {n_fmt}/{total_fmt} [{elapsed}<{remaining}, {rate_fmt}]")
        self.bar = tqdm(total=total, desc=desc or "", bar_format=fmt, file=sys.stderr, mininterval=0, ascii=False)

    def set_description(self, desc):
        self.bar.set_description_str(desc)
        sys.stderr.flush()

    def update(self, n):
        self.bar.update(n)
        sys.stderr.flush()

    def close(self):
        self.bar.close()
        sys.stderr.flush()


def serve(torch, a, weight):
    lock = threading.Lock()
    state = {"ready": False}

    def complete():
        with lock:
            x = weight[:1024, :1024].float()
            token = int(torch.argmax(x @ x.T).item()) % 50000
        return token

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, fmt, *args):
            log('INFO:     127.0.0.1 - "%s" %s' % (self.requestline, args[1] if len(args) > 1 else ""), rank=False)

        def _send(self, code, obj):
            body = json.dumps(obj).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def do_GET(self):
            if self.path.startswith("/health"):
                self._send(200 if state["ready"] else 503, {})
            elif self.path in ("/model_info", "/v1/models"):
                self._send(200, {"model_path": a.model_path})
            else:
                self._send(404, {"detail": "Not Found"})

        def do_POST(self):
            length = int(self.headers.get("Content-Length") or 0)
            req = json.loads(self.rfile.read(length) or b"{}")
            if self.path not in ("/v1/completions", "/generate") or not state["ready"]:
                self._send(404 if state["ready"] else 503, {"detail": "server is starting"})
                return
            token = complete()
            self._send(200, {"id": "cmpl-%d" % token, "object": "text_completion",
                             "model": req.get("model", a.model_path),
                             "choices": [{"index": 0, "text": " tok%d" % token, "finish_reason": "length"}],
                             "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}})

    log("INFO:     Started server process [%d]" % os.getpid(), rank=False)
    log("INFO:     Waiting for application startup.", rank=False)
    log("INFO:     Application startup complete.", rank=False)
    if a.scenario == "bind":
        bind_like_uvicorn(a)
    httpd = ThreadingHTTPServer(("127.0.0.1", a.port), Handler)
    log("INFO:     Uvicorn running on http://127.0.0.1:%d (Press CTRL+C to quit)" % a.port, rank=False)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    time.sleep(a.warmup_s)
    complete()
    state["ready"] = True
    log("The server is fired up and ready to roll!", rank=False)


def bind_like_uvicorn(a):
    """uvicorn binds through asyncio's create_server and logs the OSError as it comes
    (uvicorn/server.py, Server.startup); then this server's processes idle in their poll
    loops, nobody exits."""
    import asyncio
    loop = asyncio.new_event_loop()
    with open(a.hang_mark, "w") as f:
        f.write("%.3f\n" % time.time())
    try:
        loop.run_until_complete(loop.create_server(asyncio.Protocol, "127.0.0.1", a.port))
    except OSError as exc:
        log("ERROR:    %s" % exc, rank=False)
        helper_main()
    log("the port was free: nothing to show", rank=False)
    sys.exit(3)


def rank_main(a):
    global RANK
    RANK = a.tp_rank
    import torch
    import torch.distributed as dist
    log("Init torch distributed begin.")
    torch.cuda.set_device(RANK % torch.cuda.device_count())
    start_free = torch.cuda.mem_get_info()[0]
    if a.scenario == "init_hang":
        with open(a.hang_mark, "w") as f:
            f.write("%.3f\n" % time.time())
    if a.scenario == "nodes" and RANK == 0:
        write_mark(a.hang_mark)
    gloo = a.backend == "gloo"
    # SGLang joins by tcp://--dist-init-addr; rank 0 holds the store and waits there for the others.
    init = {"init_method": "tcp://" + a.dist_init_addr} if a.dist_init_addr else {}
    dist.init_process_group(a.backend, rank=RANK, world_size=a.tp_size, **init,
                            timeout=datetime.timedelta(seconds=a.nccl_timeout_s),
                            **({} if gloo else {"device_id": torch.device("cuda", RANK)}))
    probe = torch.ones(1, device="cpu" if gloo else "cuda")
    dist.all_reduce(probe)
    torch.cuda.synchronize()
    version = torch.cuda.nccl.version()
    log("sglang is using nccl==%s" % (".".join(map(str, version)) if isinstance(version, tuple) else version))
    log("Init torch distributed ends. mem usage=%.2f GB" % gib(start_free - torch.cuda.mem_get_info()[0]))
    log("Load weight begin. avail mem=%.2f GB" % gib(torch.cuda.mem_get_info()[0]))
    t0 = time.monotonic()
    weights = load_dummy_weights(torch, a, Bar)
    free = torch.tensor([torch.cuda.mem_get_info()[0]], dtype=torch.float64, device="cpu" if gloo else "cuda")
    dist.all_reduce(free, op=dist.ReduceOp.MIN)  # every rank agrees on the smallest free memory
    torch.cuda.synchronize()
    log("Load weight end. elapsed=%.2f s, type=TPServerForTest, dtype=torch.bfloat16, avail mem=%.2f GB, mem usage=%.2f GB."
        % (time.monotonic() - t0, gib(free.item()), gib(start_free - torch.cuda.mem_get_info()[0])))
    if a.scenario == "frozen":
        write_mark(a.hang_mark)
        post_load_work(torch, weights[0], 8.0)
    n_tokens = int(a.kv_cache_gib * 2**30 / 2 / 1024)
    kv = torch.zeros(n_tokens, 1024, dtype=torch.bfloat16, device="cuda")
    log("KV Cache is allocated. #tokens: %d, KV size: %.2f GB" % (n_tokens, gib(kv.numel() * 2)))
    log("Memory pool end. avail mem=%.2f GB" % gib(torch.cuda.mem_get_info()[0]))
    if a.scenario == "soft_oom":
        memory_probe(torch)
        cpu_phase(a.cpu_phase_s)
    if a.scenario == "tune":
        log("Autotuning GEMM kernels for %d candidate configs; this may take several minutes."
            % len(candidate_configs(a.tune_max_m, a.tune_shapes)))
        t1 = time.monotonic()
        done, shapes = tune(torch, a.tune_s, a.tune_iters, a.tune_max_m, a.tune_shapes)
        dist.barrier()
        log("Autotuning done: %d configs timed, best of %d shapes saved. elapsed=%.2f s" % (done, shapes, time.monotonic() - t1))
    if a.scenario == "sparse":
        log("Tuning fused MoE kernel configs; this may take several minutes.")
        t1 = time.monotonic()
        bursts = sparse_tune(torch, a.tune_s, a.gap_min_s, a.gap_max_s, a.burst_s)
        dist.barrier()
        log("Tuning done: %d configs timed. elapsed=%.2f s" % (bursts, time.monotonic() - t1))
    log("Capture cuda graph begin. This can take up to several minutes. avail mem=%.2f GB" % gib(torch.cuda.mem_get_info()[0]))
    t2 = time.monotonic()
    if a.scenario == "vanish":
        write_mark(a.hang_mark)
    if a.scenario == "long_sync":
        long_sync(torch, a.sync_s)
    if a.scenario == "workers":
        compile_workers(a.workers, a.worker_gap_s)
        silent_gemms(torch, a.gemm_s, a.sync_every_s)
    if a.scenario == "compile":
        shapes = compile_autotune(torch, a.compile_s, log)
        log("torch.compile done: %d graphs compiled with max-autotune. elapsed=%.2f s" % (shapes, time.monotonic() - t2))
    capture(torch, dist, a, weights[0], Bar)
    log("Capture cuda graph end. Time elapsed: %.2f s. mem usage=%.2f GB. avail mem=%.2f GB."
        % (time.monotonic() - t2, gib(start_free - torch.cuda.mem_get_info()[0]), gib(torch.cuda.mem_get_info()[0])))
    if RANK == 0:
        log("max_total_num_tokens=%d, chunked_prefill_size=8192, max_prefill_tokens=16384, context_len=4096" % n_tokens)
        serve(torch, a, weights[0])
    while True:
        time.sleep(1)


def parse(argv):
    ap = argparse.ArgumentParser()
    ap.add_argument("--scenario", choices=("tune", "hang", "compile", "sparse", "spin", "init_hang", "capture",
                                           "soft_oom", "sticky", "bind", "long_sync", "workers", "vanish", "frozen", "nodes"),
                    required=True)
    ap.add_argument("--model-path", default="dummy-tp-model")
    ap.add_argument("--port", type=int, default=30001)
    ap.add_argument("--dist-port", type=int, default=29511)
    ap.add_argument("--tp-size", type=int, default=2)
    ap.add_argument("--tp-rank", type=int, default=None, help="set by the launcher for each rank")
    ap.add_argument("--n-shards", type=int, default=8)
    ap.add_argument("--shard-gib", type=float, default=1.0)
    ap.add_argument("--shard-s", type=float, default=1.5, help="GPU work per shard")
    ap.add_argument("--kv-cache-gib", type=float, default=8.0)
    ap.add_argument("--tune-s", type=float, default=240.0)
    ap.add_argument("--tune-iters", type=int, default=50)
    ap.add_argument("--tune-max-m", type=int, default=8192, help="largest batch size tuned")
    ap.add_argument("--tune-shapes", choices=sorted(WEIGHT_SHAPES), default="large", help="weight shapes tuned")
    ap.add_argument("--compile-s", type=float, default=240.0, help="compile: seconds of max-autotune compiling")
    ap.add_argument("--gap-min-s", type=float, default=30.0, help="sparse: shortest wait between bursts")
    ap.add_argument("--gap-max-s", type=float, default=60.0, help="sparse: longest wait between bursts")
    ap.add_argument("--burst-s", type=float, default=2.0, help="sparse: longest burst of kernels")
    ap.add_argument("--capture-batches", type=int, default=12)
    ap.add_argument("--capture-iters", type=int, default=2000, help="TP forwards per batch size")
    ap.add_argument("--hang-at-batch", type=int, default=3)
    ap.add_argument("--spin-cycles", type=float, default=4e12, help="spin: GPU cycles the never-ending kernel runs")
    ap.add_argument("--hang-mark", default="/tmp/tp_server.hang")
    ap.add_argument("--nccl-timeout-s", type=float, default=7200.0)
    ap.add_argument("--warmup-s", type=float, default=4.0)
    ap.add_argument("--backend", choices=("nccl", "gloo"), default="nccl",
                    help="gloo lets several ranks share one GPU (sticky)")
    ap.add_argument("--capture-s", type=float, default=0.0, help="capture: seconds of forwards (one rank), 0: --capture-iters")
    ap.add_argument("--cpu-phase-s", type=float, default=240.0, help="soft_oom: seconds of CPU work after the OOM")
    ap.add_argument("--idle-procs", type=int, default=0, help="helper processes idling in poll loops")
    ap.add_argument("--spin-kind", choices=("flag", "sleep"), default="sleep",
                    help="spin: a warp polling a flag nobody sets (cupy) or torch.cuda._sleep")
    ap.add_argument("--sync-s", type=float, default=120.0, help="long_sync: seconds of matmuls behind one synchronize")
    ap.add_argument("--workers", type=int, default=8, help="workers: short-lived helper processes")
    ap.add_argument("--worker-gap-s", type=float, default=3.0, help="workers: seconds between two helpers' starts")
    ap.add_argument("--gemm-s", type=float, default=150.0, help="workers: seconds of silent matmuls")
    ap.add_argument("--sync-every-s", type=float, default=3.0, help="workers: seconds between synchronizes")
    ap.add_argument("--launcher-waits", action="store_true",
                    help="the launcher reaps a dead rank silently and waits on (no 'scheduler is dead')")
    ap.add_argument("--nnodes", type=int, default=1)
    ap.add_argument("--node-rank", type=int, default=0)
    ap.add_argument("--dist-init-addr", default=None, help="HOST:PORT of the rendezvous (node 0's TCPStore)")
    return ap.parse_args(argv)


def main():
    argv = sys.argv[1:]
    if argv == ["--helper"]:
        helper_main()
    a = parse(argv)
    if a.tp_rank is None:
        launch(a, argv)
    else:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        rank_main(a)


if __name__ == "__main__":
    main()
