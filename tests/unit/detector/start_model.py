"""A model of one SGLang start, built on conftest.Start, for the property tests.

A start is a list of phases; each phase is entered with SGLang's own marker line and then
behaves as one kind of work (or, for faults, of failure) for its duration, poll by poll,
the way the channels behave on a real host (../shared/fault-catalog.md):

- healthy kinds: `cpu_busy` (repacking: cores busy, GPUs idle, one Python stack, no log),
  `gpu_bound` (autotune / MoE config tuning: host CPU low, the same stack on every sample
  with `synchronize` innermost, memory flat, utilisation in bursts: a GPU at work shows
  some utilisation at least every few polls), `gpu_flat_out` (large kernels back to back:
  utilisation 90-100 % with a dip now and then, the same stack, CPU one core per rank
  spinning in synchronize, hundreds of watts when power is reported), `compile` (compiler children, cache
  writes), `disk` (reads, slow or fast, memory in steps), `capture` (utilisation
  changing, memory creeping up);
- healthy kinds of their own property tests: `inductor_autotune` (Inductor's max-autotune:
  an `E...` record with a traceback ending `OutOfMemoryError: out of resource` for a config
  that does not fit, repeated, then `Ignoring this choice.`; compile workers coming and
  going, CPU busy, GPU bursts while it benchmarks), `tuning_sparse` (short kernels timed
  with synchronize: the same stack on every sample, CPU at a trickle except a second or
  two of work per burst, utilisation 0 except one burst of 2-27 % every 30-60 s);
- stall kinds: `spin` (some GPUs at ~100 % with flat memory at about idle power, ranks
  busy-polling),
  `idle` (everything flat, the CPU at a steady trickle), `wait_stacks` (every rank parked in a wait), `smi_wedged`
  (nvidia-smi times out every poll, ranks busy-polling), `stopped` (every process in
  state T).

Noise the detector must live with: poll jitter, nvidia-smi and cgroup reads missing now
and then, py-spy samples missing, journal records cut at LineMax (at random points, the
rest sometimes in the next poll), records of a poll out of time order, benign warnings
and soft-watchdog dumps.
"""
import random

from ansible_collections.sglang_ops.serving.tests.unit.detector.conftest import Start

MARKERS = {
    "distributed_init": "Init torch distributed begin.",
    "weight_load": "Load weight begin. avail mem=94.52 GB",
    "post_load": "Load weight end. type=DeepseekV3ForCausalLM, dtype=torch.bfloat16, avail mem=19.83 GB, mem usage=74.69 GB.",
    "kv_cache": "KV Cache is allocated. #tokens: 412160, KV size: 9.42 GB",
    "jit_compile": "Entering DeepGEMM JIT Pre-Compile session. It may take a long time (typically 10-20 mins)",
    "cuda_graph": "Capture cuda graph begin. This can take up to several minutes. avail mem=9.91 GB",
    "http_server": "Uvicorn running on http://127.0.0.1:30001 (Press CTRL+C to quit)",
    "warmup": 'INFO:     127.0.0.1:51234 - "GET /get_model_info HTTP/1.1" 200 OK',
}
PHASE_ORDER = tuple(MARKERS)

BENIGN = (
    "Using default MoE kernel config. Performance might be sub-optimal! Config file not found at /c/E=384,N=256.json",
    "ProcessGroupNCCL initialization options: size: 8, global rank: 0, TIMEOUT(ms): 600000",
    "WARNING: custom all-reduce failed the P2P check, falling back to NCCL all-reduce",
    "Failed to load the fused RoPE kernel (error: undefined symbol), retrying with the Triton implementation",
    "[W1130 10:00:00.000000 ProcessGroupNCCL.cpp:4715] Warning: TORCH_NCCL_AVOID_RECORD_STREAMS is deprecated",
    "Scheduler watchdog timeout (self.watchdog_timeout=300, self.soft=True)",
    "Scheduler soft watchdog timeout after 300 s, dumping stacks",
    "No available shared memory broadcast block found in 60 seconds. This typically happens when some processes are hanging.",
)
HEALTHY_KINDS = ("cpu_busy", "gpu_bound", "gpu_flat_out", "compile", "disk", "capture")
STALL_KINDS = ("spin", "idle", "wait_stacks", "smi_wedged", "stopped")
INDUCTOR_RECORDS = (
    "E1201 12:00:01.123000 4242 torch/_inductor/select_algorithm.py:2105] [0/0] Exception No valid triton configs. "
    "OutOfMemoryError: out of resource: triton_mm Required: 262144 Hardware limit:232448 Reducing block sizes or "
    "`num_stages` may help.",
    "Traceback (most recent call last):",
    "RuntimeError: No valid triton configs. OutOfMemoryError: out of resource: triton_mm Required: 262144 Hardware limit:232448",
    "E1201 12:00:01.125000 4242 torch/_inductor/select_algorithm.py:2113] [0/0] Runtime error during autotuning: No valid "
    "triton configs. OutOfMemoryError: out of resource. Ignoring this choice.",
)
STACKS = {
    "cpu_busy": ["_pack_marlin_moe_weights", "process_weights_after_loading", "load_model", "run_scheduler_process"],
    "gpu_bound": ["synchronize", "benchmark_config", "tune", "tune_fused_moe", "run_scheduler_process"],
    "gpu_flat_out": ["synchronize", "benchmark_config", "tune", "rank_main"],
    "compile": ["wait", "compile_kernels", "warmup", "run_scheduler_process"],
    "disk": ["read", "_load_shard", "load_weights", "load_model"],
    "capture": ["capture_one_batch_size", "capture", "init_cuda_graphs", "run_scheduler_process"],
    "spin": ["all_reduce", "custom_all_reduce", "forward", "capture_one_batch_size"],
    "wait_stacks": ["wait", "result", "_load_shards_multithread", "load_weights"],
    "idle": ["recv_pyobj", "event_loop", "run_scheduler_process"],
    "smi_wedged": ["synchronize", "all_reduce", "forward", "run_scheduler_process"],
    "stopped": ["synchronize", "busy_gpu", "main"],
}


class ModelStart(Start):
    """conftest.Start with the noise of a real host: jitter, missing readings, cut records."""

    def __init__(self, rng, gpus, poll_s, jitter=False, missing=False, cut=False, shuffle=False, stacks=True, chatter=False):
        super().__init__(gpus=gpus, poll_s=poll_s)
        self.rng = rng
        self.jitter, self.missing, self.cut, self.shuffle = jitter, missing, cut, shuffle
        self.with_stacks, self.chatter = stacks, chatter
        self.with_power = True    # nvidia-smi reports power on every board the project runs on
        self.watts()
        self.carry = []          # record parts journald delivers with the next poll
        self.assessments = []
        self.phase = "starting"
        self.next_stack_t = 0.0
        self.next_chatter_t = 0.0
        self.records_t = None    # journal time of the records the last poll brought
        self.next_burst_t = 0.0

    # ---------------------------------------------------------------- journal
    def records(self, msgs, at):
        out = []
        for m in msgs:
            text = "[2026-11-29 10:00:00 TP%d] %s" % (self.rng.randrange(self.gpus), m)
            if not self.cut or len(text) < 40 or self.rng.random() < 0.3:
                out.append({"t": at, "msg": text})
                continue
            cuts = sorted(self.rng.sample(range(5, len(text) - 5), self.rng.choice((1, 2))))
            parts = [text[a:b] for a, b in zip([0] + cuts, cuts + [len(text)])]
            out += [{"t": at, "msg": p, "line_break": "line-max"} for p in parts[:-1]] + [{"t": at, "msg": parts[-1]}]
        return out

    def watts(self, computing=()):
        """Power per GPU: about idle (a spin-wait included), or hundreds of W on GPUs computing."""
        if self.with_power:
            self.power = [round(self.rng.uniform(300, 700) if i in computing else self.rng.uniform(75, 125), 2)
                          for i in range(self.gpus)]

    def step(self, msgs=(), cpu_pct=800.0, read_bps=0.0, write_bps=0.0, stacks=None, smi_timeout=False, states=None):
        dt = self.poll_s * (self.rng.uniform(0.8, 1.2) if self.jitter else 1.0)
        at = self.t + dt * self.rng.uniform(0.05, 0.95)
        self.records_t = at
        recs = self.carry + self.records(msgs, at)
        self.carry = []
        if self.cut and recs and recs[-1].get("line_break") and self.rng.random() < 0.5:
            # the cut fell on the poll boundary: the rest of the record arrives next time
            while recs and recs[-1].get("line_break"):
                self.carry.insert(0, recs.pop())
        if self.shuffle and len(recs) > 1 and self.rng.random() < 0.3:
            recs = self._shuffle_whole_records(recs)
        extra, drop = {}, []
        if smi_timeout or (self.missing and self.rng.random() < 0.05):
            drop.append("gpus")
            extra["missing"] = {"gpus": "nvidia-smi timed out after 10 s"}
        if self.missing and self.rng.random() < 0.03:
            drop.append("procs")
        if stacks is not None and self.with_stacks and self.t + dt >= self.next_stack_t and not (self.missing and self.rng.random() < 0.1):
            extra["stacks"] = [{"pid": 100 + r, "rank": "TP%d" % r, "frames": list(stacks)} for r in range(self.gpus)]
            self.next_stack_t = self.t + dt + 60.0
        o = self.obs(log=recs, cpu_pct=cpu_pct, read_bps=read_bps, write_bps=write_bps, drop=drop, extra=extra, dt=dt)
        if states is not None and "procs" in o:
            o["procs"]["states"] = states
        self.last_obs = o
        a = self.det.observe(o)
        self.assessments.append(a)
        return a

    def _shuffle_whole_records(self, recs):
        """Whole records (with their cut parts) in another order; the parts of one stay together."""
        groups, cur = [], []
        for r in recs:
            cur.append(r)
            if not r.get("line_break"):
                groups.append(cur)
                cur = []
        self.rng.shuffle(groups)
        return [r for g in groups for r in g] + cur

    def enter(self, phase):
        self.phase = phase
        return self.step([MARKERS[phase]])

    # ---------------------------------------------------------------- behaviours
    def healthy(self, kind, seconds):
        """`seconds` of one healthy kind of work; benign lines now and then."""
        end = self.t + seconds
        idle_run = 0
        while self.t < end:
            msgs = []
            if self.chatter and self.t >= self.next_chatter_t:
                msgs.append(self.rng.choice(BENIGN))
                self.next_chatter_t = self.t + self.rng.uniform(60, 400)
            if kind == "cpu_busy":
                self.util = [self.rng.randint(0, 3) for dummy in range(self.gpus)]
                self.step(msgs, cpu_pct=self.rng.uniform(300, 1500), stacks=STACKS[kind])
            elif kind == "gpu_bound":
                # short kernels: a GPU at work is seen busy at least once every three polls
                burst = idle_run >= 2 or self.rng.random() < 0.5
                idle_run = 0 if burst else idle_run + 1
                self.util = [self.rng.randint(15, 100) if burst and self.rng.random() < 0.8 else self.rng.randint(0, 2)
                             for dummy in range(self.gpus)]
                if burst and not any(u >= 15 for u in self.util):
                    self.util[0] = self.rng.randint(15, 100)
                self.watts([i for i, u in enumerate(self.util) if u >= 15])
                self.step(msgs, cpu_pct=self.rng.uniform(10, 40), stacks=STACKS[kind])
                self.watts()
            elif kind == "gpu_flat_out":
                # only power tells kernels pinned at 90-100 % from a spin-wait
                # as recorded on two H200s: 90-100 % on most polls, a dip to 72-89 % on about one in ten
                self.util = [self.rng.randint(72, 89) if self.rng.random() < 0.1 else self.rng.randint(90, 100) for dummy in range(self.gpus)]
                self.watts(range(self.gpus))
                self.step(msgs, cpu_pct=100.0 * self.gpus, stacks=STACKS[kind])
                self.watts()
            elif kind == "compile":
                self.comm = {"python3": self.gpus + 2, self.rng.choice(("cicc", "ptxas", "nvcc", "cc1plus")): self.rng.randint(1, 8)}
                self.util = [0] * self.gpus
                self.step(msgs, cpu_pct=self.rng.uniform(400, 1700), write_bps=self.rng.uniform(50e3, 3e6), stacks=STACKS[kind])
                self.comm = {"python3": self.gpus + 2}
            elif kind == "disk":
                if self.rng.random() < 0.2:
                    self.mem = [m + 512 for m in self.mem]
                self.util = [self.rng.randint(0, 3) for dummy in range(self.gpus)]
                self.step(msgs, cpu_pct=self.rng.uniform(30, 800), read_bps=self.rng.uniform(0.3e6, 2e9), stacks=STACKS[kind])
            elif kind == "inductor_autotune":
                if self.rng.random() < 0.4:
                    msgs += list(INDUCTOR_RECORDS)
                busy = self.rng.random() < 0.7
                self.comm = {"python3": self.gpus + 2 + (self.rng.randint(4, 32) if busy else self.rng.randint(0, 2))}
                self.util = [0] * self.gpus if busy else [self.rng.randint(3, 40) for dummy in range(self.gpus)]
                self.step(msgs, cpu_pct=self.rng.uniform(900, 3200) if busy else self.rng.uniform(120, 400),
                          stacks=STACKS["compile"])
                self.comm = {"python3": self.gpus + 2}
            elif kind == "tuning_sparse":
                # as recorded on an H200: the host wakes for each burst (1-3 s of CPU per rank)
                # and sleeps at a trickle between them
                cpu_pct = self.rng.uniform(0.1, 0.5)
                if self.t >= self.next_burst_t:
                    self.util = [self.rng.randint(2, 27)] * self.gpus
                    self.next_burst_t = self.t + self.rng.uniform(30, 60)
                    cpu_pct += 100.0 * self.gpus * self.rng.uniform(1.0, 3.0) / self.poll_s
                else:
                    self.util = [0] * self.gpus
                self.step(msgs, cpu_pct=cpu_pct, stacks=STACKS["gpu_bound"])
            elif kind == "capture":
                self.mem = [m + self.rng.choice((0, 0, 70, 130)) for m in self.mem]
                self.util = [self.rng.randint(15, 60) for dummy in range(self.gpus)]
                self.step(msgs, cpu_pct=self.rng.uniform(400, 900), stacks=STACKS[kind])

    def stall(self, kind, seconds, heartbeat=False):
        """`seconds` of one stall kind; nothing moves. The onset is the last poll before it."""
        spinning = set(self.rng.sample(range(self.gpus), self.rng.randint(1, self.gpus)))
        trickle_pct = self.rng.uniform(0, 20)   # a hung start's threads tick at a steady rate
        end = self.t + seconds
        next_hb = self.t + 60
        while self.t < end:
            msgs = []
            if heartbeat and self.t >= next_hb:
                msgs.append(BENIGN[-1])
                next_hb = self.t + 60
            if kind in ("spin", "smi_wedged"):
                self.util = [self.rng.randint(97, 100) if i in spinning else self.rng.randint(0, 1) for i in range(self.gpus)]
                a = self.step(msgs, cpu_pct=self.rng.uniform(100, 900), stacks=STACKS[kind], smi_timeout=kind == "smi_wedged")
            elif kind in ("idle", "wait_stacks"):
                self.util = [self.rng.randint(0, 2) for dummy in range(self.gpus)]
                a = self.step(msgs, cpu_pct=trickle_pct * self.rng.uniform(0.8, 1.2), stacks=STACKS[kind])
            else:   # stopped
                self.util = [0] * self.gpus
                a = self.step(msgs, cpu_pct=0.0, stacks=STACKS[kind], states={"T": self.gpus + 2})
            if a.final:
                return a
        return self.assessments[-1]

    def ready(self):
        self.step(["max_total_num_tokens=412160, chunked_prefill_size=8192, context_len=262144"], cpu_pct=200)
        self.http = {"health": 503, "completion": None}
        self.step(["The server is fired up and ready to roll!"], cpu_pct=200)
        self.http = {"health": 200, "completion": {"ok": True, "status": 200, "ms": 180.0}}
        return self.step(cpu_pct=150)

    def load(self):
        """A short, visible start up to post_load: markers, reads, memory, the shard bar."""
        self.enter("distributed_init")
        self.enter("weight_load")
        for n in range(1, 5):
            self.mem = [1100 + 18000 * n] * self.gpus
            self.step(["Loading safetensors checkpoint shards: %3d%% Completed | %d/4 [00:00<00:00]" % (n * 25, n)], read_bps=2e9)
        self.enter("post_load")


def new_start(seed, gpus, poll_s, **noise):
    return ModelStart(random.Random(seed), gpus, poll_s, **noise)
