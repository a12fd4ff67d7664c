#!/usr/bin/env python3
"""Generate the project's labelled trace corpus (tests/traces/*.jsonl).

Each scenario drives a small simulation of one SGLang start on a multi-GPU host,
modelled on the rows of ../shared/fault-catalog.md: what the journal, the cgroup
counters, nvidia-smi, the HTTP probe and py-spy would show, poll by poll. Labels are
computed from the simulation itself: onset_t is the time of the last observation that
showed progress (stalls) or the journal time of the first fatal record (failures).

    python3 tests/traces/generate.py            # rewrite every trace
    python3 tests/traces/generate.py --check    # exit 1 if a committed trace differs
"""
import argparse
import json
import os
import random
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
UNIT = "sglang-k26-ddtree"
BASE_CLOCK = 20 * 3600 + 27 * 60   # journal wall clock of t=0, seconds into the day


class Sim:
    """One start, observed every poll_s (with optional jitter and missing signals)."""

    def __init__(self, name, description, gpus=8, poll_s=10.0, family="old", seed=1, jitter_s=0.0,
                 mem_total_mib=97887, model="/models/Kimi-K2.6", model_class="DeepseekV3ForCausalLM"):
        self.name, self.description = name, description
        self.gpus, self.poll_s, self.family, self.jitter_s = gpus, poll_s, family, jitter_s
        self.rng = random.Random(seed)
        self.mem_total = mem_total_mib
        self.model, self.model_class = model, model_class
        self.t = 0.0
        self.cpu_s = 0.0
        self.read_bytes = 0
        self.write_bytes = 0
        self.mem = [0.0] * gpus
        self.pid = 1986
        self.restarts = 0
        self.unit = ("active", "running")
        self.comm = {"python3": gpus + 2}
        self.health = None
        self.completion = None
        self.pending = []            # journal records not yet observed: (t, msg)
        self.observations = []
        self.expect = None
        self.last_progress_t = 0.0
        self.missing_gpus_polls = set()   # observation numbers where nvidia-smi times out
        self.drop_gpu_polls = {}          # observation number -> GPU index left out
        self.missing_procs_polls = set()
        self.stacks_missing_reason = None
        self.no_gpu_reason = None         # nvidia-smi absent for the whole start (a blind watch)
        self.reverse_log_polls = set()   # observation numbers whose records arrive out of time order
        self.foreign_mem = [0.0] * gpus
        self.power_limit_w = None         # nvidia-smi power.limit, reported beside power_w when set
        # another process on GPU 0 (a shared board): its pid and, per poll, (util %, extra W)
        self.neighbour_pid = None
        self.neighbour_load = None
        self.tree = None                  # procs.tree: [{"pid", "ppid", "name"}] while the probe records one
        self.holders = None               # [(pid, gpu)] holding GPU memory; None: one per GPU, pid + index
        self.peers = None                 # the `peers` reading of a server over several nodes
        self.argv = None                  # the server's command line, for the header
        for i in range(gpus):
            self.mem[i] = 0.0

    # ---------------------------------------------------------------- journal
    def stamp(self, t):
        s = int(BASE_CLOCK + t)
        return "%02d:%02d:%02d" % (s // 3600 % 24, s // 60 % 60, s % 60)

    def log(self, msg, ranks=None, dt=0.0, prefix=True, line_max=None):
        """Queue a record at t+dt, once per rank in `ranks` (None: rank-less line). With
        `line_max`, a longer record is cut as journald cuts at LineMax: every part but the
        last flagged "line-max"."""
        at = round(self.t + dt, 2)
        texts = [msg] if not prefix else ["[2026-11-29 %s TP%d] %s" % (self.stamp(at), r, msg)
                                          for r in (ranks if ranks is not None else [0])]
        for text in texts:
            if not line_max or len(text) <= line_max:
                self.pending.append((at, text))
                continue
            parts = [text[i:i + line_max] for i in range(0, len(text), line_max)]
            for part in parts[:-1]:
                self.pending.append((at, part, "line-max"))
            self.pending.append((at, parts[-1]))

    def all_ranks(self):
        return list(range(self.gpus))

    def bar_blob(self, desc, total, seconds, sep="|"):
        """A finished tqdm bar as journald stores it: one record, frames split by \\r."""
        frames = []
        for n in range(total + 1):
            pct = int(100 * n / total)
            el = seconds * n / total
            frames.append("%s: %3d%% Completed %s %d/%d [%02d:%02d<%02d:%02d, %.2fit/s]" % (
                desc, pct, sep, n, total, el // 60, el % 60, (seconds - el) // 60, (seconds - el) % 60, total / max(seconds, 1)))
        return "\r" + "\r".join(frames)

    def bar_frame(self, desc, n, total, tqdm_style=False):
        pct = int(100 * n / total)
        if tqdm_style:
            fill = "#" * (pct // 10)
            return "%s: %3d%%|%-10s| %d/%d [00:00<00:00]" % (desc, pct, fill, n, total)
        return "%s: %3d%% Completed | %d/%d [00:00<00:00]" % (desc, pct, n, total)

    # ---------------------------------------------------------------- time
    def run(self, seconds, cpu_pct=800.0, read_bps=0.0, write_bps=0.0, mem_to=None, util=(0, 2), comm=None,
            stacks=None, stacks_every_s=60.0, heartbeat=None, heartbeat_every_s=60.0, progress=True,
            per_poll=None, power_w=None, read_jitter=0.15, mem_step_mib=None):
        """Advance `seconds`, one observation per poll. `progress` marks whether this stretch
        counts as progress for the label (a stall's onset is the last progressing poll)."""
        end = self.t + seconds
        start_mem = list(self.mem)
        t0 = self.t
        next_stack = self.t
        next_hb = self.t + heartbeat_every_s
        while self.t < end - 1e-6:
            step = self.poll_s + (self.rng.uniform(-self.jitter_s, self.jitter_s) if self.jitter_s else 0.0)
            step = max(1.0, min(step, end - self.t)) if end - self.t > 0.5 else end - self.t
            self.t = round(self.t + step, 2)
            frac = (self.t - t0) / seconds if seconds else 1.0
            self.cpu_s += cpu_pct / 100.0 * step * self.rng.uniform(0.9, 1.1)
            if read_bps:
                self.read_bytes += int(read_bps * step * self.rng.uniform(1 - read_jitter, 1 + read_jitter))
            if write_bps:
                self.write_bytes += int(write_bps * step * self.rng.uniform(0.7, 1.3))
            if self.rng.random() < 0.4:
                self.write_bytes += 4096          # journald / pyc noise
            if self.rng.random() < 0.2:
                self.read_bytes += 4096
            if mem_to is not None:
                for i in range(self.gpus):
                    target = start_mem[i] + (mem_to - start_mem[i]) * frac
                    if mem_step_mib:
                        target = start_mem[i] + (int((target - start_mem[i]) / mem_step_mib)) * mem_step_mib
                    self.mem[i] = target
            if heartbeat and self.t >= next_hb:
                self.log(heartbeat, ranks=[0])
                next_hb += heartbeat_every_s
            if per_poll:
                per_poll(self)
            obs = self.observe(util, comm, power_w)
            if stacks is not None and self.t >= next_stack:
                if self.stacks_missing_reason:
                    obs.setdefault("missing", {})["stacks"] = self.stacks_missing_reason
                else:
                    obs["stacks"] = [{"pid": self.pid + r, "rank": "TP%d" % r, "frames": list(stacks(r) if callable(stacks) else stacks)}
                                     for r in range(self.gpus)]
                next_stack = self.t + stacks_every_s
            if progress:
                self.last_progress_t = self.t

    def observe(self, util, comm, power_w):
        n = len(self.observations) + 1
        obs = {"t": self.t}
        obs["unit"] = {"active": self.unit[0], "sub": self.unit[1], "main_pid": self.pid, "restarts": self.restarts}
        alive = self.unit == ("active", "running")
        if n in self.missing_procs_polls:
            obs["missing"] = {"procs": "cgroup read failed"}
        else:
            c = dict(comm or self.comm) if alive else {}
            obs["procs"] = {"count": sum(c.values()), "cpu_s": round(self.cpu_s, 2), "read_bytes": self.read_bytes,
                            "write_bytes": self.write_bytes, "comm": c}
            if self.tree is not None and alive:
                obs["procs"]["tree"] = [dict(p) for p in self.tree]
        if self.no_gpu_reason:
            obs.setdefault("missing", {}).update({"gpus": self.no_gpu_reason, "gpu_procs": self.no_gpu_reason})
            for i in range(self.gpus if callable(util) else 0):
                util(i)     # the GPUs work on unseen (and the host with them)
        elif n in self.missing_gpus_polls:
            obs.setdefault("missing", {})["gpus"] = "nvidia-smi timed out after 10 s"
        else:
            gpus = []
            for i in range(self.gpus):
                if self.drop_gpu_polls.get(n) == i:
                    continue
                u = util(i) if callable(util) else util
                lo, hi = u if isinstance(u, tuple) else (u, u)
                mem = (int(self.mem[i]) + self.rng.choice((-2, 0, 0, 2, 4)) if alive else 0) + int(self.foreign_mem[i])
                g = {"index": i, "mem_used_mib": max(0, mem), "mem_total_mib": self.mem_total,
                     "util_pct": self.rng.randint(lo, hi) if alive else self.rng.randint(0, 2)}
                if power_w is not None:
                    g["power_w"] = round(self.rng.uniform(*power_w), 1)
                    if self.power_limit_w is not None:
                        g["power_limit_w"] = self.power_limit_w
                if self.neighbour_load is not None and i == 0:
                    n_util, n_power = self.neighbour_load(self)
                    g["util_pct"] = max(g["util_pct"], n_util)
                    if "power_w" in g:
                        g["power_w"] = round(g["power_w"] + n_power, 1)
                gpus.append(g)
            obs["gpus"] = gpus
            if alive and self.holders is not None:
                obs["gpu_procs"] = [{"pid": pid, "gpu": i, "mem_mib": int(mib)} for pid, i, mib in self.holders]
            elif alive and self.mem[0] > 0:
                obs["gpu_procs"] = [{"pid": self.pid + i, "gpu": i, "mem_mib": int(self.mem[i])} for i in range(self.gpus)]
            else:
                obs["gpu_procs"] = []
            if self.neighbour_pid is not None:
                obs["gpu_procs"].insert(0, {"pid": self.neighbour_pid, "gpu": 0, "mem_mib": int(self.foreign_mem[0])})
        obs["log"] = [dict({"t": p[0], "msg": p[1]}, **({"line_break": p[2]} if len(p) > 2 else {}))
                      for p in self.pending if p[0] <= self.t]
        self.pending = [p for p in self.pending if p[0] > self.t]
        if n in self.reverse_log_polls:
            obs["log"].reverse()
        obs["http"] = {"health": self.health, "completion": self.completion}
        if self.peers is not None:
            obs["peers"] = json.loads(json.dumps(self.peers))
        self.observations.append(obs)
        return obs

    # ---------------------------------------------------------------- labels
    def expect_ready(self):
        self.expect = {"outcome": "ready"}

    def expect_stalled(self, phase, onset_t=None):
        self.expect = {"outcome": "stalled", "onset_t": self.last_progress_t if onset_t is None else onset_t, "phase": phase}

    def expect_failed(self, phase, onset_t, **more):
        self.expect = dict({"outcome": "failed", "onset_t": onset_t, "phase": phase}, **more)

    def header(self):
        h = {"format": "sglang-trace/1", "name": self.name, "unit": UNIT, "poll_s": self.poll_s, "gpus": self.gpus,
             "description": self.description}
        if self.argv:
            h["argv"] = list(self.argv)
        if self.expect:
            h["expect"] = self.expect
        return h

    def dumps(self):
        lines = [json.dumps(self.header())] + [json.dumps(o, separators=(", ", ": ")) for o in self.observations]
        return "\n".join(lines) + "\n"


# -------------------------------------------------------------------- start stages
def s_args(sim, **extra):
    if sim.family == "old":
        sim.log("server_args=ServerArgs(model_path='%s', tp_size=%d, port=30001, ...)" % (sim.model, sim.gpus), prefix=False)
    else:
        sim.log("server_args={'model_path': '%s', 'tp_size': %d, 'port': 30001, ...}" % (sim.model, sim.gpus), prefix=False)


def s_init(sim, seconds=15.0, spin_after=False):
    s_args(sim)
    if sim.family == "old":
        sim.log("Init torch distributed begin.", sim.all_ranks())
    else:
        sim.log("Init parallel begin.", sim.all_ranks())
    sim.run(sim.poll_s, cpu_pct=400, mem_to=400)
    if sim.family == "new":
        sim.log("sglang is using nccl==2.28.3", [0])
    sim.run(max(sim.poll_s, seconds - sim.poll_s), cpu_pct=750, mem_to=1100)


def s_init_end(sim):
    if sim.family == "old":
        sim.log("Init torch distributed ends. mem usage=1.07 GB", sim.all_ranks())
    else:
        sim.log("Init parallel ends. elapsed=14.92 s, mem usage=1.07 GB", sim.all_ranks())


def shard_desc(sim):
    return "Loading safetensors checkpoint shards" if sim.family == "old" else "Multi-thread loading shards"


def load_begin(sim):
    sim.log("Load weight begin. avail mem=%.2f GB" % (sim.mem_total / 1024.0 - 1.07), sim.all_ranks())
    if "Kimi" in sim.model:
        sim.log("Using CompressedTensorsWNA16MarlinMoEMethod", sim.all_ranks(), dt=0.5)


def s_load(sim, seconds, read_bps, mem_to=76485, shards=64, visible=False, cpu_pct=800):
    load_begin(sim)
    if visible:
        # \r turned into newlines before journald: one record per frame as it happens
        t0, start = sim.t, 0

        def frame(s):
            done = min(shards, int(shards * (s.t - t0) / seconds))
            nonlocal start
            for n in range(start + 1, done + 1):
                s.log(sim.bar_frame(shard_desc(sim), n, shards), [0])
            start = max(start, done)
        sim.log(sim.bar_frame(shard_desc(sim), 0, shards), [0])
        sim.run(seconds, cpu_pct=cpu_pct, read_bps=read_bps, mem_to=mem_to, util=(0, 3), per_poll=frame)
    else:
        sim.run(seconds, cpu_pct=cpu_pct, read_bps=read_bps, mem_to=mem_to, util=(0, 3))
        sim.log(sim.bar_blob(shard_desc(sim), shards, seconds), [0], dt=-0.01)


def s_load_end(sim):
    if sim.family == "old":
        sim.log("Load weight end. type=%s, dtype=torch.bfloat16, avail mem=19.83 GB, mem usage=74.69 GB." % sim.model_class, sim.all_ranks())
    else:
        sim.log("Load weight end. elapsed=612.40 s, type=%s, quant=compressed-tensors, avail mem=19.83 GB, mem usage=74.69 GB." % sim.model_class, sim.all_ranks())


def s_kv(sim, kv_mib=10615):
    s_load_end(sim)
    dtype = "" if sim.family == "old" else ", dtype: torch.bfloat16"
    sim.log("KV Cache is allocated. #tokens: 412160, KV size: 9.42 GB%s" % dtype, sim.all_ranks(), dt=2)
    sim.log("Memory pool end. avail mem=9.95 GB", sim.all_ranks(), dt=2.5)
    sim.run(sim.poll_s * 2, cpu_pct=780, mem_to=sim.mem[0] + kv_mib, util=(0, 2))


def graph_begin(sim):
    if sim.family == "old":
        sim.log("Capture cuda graph begin. This can take up to several minutes. avail mem=9.91 GB", sim.all_ranks())
    else:
        sim.log("Capture target decode CUDA graph begin. This can take up to several minutes. avail mem=9.91 GB", sim.all_ranks())


def graph_end(sim, seconds):
    if sim.family == "old":
        sim.log("Capture cuda graph end. Time elapsed: %.2f s. mem usage=1.79 GB. avail mem=8.12 GB." % seconds, sim.all_ranks())
    else:
        sim.log("Capture target decode CUDA graph end. bs=[1, 2, 4, 8, 16, 32], elapsed=%.2f s, mem usage=1.79 GB." % seconds, sim.all_ranks())


def s_graph(sim, seconds=90.0, batches=36, mem_gain=1800, util=(32, 38), **kw):
    graph_begin(sim)
    sim.run(seconds, cpu_pct=800, mem_to=sim.mem[0] + mem_gain, util=util, **kw)
    blob = "\r" + "\r".join("Capturing batches (bs=%d avail_mem=8.10 GB): %3d%%|%-10s| %d/%d [00:00<00:00]" % (
        max(1, 512 - 14 * n), int(100 * n / batches), "#" * int(10 * n / batches), n, batches) for n in range(batches + 1)) + "\n"
    sim.log(blob, [0], dt=-0.01)
    graph_end(sim, seconds)


def s_http_ready(sim):
    sim.log("max_total_num_tokens=412160, chunked_prefill_size=8192, max_prefill_tokens=16384, max_running_requests=128, context_len=262144", [0], dt=1)
    for m in ("INFO:     Started server process [%d]" % sim.pid, "INFO:     Waiting for application startup.",
              "INFO:     Application startup complete.", "INFO:     Uvicorn running on http://127.0.0.1:30001 (Press CTRL+C to quit)"):
        sim.log(m, prefix=False, dt=2)
    sim.health = 503
    sim.run(sim.poll_s, cpu_pct=200, util=(3, 5))
    info = "GET /get_model_info" if sim.family == "old" else "GET /model_info"
    sim.log('INFO:     127.0.0.1:51234 - "%s HTTP/1.1" 200 OK' % info, prefix=False, dt=1)
    sim.log("Prefill batch. #new-seq: 1, #new-token: 6, #cached-token: 0, token usage: 0.00, #running-req: 0, #queue-req: 0", [0], dt=2)
    sim.log('INFO:     127.0.0.1:51236 - "POST /generate HTTP/1.1" 200 OK', prefix=False, dt=3)
    sim.log("The server is fired up and ready to roll!", prefix=False, dt=3)
    sim.run(sim.poll_s, cpu_pct=200, util=(3, 5))
    sim.health = 200
    sim.completion = {"ok": True, "status": 200, "ms": 184.0}
    sim.run(sim.poll_s, cpu_pct=150, util=(3, 5))


def s_die(sim, status="1/FAILURE", restart=True, dt=1.0, polls=3):
    """The main process exits: journald's lines, then systemd's view for a few polls."""
    sim.log("%s.service: Main process exited, code=exited, status=%s" % (UNIT, status), prefix=False, dt=dt)
    if status.startswith("0"):
        sim.log("%s.service: Deactivated successfully." % UNIT, prefix=False, dt=dt)
        sim.unit = ("inactive", "dead")
    else:
        sim.log("%s.service: Failed with result 'exit-code'." % UNIT, prefix=False, dt=dt)
        if restart:
            sim.unit = ("activating", "auto-restart")
            sim.restarts += 1
        else:
            sim.unit = ("failed", "failed")
    sim.mem = [0.0] * sim.gpus
    sim.run(sim.poll_s * polls, cpu_pct=2, util=(0, 2), progress=False)


def warm_start_to_graph(sim, load_s=40.0, read_bps=22e6):
    s_init(sim)
    s_init_end(sim)
    s_load(sim, load_s, read_bps)
    sim.run(60, cpu_pct=800, util=(0, 2))          # post-load repack (busy, silent)
    s_kv(sim)


# -------------------------------------------------------------------- scenarios
SCENARIOS = []


def scenario(fn):
    SCENARIOS.append(fn)
    return fn


@scenario
def healthy_cold_cache_hidden_bar_42min():
    sim = Sim("healthy_cold_cache_hidden_bar_42min",
              "Cold page cache on a slow array: 548 GB at ~0.2 GB/s. The shard bar is held by journald for 42 min "
              "(one blob record at the end); only disk reads and slowly rising GPU memory show progress.", seed=11)
    s_init(sim)
    s_init_end(sim)
    s_load(sim, 42 * 60, read_bps=217e6)
    sim.run(90, cpu_pct=800)
    s_kv(sim)
    s_graph(sim)
    s_http_ready(sim)
    sim.expect_ready()
    return sim


@scenario
def healthy_warm_cache_new_family_tp4_visible_bar():
    sim = Sim("healthy_warm_cache_new_family_tp4_visible_bar",
              "SGLang 0.5.23 strings, TP4 on 80 GB GPUs, warm page cache. The unit turns \\r into newlines, so every "
              "'Multi-thread loading shards' frame is its own journal record.", gpus=4, family="new", seed=12,
              mem_total_mib=81559, model="/models/Llama-3.3-70B-Instruct", model_class="LlamaForCausalLM")
    s_init(sim)
    s_init_end(sim)
    s_load(sim, 50, read_bps=30e6, mem_to=35200, shards=30, visible=True, cpu_pct=400)
    sim.run(20, cpu_pct=400)
    s_kv(sim, kv_mib=30000)
    s_graph(sim, seconds=60, batches=52, util=(30, 40))
    s_http_ready(sim)
    sim.expect_ready()
    return sim


@scenario
def healthy_failing_disk_slow_reads():
    sim = Sim("healthy_failing_disk_slow_reads",
              "A failing drive: the shard bar (one frame per record) advances every few minutes; disk reads are low "
              "(0.3-3 MB/s) but never stop; GPU memory rises in steps of one shard. Ready after ~70 min.",
              gpus=4, family="new", seed=13, mem_total_mib=81559, model="/models/Qwen3-32B", model_class="Qwen3ForCausalLM")
    s_init(sim)
    s_init_end(sim)
    load_begin(sim)
    shards = 17
    sim.log(sim.bar_frame(shard_desc(sim), 0, shards), [0])
    for n in range(1, shards + 1):
        sim.run(240, cpu_pct=60, read_bps=1.5e6, read_jitter=0.8, util=(0, 2))
        sim.mem = [m + 960 for m in sim.mem]
        sim.log(sim.bar_frame(shard_desc(sim), n, shards), [0])
    sim.run(20, cpu_pct=300)
    s_kv(sim, kv_mib=40000)
    s_graph(sim, seconds=60, util=(30, 40))
    s_http_ready(sim)
    sim.expect_ready()
    return sim


@scenario
def healthy_storage_gap_after_bar_50min():
    sim = Sim("healthy_storage_gap_after_bar_50min",
              "Weights on network storage: the shard bar reaches 100% after 3 min, then 50 min without a log line "
              "before 'Load weight end' while tensors are mapped and copied: one copying core per rank, "
              "intermittent page-in reads, GPU memory flat.", seed=14)
    s_init(sim)
    s_init_end(sim)
    s_load(sim, 180, read_bps=3e9, mem_to=60000)

    def reads(s):
        if s.rng.random() < 0.5:
            s.read_bytes += int(s.rng.uniform(5e6, 60e6))
    sim.run(50 * 60, cpu_pct=850, util=(0, 2), per_poll=reads)
    sim.mem = [76485.0] * sim.gpus
    s_kv(sim)
    s_graph(sim)
    s_http_ready(sim)
    sim.expect_ready()
    return sim


@scenario
def healthy_deepgemm_jit_45min_heartbeats():
    sim = Sim("healthy_deepgemm_jit_45min_heartbeats",
              "0.5.23, first start after an upgrade: DeepGEMM JIT pre-compile for 45 min. One line, then only a "
              "repeated 'No available shared memory broadcast block' heartbeat; GPUs flat and idle; cc1plus/nvcc/ptxas "
              "children busy and the JIT cache growing.", family="new", seed=15)
    warm_start_to_graph(sim)
    sim.log("Entering DeepGEMM JIT Pre-Compile session. It may take a long time (typically 10-20 mins) if you have not run `sglang.compile_deep_gemm`.", [0])
    hb = "No available shared memory broadcast block found in 60 seconds. This typically happens when some processes are hanging."

    sim.run(45 * 60, cpu_pct=1700, write_bps=2.4e6, util=(0, 2), heartbeat=hb,
            comm={"python3": 10, "cc1plus": 8, "nvcc": 4, "ptxas": 4})
    s_graph(sim)
    s_http_ready(sim)
    sim.expect_ready()
    return sim


@scenario
def healthy_torch_compile_graph_capture_44min():
    sim = Sim("healthy_torch_compile_graph_capture_44min",
              "torch.compile during CUDA graph capture (--enable-torch-compile): 44 min with the capture bar hidden, "
              "compile workers and cc1plus busy, Inductor cache files written, GPU memory creeping up per batch size.",
              seed=16)
    warm_start_to_graph(sim)
    graph_begin(sim)
    sim.run(44 * 60, cpu_pct=1200, write_bps=900e3, mem_to=sim.mem[0] + 1400, util=(0, 30),
            comm={"python3": 14, "cc1plus": 2})
    graph_end(sim, 44 * 60)
    s_http_ready(sim)
    sim.expect_ready()
    return sim


@scenario
def healthy_graph_capture_slow_25min():
    sim = Sim("healthy_graph_capture_slow_25min",
              "Large speculative-decoding graph set: capture takes 25 min, bar hidden by journald; GPU util ~35% and "
              "memory rising a little with every batch size; no compiler, no disk.", family="new", seed=17)
    warm_start_to_graph(sim)
    s_graph(sim, seconds=25 * 60, batches=160, mem_gain=2600, util=(30, 40))
    s_http_ready(sim)
    sim.expect_ready()
    return sim


@scenario
def healthy_triton_autotune_50min():
    sim = Sim("healthy_triton_autotune_50min",
              "Fused-MoE Triton autotune on first use: 50 min of silence with the GPUs busy benchmarking (util 40-100%), "
              "memory flat, ptxas children coming and going and autotune cache files written now and then.", seed=18)
    warm_start_to_graph(sim)

    def burst(s):
        if s.rng.random() < 0.7:
            s.write_bytes += int(s.rng.uniform(300e3, 2e6))
            s.comm = {"python3": 10, "ptxas": s.rng.randint(1, 8)}
        else:
            s.comm = {"python3": 10}
    sim.run(50 * 60, cpu_pct=900, util=(40, 100), per_poll=burst, power_w=(280.0, 420.0))
    sim.comm = {"python3": 10}
    s_graph(sim)
    s_http_ready(sim)
    sim.expect_ready()
    return sim


@scenario
def healthy_post_load_repack_45min_same_stacks():
    sim = Sim("healthy_post_load_repack_45min_same_stacks",
              "The incident's healthy case, longer: shards done in 40 s (one blob record), then 45 min at 76.5 GB, "
              "0-2% util, no log line, every rank burning a core repacking weights. py-spy shows the same repacking "
              "loop on every sample (not a wait).", seed=19)
    s_init(sim)
    s_init_end(sim)
    s_load(sim, 40, read_bps=25e6)
    frames = ["_pack_marlin_moe_weights", "process_weights_after_loading", "load_weights_and_postprocess",
              "load_model", "init_model_worker", "run_scheduler_process"]
    sim.run(45 * 60, cpu_pct=820, util=(0, 2), stacks=frames)
    s_kv(sim)
    s_graph(sim)
    s_http_ready(sim)
    sim.expect_ready()
    return sim


@scenario
def healthy_jitter_missing_signals_tp8():
    sim = Sim("healthy_jitter_missing_signals_tp8",
              "Warm start watched over a slow link: poll intervals jitter 6-14 s, nvidia-smi times out on three polls "
              "(gpus absent), one GPU is missing from two samples, one cgroup read fails, py-spy is not installed.",
              seed=20, jitter_s=4.0)
    sim.missing_gpus_polls = {9, 10, 30}
    sim.drop_gpu_polls = {14: 3, 22: 6}
    sim.missing_procs_polls = {17}
    warm_start_to_graph(sim)
    sim.run(4 * 60, cpu_pct=800, util=(0, 2))      # quiet warm-up of kernels before capture
    s_graph(sim)
    s_http_ready(sim)
    sim.expect_ready()
    return sim


@scenario
def healthy_tp4_old_family_poll5():
    sim = Sim("healthy_tp4_old_family_poll5",
              "<= 0.5.16 strings, TP4, watched every 5 s as the restart action does; warm cache, ready in ~3 min.",
              gpus=4, poll_s=5.0, seed=21, mem_total_mib=81559, model="/models/Llama-3.1-70B", model_class="LlamaForCausalLM")
    s_init(sim)
    s_init_end(sim)
    s_load(sim, 35, read_bps=40e6, mem_to=35100, shards=30)
    sim.run(30, cpu_pct=400)
    s_kv(sim, kv_mib=30000)
    s_graph(sim, seconds=45)
    s_http_ready(sim)
    sim.expect_ready()
    return sim


# ---- stalls
@scenario
def stall_nccl_init_spin_new_family_no_pyspy():
    sim = Sim("stall_nccl_init_spin_new_family_no_pyspy",
              "0.5.23: 'Init parallel begin', then NCCL communicator init spins: GPUs at ~500 MiB and 97-100% util, "
              "CPU busy polling, nothing else moves. py-spy is not available on this host.", family="new", seed=31)
    sim.stacks_missing_reason = "py-spy not found"
    s_args(sim)
    sim.log("Init parallel begin.", sim.all_ranks())
    sim.log("sglang is using nccl==2.28.3", [0], dt=3)
    sim.run(20, cpu_pct=500, mem_to=520)
    sim.expect_stalled("distributed_init")
    sim.run(25 * 60, cpu_pct=800, util=(97, 100), progress=False, stacks=["x"], stacks_every_s=60, power_w=(70.0, 95.0))
    return sim


@scenario
def stall_custom_allreduce_spin_heartbeats():
    sim = Sim("stall_custom_allreduce_spin_heartbeats",
              "Custom all-reduce hangs at the first collective of graph capture: 5 of 8 GPUs at 100% with low power, "
              "the others idle, memory flat, only a shared-memory heartbeat line every minute. No py-spy samples.",
              seed=32)
    warm_start_to_graph(sim)
    graph_begin(sim)
    sim.run(sim.poll_s, cpu_pct=800, mem_to=sim.mem[0] + 120, util=(20, 30))
    sim.expect_stalled("cuda_graph")
    hb = "No available shared memory broadcast block found in 60 seconds. This typically happens when some processes are hanging."
    sim.run(30 * 60, cpu_pct=500, util=lambda i: (98, 100) if i in (0, 2, 3, 5, 6) else (0, 1), heartbeat=hb,
            progress=False, power_w=(75.0, 90.0))
    return sim


@scenario
def stall_first_collective_then_timeout_error():
    sim = Sim("stall_first_collective_then_timeout_error",
              "The first all-reduce after loading never completes: all GPUs spin at 100% with flat memory for 10 min, "
              "then the NCCL watchdog aborts with a collective timeout and the process exits.", seed=33)
    warm_start_to_graph(sim)
    sim.expect_stalled("kv_cache")
    sim.run(600, cpu_pct=800, util=(97, 100), progress=False)
    sim.log("[Rank 3] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=1, OpType=ALLREDUCE, NumelIn=1, "
            "NumelOut=1, Timeout(ms)=600000) ran for 600008 milliseconds before timing out.", [3], dt=-2)
    s_die(sim, dt=-1)
    return sim


@scenario
def stall_graph_capture_hang_stacks():
    sim = Sim("stall_graph_capture_hang_stacks",
              "Graph capture hangs at 2/52 batch sizes (bar visible, one frame per record): GPUs at 100%, memory flat, "
              "py-spy every minute shows every rank inside all_reduce during capture.", family="new", seed=34)
    warm_start_to_graph(sim)
    graph_begin(sim)
    sim.log("Capturing batches (bs=512 avail_mem=9.80 GB):   0%|          | 0/52 [00:00<?, ?it/s]", [0], dt=1)
    sim.run(sim.poll_s, cpu_pct=800, mem_to=sim.mem[0] + 150, util=(30, 40))
    sim.log("Capturing batches (bs=496 avail_mem=9.71 GB):   2%|          | 1/52 [00:04<03:40, 0.23it/s]", [0], dt=-4)
    sim.log("Capturing batches (bs=480 avail_mem=9.65 GB):   4%|          | 2/52 [00:08<03:30, 0.24it/s]", [0], dt=-1)
    sim.run(sim.poll_s, cpu_pct=800, mem_to=sim.mem[0] + 150, util=(30, 40))
    sim.expect_stalled("cuda_graph")
    frames = ["all_reduce", "custom_all_reduce", "forward", "capture_one_batch_size", "capture", "__init__"]
    sim.run(25 * 60, cpu_pct=800, util=(97, 100), stacks=frames, progress=False)
    return sim


@scenario
def stall_capture_error_swallowed_idle():
    sim = Sim("stall_capture_error_swallowed_idle",
              "A capture error is swallowed: the log ends at 'Capturing batches ... 0/52', then every signal goes flat "
              "(CPU ~5%, GPUs idle, no disk). No py-spy samples.", seed=35)
    warm_start_to_graph(sim)
    graph_begin(sim)
    sim.log("Capturing batches (bs=512 avail_mem=9.80 GB):   0%|          | 0/52 [00:00<?, ?it/s]", [0], dt=1)
    sim.run(sim.poll_s, cpu_pct=800, mem_to=sim.mem[0] + 100, util=(20, 40))
    sim.expect_stalled("cuda_graph")
    sim.run(20 * 60, cpu_pct=5, util=(0, 2), progress=False)
    return sim


@scenario
def stall_host_ram_reclaim_futex_stacks():
    sim = Sim("stall_host_ram_reclaim_futex_stacks",
              "Host RAM reclaim during loading: after ~12 min of cold reads the loader threads all sit in a futex "
              "wait, read_bytes stops, CPU idle, no log (bar hidden). py-spy every minute.", seed=36)
    s_init(sim)
    s_init_end(sim)
    load_begin(sim)
    sim.run(12 * 60, cpu_pct=700, read_bps=1.1e9, mem_to=22000, util=(0, 3))
    sim.expect_stalled("weight_load")
    frames = ["wait", "result", "_load_shards_multithread", "load_weights", "load_model", "run_scheduler_process"]
    sim.run(10 * 60, cpu_pct=8, util=(0, 2), stacks=frames, progress=False)
    return sim


@scenario
def stall_idle_after_load_jitter_gpu_missing():
    sim = Sim("stall_idle_after_load_jitter_gpu_missing",
              "Shards load (blob record), repacking runs 3 min, then every signal goes flat. Polls jitter 6-14 s, "
              "nvidia-smi times out on several polls and py-spy is not installed.", seed=37, jitter_s=4.0)
    s_init(sim)
    s_init_end(sim)
    s_load(sim, 45, read_bps=25e6)
    sim.run(180, cpu_pct=800, util=(0, 2))
    sim.expect_stalled("post_load")
    n = len(sim.observations)
    sim.missing_gpus_polls = {n + 3, n + 4, n + 20, n + 41, n + 42}
    sim.drop_gpu_polls = {n + 10: 5}
    sim.run(25 * 60, cpu_pct=4, util=(0, 2), progress=False)
    return sim


@scenario
def stall_hub_download_idle_tp4():
    sim = Sim("stall_hub_download_idle_tp4",
              "TP4, weights fetched from the hub at start: the download's part-file stops growing after 4 min; "
              "nothing moves afterwards (no writes, CPU idle, GPUs at context memory).", gpus=4, seed=38,
              mem_total_mib=81559, model="meta-llama/Llama-3.3-70B-Instruct", model_class="LlamaForCausalLM")
    s_init(sim)
    s_init_end(sim)
    load_begin(sim)
    sim.log("Using model weights format ['*.safetensors']", [0], dt=1)
    sim.run(240, cpu_pct=150, write_bps=40e6, util=(0, 2))
    sim.expect_stalled("weight_load")
    sim.run(20 * 60, cpu_pct=3, util=(0, 1), progress=False)
    return sim


# ---- failures
@scenario
def failed_truncated_shard_safetensor_error():
    sim = Sim("failed_truncated_shard_safetensor_error",
              "A truncated shard: SafetensorError a few seconds into loading, the process exits 1 and systemd "
              "schedules a restart.", family="new", seed=41)
    s_init(sim)
    s_init_end(sim)
    load_begin(sim)
    sim.run(10, cpu_pct=700, read_bps=200e6, mem_to=3000)
    onset = round(sim.t + 3, 2)
    sim.log("safetensors_rust.SafetensorError: Error while deserializing header: MetadataIncompleteBuffer", [0, 1, 2, 3, 4, 5, 6, 7], dt=3)
    sim.log("Scheduler hit an exception: Traceback (most recent call last):", [0], dt=3)
    sim.expect_failed("weight_load", onset)
    sim.run(sim.poll_s, cpu_pct=300)
    s_die(sim)
    return sim


@scenario
def failed_oom_graph_capture_new_family():
    sim = Sim("failed_oom_graph_capture_new_family",
              "0.5.23: target-decode graph capture runs out of memory on one rank; the process exits 1 in the next poll.",
              family="new", seed=42, jitter_s=2.0)
    warm_start_to_graph(sim)
    graph_begin(sim)
    sim.run(sim.poll_s, cpu_pct=800, mem_to=sim.mem[0] + 300, util=(20, 30))
    onset = round(sim.t + 4, 2)
    sim.log("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.50 GiB. GPU 5 has a total capacity of 95.59 GiB of which 812.00 MiB is free.", [5], dt=4)
    sim.log("Capture target decode CUDA graph failed: CUDA out of memory.", [5], dt=4)
    sim.expect_failed("cuda_graph", onset)
    sim.run(sim.poll_s, cpu_pct=600, util=(0, 5))
    s_die(sim)
    return sim


@scenario
def failed_leftover_processes_unbalanced():
    sim = Sim("failed_leftover_processes_unbalanced",
              "Processes from an earlier start still hold 40 GB on GPUs 2 and 3: distributed init ends with 'The memory "
              "capacity is unbalanced' and the server exits within seconds.", seed=43)
    sim.foreign_mem = [0, 0, 40960, 40960, 0, 0, 0, 0]
    s_init(sim)
    onset = round(sim.t + 2, 2)
    sim.log("Init torch distributed ends. mem usage=1.07 GB", sim.all_ranks(), dt=1)
    sim.log("ValueError: The memory capacity is unbalanced. Some GPUs may be occupied by other processes. min_per_gpu_memory=54.3, local_gpu_memory=94.5", [2, 3], dt=2)
    sim.expect_failed("distributed_init", onset)
    sim.run(sim.poll_s, cpu_pct=300)
    s_die(sim, restart=False)
    return sim


@scenario
def failed_port_in_use_after_load():
    sim = Sim("failed_port_in_use_after_load",
              "Another process holds port 30001: the whole load and capture succeed, then uvicorn cannot bind.",
              seed=44)
    warm_start_to_graph(sim)
    s_graph(sim)
    sim.log("max_total_num_tokens=412160, chunked_prefill_size=8192, max_prefill_tokens=16384, max_running_requests=128, context_len=262144", [0], dt=1)
    sim.log("INFO:     Started server process [%d]" % sim.pid, prefix=False, dt=2)
    sim.log("INFO:     Waiting for application startup.", prefix=False, dt=2)
    sim.log("INFO:     Application startup complete.", prefix=False, dt=2)
    onset = round(sim.t + 3, 2)
    sim.log("ERROR:    [Errno 98] error while attempting to bind on address ('127.0.0.1', 30001): address already in use", prefix=False, dt=3)
    sim.expect_failed("http_server", onset)
    sim.run(sim.poll_s, cpu_pct=300, util=(0, 2))
    s_die(sim)
    return sim


@scenario
def failed_exit0_reported_success():
    sim = Sim("failed_exit0_reported_success",
              "The engine dies during KV cache setup without a log line and the launcher exits 0: the unit goes "
              "inactive with Result=success, NRestarts stays 0.", seed=45)
    s_init(sim)
    s_init_end(sim)
    s_load(sim, 40, read_bps=25e6)
    sim.run(60, cpu_pct=800)
    s_load_end(sim)
    sim.log("KV Cache is allocated. #tokens: 412160, KV size: 9.42 GB", sim.all_ranks(), dt=2)
    sim.run(sim.poll_s, cpu_pct=800, mem_to=sim.mem[0] + 10615)
    onset = round(sim.t + 2, 2)
    sim.expect_failed("kv_cache", onset)
    s_die(sim, status="0/SUCCESS", dt=2)
    return sim


@scenario
def failed_packing_error_tp4_new_family():
    sim = Sim("failed_packing_error_tp4_new_family",
              "0.5.23, TP4: after the shard bar, 6 silent busy minutes of repacking end with 'Unexpected error during "
              "packing' on rank 1; the other ranks wait in NCCL (GPUs spin) and the unit stays active.",
              gpus=4, family="new", seed=46, mem_total_mib=97887)
    s_init(sim)
    s_init_end(sim)
    s_load(sim, 60, read_bps=30e6, mem_to=70000, shards=32)
    sim.run(6 * 60, cpu_pct=420, util=(0, 2))
    onset = round(sim.t + 5, 2)
    sim.log("Unexpected error during packing of layer model.layers.21.mlp.experts: RuntimeError: CUDA error: an illegal memory access was encountered", [1], dt=5)
    sim.log("Traceback (most recent call last):", [1], dt=5)
    sim.expect_failed("post_load", onset)
    sim.run(5 * 60, cpu_pct=300, util=(97, 100), progress=False)
    return sim


@scenario
def failed_scheduler_watchdog_after_silence():
    sim = Sim("failed_scheduler_watchdog_after_silence",
              "<= 0.5.16 strings: warmup request hangs after the HTTP server is up (health 503, CPU busy in the "
              "scheduler loop) until the scheduler watchdog fires and the process exits.", seed=47)
    warm_start_to_graph(sim)
    s_graph(sim)
    sim.log("INFO:     Started server process [%d]" % sim.pid, prefix=False, dt=2)
    sim.log("INFO:     Uvicorn running on http://127.0.0.1:30001 (Press CTRL+C to quit)", prefix=False, dt=2)
    sim.health = 503
    sim.run(sim.poll_s, cpu_pct=300, util=(3, 5))
    sim.log('INFO:     127.0.0.1:51234 - "GET /get_model_info HTTP/1.1" 200 OK', prefix=False, dt=1)
    sim.run(sim.poll_s, cpu_pct=300, util=(3, 5))
    sim.run(300, cpu_pct=250, util=(3, 6), progress=False)
    onset = round(sim.t + 1, 2)
    sim.log("Scheduler watchdog timeout (self.watchdog_timeout=300, self.soft=False)", [0], dt=1)
    sim.expect_failed("warmup", onset)
    sim.run(sim.poll_s, cpu_pct=100, util=(0, 2), progress=False)
    s_die(sim, status="1/FAILURE", restart=False)
    return sim


# ---- gaps: lines SGLang survives, GPU-bound constant stacks, unknown exceptions, cut records,
# ---- a wedged nvidia-smi, the phase a fault belongs to
SOFT_WATCHDOG = "Scheduler watchdog timeout (self.watchdog_timeout=300, self.soft=True)"
BENIGN_WARNINGS = (
    "Using default MoE kernel config. Performance might be sub-optimal! Config file not found at "
    "/sgl/srt/layers/moe/fused_moe_triton/configs/E=384,N=256,device_name=NVIDIA_H200.json",
    "ProcessGroupNCCL initialization options: size: 8, global rank: 0, TIMEOUT(ms): 600000, USE_HIGH_PRIORITY_STREAM: 0",
    "WARNING: custom all-reduce failed the P2P check on this topology, falling back to NCCL all-reduce",
    "Failed to load the fused RoPE kernel (error: undefined symbol), retrying with the Triton implementation",
)


@scenario
def healthy_soft_watchdog_and_warnings_40min():
    sim = Sim("healthy_soft_watchdog_and_warnings_40min",
              "0.5.23 with --soft-watchdog-timeout 300: after the KV cache, 40 min of silent busy work (CPU ~900%, GPUs "
              "idle); the soft watchdog fires every 5 min, logs 'watchdog timeout (... soft=True)' in two wordings and "
              "dumps py-spy stacks, and warnings saying error, timeout and failed come and go. SGLang carries on.",
              family="new", seed=51)
    warm_start_to_graph(sim)
    for w in BENIGN_WARNINGS:
        sim.log(w, [0], dt=1)
    dumps = ('Thread 0x7F3A2C1FF740 (active): "MainThread"', "    compile_fx (torch/_inductor/compile_fx.py:1010)",
             "    capture (sglang/srt/model_executor/cuda_graph_runner.py:412)")

    def watchdog(s):
        if int(s.t) % 300 < s.poll_s:
            s.log(SOFT_WATCHDOG if int(s.t) % 600 < 300 else "Scheduler soft watchdog timeout after 300 s, dumping stacks", [0])
            s.log("Scheduler debug info:", [0])
            for line in dumps:
                s.log(line, prefix=False)
    sim.run(40 * 60, cpu_pct=900, util=(0, 2), per_poll=watchdog)
    s_graph(sim)
    s_http_ready(sim)
    sim.expect_ready()
    return sim


@scenario
def healthy_gpu_bound_moe_tuning_constant_stacks_35min():
    sim = Sim("healthy_gpu_bound_moe_tuning_constant_stacks_35min",
              "Fused-MoE config tuning on first start: 35 min with one Python stack on every sample (innermost "
              "'synchronize'), host CPU low (blocking sync), GPU memory flat, no log line, no compiler; GPU "
              "utilisation comes in bursts between idle polls (short benchmark kernels).", family="new", seed=52)
    warm_start_to_graph(sim)
    frames = ["synchronize", "benchmark_config", "tune", "tune_fused_moe", "init_model_worker", "run_scheduler_process"]

    def bursts(i):
        return (0, 2) if sim.rng.random() < 0.5 else (15, 100)
    sim.run(35 * 60, cpu_pct=30, util=bursts, stacks=frames, stacks_every_s=60)
    s_graph(sim)
    s_http_ready(sim)
    sim.expect_ready()
    return sim


@scenario
def failed_unknown_exception_one_rank_others_wait():
    sim = Sim("failed_unknown_exception_one_rank_others_wait",
              "TP4, 0.5.23: while loading, rank 2 raises a KeyError the detector has no class for (a traceback); the "
              "other ranks wait for it in a collective, their GPUs spinning, and the unit stays active. Without GPU "
              "readings (and no stacks) this is a soft line followed by a steady busy CPU, as a caught error and a "
              "long CPU-bound phase are: expect.without_gpu is patient.",
              gpus=4, family="new", seed=53, mem_total_mib=81559)
    s_init(sim)
    s_init_end(sim)
    load_begin(sim)
    sim.run(60, cpu_pct=600, read_bps=400e6, mem_to=30000, util=(0, 3))
    onset = round(sim.t + 4, 2)
    sim.log("Traceback (most recent call last):", [2], dt=4)
    for line in ('  File "/sgl/srt/model_loader/loader.py", line 612, in load_weights_and_postprocess',
                 "    model.load_weights(weights)",
                 '  File "/sgl/srt/models/deepseek_v2.py", line 2870, in load_weights',
                 "    param = params_dict[name]",
                 "            ~~~~~~~~~~~^^^^^^",
                 "KeyError: 'model.layers.61.mlp.experts.w13_weight_scale'"):
        sim.log(line, prefix=False, dt=4)
    sim.expect_failed("weight_load", onset, without_gpu="patient")
    sim.run(20 * 60, cpu_pct=300, util=lambda i: (0, 1) if i == 2 else (98, 100), progress=False)
    return sim


@scenario
def failed_oom_line_cut_at_line_max():
    sim = Sim("failed_oom_line_cut_at_line_max",
              "journald runs with a small LineMax: the OOM of graph capture arrives cut into parts flagged 'line-max', "
              "the class name itself split between two of them; the process lingers a poll, then exits.",
              family="new", seed=54)
    warm_start_to_graph(sim)
    graph_begin(sim)
    sim.run(sim.poll_s, cpu_pct=800, mem_to=sim.mem[0] + 300, util=(20, 30))
    onset = round(sim.t + 4, 2)
    sim.log("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.50 GiB. GPU 5 has a total capacity of "
            "95.59 GiB of which 812.00 MiB is free. Including non-PyTorch memory, this process has 94.78 GiB memory in use.",
            [5], dt=4, line_max=37)
    sim.expect_failed("cuda_graph", onset)
    sim.run(sim.poll_s, cpu_pct=600, util=(0, 5))
    s_die(sim)
    return sim


@scenario
def stall_spin_heartbeats_cut_at_line_max():
    sim = Sim("stall_spin_heartbeats_cut_at_line_max",
              "LineMax below the heartbeat's length: the all-reduce after the KV cache hangs on 4 of 8 GPUs (100%, flat "
              "memory), and the shared-memory heartbeat arrives every minute cut into parts.", seed=55)
    warm_start_to_graph(sim)
    sim.expect_stalled("kv_cache")
    hb = ("No available shared memory broadcast block found in 60 seconds. This typically happens when some processes "
          "are hanging or doing some time-consuming work (e.g. compilation).")

    def heartbeat(s):
        if int(s.t) % 60 < s.poll_s:
            s.log(hb, [0], line_max=90)
    sim.run(25 * 60, cpu_pct=400, util=lambda i: (99, 100) if i < 4 else (0, 1), per_poll=heartbeat, progress=False)
    return sim


@scenario
def stall_hung_collective_nvidia_smi_wedged():
    sim = Sim("stall_hung_collective_nvidia_smi_wedged",
              "The first all-reduce after loading hangs and wedges the driver: after two polls of GPUs at 100% "
              "nvidia-smi times out on every poll; the ranks busy-poll (CPU ~800%); no log, no py-spy.", seed=56)
    sim.stacks_missing_reason = "py-spy not found"
    warm_start_to_graph(sim)
    sim.expect_stalled("kv_cache")
    n = len(sim.observations)
    sim.missing_gpus_polls = set(range(n + 3, n + 400))
    sim.run(32 * 60, cpu_pct=800, util=(99, 100), progress=False)
    return sim


@scenario
def failed_bind_error_records_out_of_order():
    sim = Sim("failed_bind_error_records_out_of_order",
              "uvicorn cannot bind its port; the poll that brings the bind error lists its records out of time order "
              "(the error first, a late rank's capture line after it): the fault belongs to http_server.",
              family="new", seed=57)
    warm_start_to_graph(sim)
    graph_begin(sim)
    sim.run(60, cpu_pct=800, mem_to=sim.mem[0] + 900, util=(30, 40))
    graph_end(sim, 60)
    sim.log("max_total_num_tokens=412160, chunked_prefill_size=8192, max_prefill_tokens=16384, max_running_requests=128, context_len=262144", [0], dt=1)
    sim.log("INFO:     Started server process [%d]" % sim.pid, prefix=False, dt=2)
    onset = round(sim.t + 3, 2)
    sim.log("ERROR:    [Errno 98] error while attempting to bind on address ('127.0.0.1', 30001): address already in use", prefix=False, dt=3)
    sim.reverse_log_polls = {len(sim.observations) + 1}
    sim.expect_failed("http_server", onset)
    sim.run(sim.poll_s, cpu_pct=300, util=(0, 2))
    s_die(sim)
    return sim


@scenario
def healthy_autotune_flat_out_high_power_20min():
    sim = Sim("healthy_autotune_flat_out_high_power_20min",
              "GPU-bound kernel autotuning with large candidates, as recorded on two H200s: 20 min at 90-100% utilisation "
              "on every GPU, 600-700 W (idle ~80 W), GPU memory flat, the same stack on every sample (synchronize "
              "innermost), one core per rank spinning in it, no log line. Only power tells it from a spin-wait.",
              family="new", seed=58)
    s_init(sim)
    s_init_end(sim)
    s_load(sim, 40, read_bps=25e6)
    sim.run(60, cpu_pct=800, util=(0, 2), power_w=(75.0, 90.0))
    s_kv(sim)
    frames = ["synchronize", "benchmark_config", "tune", "rank_main"]
    sim.run(20 * 60, cpu_pct=800, util=(90, 100), stacks=frames, power_w=(600.0, 700.0))
    s_graph(sim)
    s_http_ready(sim)
    sim.expect_ready()
    return sim


@scenario
def stall_capture_allreduce_spin_at_idle_power():
    sim = Sim("stall_capture_allreduce_spin_at_idle_power",
              "Graph capture's all-reduce hangs on 4 of 8 GPUs: 100% utilisation at about idle power (115-125 W against "
              "75-90 W idle), the others idle, memory flat, ranks busy-polling, no log, no py-spy. A spin, not kernels at "
              "full tilt, although it happens in a phase where kernels may run flat out.", seed=59)
    warm_start_to_graph(sim)
    sim.run(sim.poll_s, cpu_pct=800, util=(0, 2), power_w=(75.0, 90.0))
    graph_begin(sim)
    sim.run(sim.poll_s, cpu_pct=800, mem_to=sim.mem[0] + 120, util=(20, 30), power_w=(200.0, 300.0))
    sim.expect_stalled("cuda_graph")
    sim.run(32 * 60, cpu_pct=400, util=lambda i: (99, 100) if i < 4 else (0, 1), progress=False, power_w=(110.0, 125.0))
    return sim


# Inductor's max-autotune (torch/_inductor/select_algorithm.py) logs, for every kernel config
# that does not fit in shared memory, an ERROR record through glog-style logging with the
# traceback of the failed benchmark, then says it ignores that choice and goes on.
INDUCTOR_OOM_RECORDS = (
    "E1201 %s.%06d 4242 torch/_inductor/select_algorithm.py:2105] [0/0] Exception No valid triton configs. "
    "OutOfMemoryError: out of resource: triton_mm Required: 262144 Hardware limit:232448 Reducing block sizes or "
    "`num_stages` may help. for benchmark choice TritonTemplateCaller(%s)",
    "Traceback (most recent call last):",
    '  File "/venv/lib/python3.11/site-packages/torch/_inductor/select_algorithm.py", line 2087, in benchmark_choices',
    "    timing = cls.benchmark_choice(choice, autotune_args)",
    '  File "/venv/lib/python3.11/site-packages/torch/_inductor/runtime/triton_heuristics.py", line 512, in precompile',
    "    raise RuntimeError(",
    "RuntimeError: No valid triton configs. OutOfMemoryError: out of resource: triton_mm Required: 262144 Hardware "
    "limit:232448 Reducing block sizes or `num_stages` may help.",
    "E1201 %s.%06d 4242 torch/_inductor/select_algorithm.py:2113] [0/0] Runtime error during autotuning: No valid "
    "triton configs. OutOfMemoryError: out of resource: triton_mm Required: 262144 Hardware limit:232448. "
    "Ignoring this choice.",
)


def inductor_oom_records(sim, dt=1.0):
    """One failed autotune choice as Inductor logs it (records without SGLang's rank prefix)."""
    clock = sim.stamp(sim.t + dt)
    micro = sim.rng.randint(0, 999999)
    choice = "/tmp/torchinductor_sglang/%s/c%s.py" % (sim.rng.choice("abcdef"), sim.rng.randint(1000, 9999))
    for i, rec in enumerate(INDUCTOR_OOM_RECORDS):
        if i == 0:
            rec = rec % (clock, micro, choice)
        elif i == len(INDUCTOR_OOM_RECORDS) - 1:
            rec = rec % (clock, micro)
        sim.log(rec, prefix=False, dt=dt)


def compile_workers(sim, busy):
    """Inductor's compile workers: child processes that come and go while it compiles."""
    n = sim.rng.randint(4, 32) if busy else sim.rng.randint(0, 2)
    return {"python3": sim.gpus + 2 + n}


@scenario
def healthy_inductor_autotune_oom_records_in_graph_capture():
    sim = Sim("healthy_inductor_autotune_oom_records_in_graph_capture",
              "A cold torch.compile (max-autotune) inside CUDA graph capture: for 14 min Inductor logs, for every kernel "
              "config that does not fit in shared memory, an E-record with a traceback ending 'OutOfMemoryError: out of "
              "resource', then 'Ignoring this choice.', and compiles on: compile workers come and go, CPU busy, GPU "
              "bursts while it benchmarks. Every lethal-looking line is survived.", family="new", seed=61)
    warm_start_to_graph(sim)
    graph_begin(sim)
    sim.run(sim.poll_s, cpu_pct=800, mem_to=sim.mem[0] + 300, util=(20, 30))
    end = sim.t + 14 * 60

    def autotune(s):
        if s.rng.random() < 0.35:
            inductor_oom_records(s, dt=s.rng.uniform(-s.poll_s + 0.5, 0))
    while sim.t < end:
        busy = sim.rng.random() < 0.7
        sim.run(sim.poll_s, cpu_pct=sim.rng.uniform(900, 3200) if busy else sim.rng.uniform(120, 400),
                comm=compile_workers(sim, busy), util=(0, 0) if busy else (3, 40), per_poll=autotune)
    sim.run(sim.poll_s, cpu_pct=800, mem_to=sim.mem[0] + 1500, util=(30, 40))
    graph_end(sim, 900)
    s_http_ready(sim)
    sim.expect_ready()
    return sim


@scenario
def failed_oom_in_graph_capture_traceback_then_exit():
    sim = Sim("failed_oom_in_graph_capture_traceback_then_exit",
              "The faulty twin of Inductor's survived records: a real CUDA OOM in graph capture; the rank prints its "
              "traceback, tears down for a poll with falling CPU and GPUs idle, and the main process exits.",
              family="new", seed=62)
    warm_start_to_graph(sim)
    graph_begin(sim)
    sim.run(sim.poll_s * 2, cpu_pct=800, mem_to=sim.mem[0] + 600, util=(20, 30))
    onset = round(sim.t + 3, 2)
    for line in ("Traceback (most recent call last):",
                 '  File "/sgl/srt/model_executor/cuda_graph_runner.py", line 388, in capture',
                 "    out = self.capture_one_batch_size(bs, forward)",
                 "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 3 has a total capacity of "
                 "95.59 GiB of which 1.02 GiB is free."):
        sim.log(line, [3] if line.startswith("Trace") else None, prefix=line.startswith("Trace"), dt=3)
    sim.expect_failed("cuda_graph", onset)
    sim.run(sim.poll_s * 2, cpu_pct=60, util=(0, 1), progress=False)
    s_die(sim)
    return sim


TUNING_FRAMES = ["synchronize (torch/cuda/__init__.py:985)", "benchmark_config (tuning_fused_moe.py:211)",
                 "tune (tuning_fused_moe.py:402)", "run_tuning (tuning_fused_moe.py:530)",
                 "init_model_worker (model_runner.py:301)", "run_scheduler_process (scheduler.py:2950)"]


def burst_every(sim, low_s, high_s, peak=(2, 27)):
    """GPU utilisation 0 except one burst of short kernels every low_s..high_s seconds, on every GPU at once;
    the host wakes for the burst (1-3 s of CPU per rank, as recorded on an H200:
    real_h200_healthy_sparse_tuning_bursts)."""
    state = {"next": sim.t + sim.rng.uniform(low_s, high_s), "burst_t": None}

    def util(i):
        if i == 0 and state["burst_t"] != sim.t:
            state["burst_now"] = sim.t >= state["next"]
            if state["burst_now"]:
                state["next"] = sim.t + sim.rng.uniform(low_s, high_s)
                state["peak"] = sim.rng.randint(*peak)
                sim.cpu_s += sim.gpus * sim.rng.uniform(1.0, 3.0)
            state["burst_t"] = sim.t
        return (state["peak"], state["peak"]) if state.get("burst_now") else (0, 0)
    return util


@scenario
def healthy_tuning_loop_bursts_every_30_60s_same_stacks():
    sim = Sim("healthy_tuning_loop_bursts_every_30_60s_same_stacks",
              "A GPU-bound tuning loop (short kernels timed with synchronize, idle gaps between): 22 min with the same "
              "Python stack on every sample, host CPU low but rising, GPU utilisation 0 on most samples with one burst of "
              "2-27% every 30-60 s, memory flat, no log line.", family="new", gpus=4, poll_s=5.0, seed=63,
              mem_total_mib=143771)
    warm_start_to_graph(sim)
    sim.run(22 * 60, cpu_pct=0.3, util=burst_every(sim, 30, 60), stacks=TUNING_FRAMES, stacks_every_s=30)
    s_graph(sim)
    s_http_ready(sim)
    sim.expect_ready()
    return sim


@scenario
def stall_tuning_loop_hangs_bursts_stop():
    sim = Sim("stall_tuning_loop_hangs_bursts_stop",
              "The tuning loop's faulty twin: after 5 min of bursts the ranks block in a barrier before the next "
              "config: the same stack on every sample, GPU utilisation 0 on every sample (no burst any more), "
              "the CPU time rising at the steady trickle of background threads, nothing else moves.", family="new", gpus=4, poll_s=5.0, seed=64,
              mem_total_mib=143771)
    warm_start_to_graph(sim)
    sim.run(5 * 60, cpu_pct=0.3, util=burst_every(sim, 30, 60), stacks=TUNING_FRAMES, stacks_every_s=30)
    sim.run(sim.poll_s, cpu_pct=30, util=(20, 20), stacks=TUNING_FRAMES, stacks_every_s=30)
    sim.expect_stalled("kv_cache")
    hung = ["wait (torch/distributed/distributed_c10d.py:4159)", "barrier (torch/distributed/distributed_c10d.py:4162)"] + TUNING_FRAMES[1:]
    sim.run(31 * 60, cpu_pct=1.5, util=(0, 0), stacks=hung, stacks_every_s=30, progress=False)
    return sim


@scenario
def stall_blind_frozen_cpu_clock_after_load():
    sim = Sim("stall_blind_frozen_cpu_clock_after_load",
              "No GPU telemetry (nvidia-smi absent from the host) and no py-spy: after the weights are read every process "
              "of the unit blocks for good (a lost wake-up): its CPU time does not move at all, no read, no log line.",
              family="new", seed=65)
    sim.no_gpu_reason = "nvidia-smi not found"
    sim.stacks_missing_reason = "py-spy not found"
    s_init(sim)
    s_init_end(sim)
    s_load(sim, 60, read_bps=300e6)
    s_load_end(sim)
    sim.run(sim.poll_s * 3, cpu_pct=700)
    sim.expect_stalled("post_load")
    sim.run(20 * 60, cpu_pct=0, progress=False)
    return sim


@scenario
def stall_blind_frozen_cpu_clock_in_distributed_init_tp4():
    sim = Sim("stall_blind_frozen_cpu_clock_in_distributed_init_tp4",
              "No GPU telemetry, no py-spy, TP4: a rank blocks in the rendezvous store and the others with it; the "
              "unit's CPU time stops dead, nothing else moves.", gpus=4, poll_s=5.0, seed=66)
    sim.no_gpu_reason = "nvidia-smi not found"
    sim.stacks_missing_reason = "py-spy not found"
    s_args(sim)
    sim.log("Init torch distributed begin.", sim.all_ranks())
    sim.run(15, cpu_pct=300)
    sim.expect_stalled("distributed_init")
    sim.run(15 * 60, cpu_pct=0, progress=False)
    return sim


@scenario
def healthy_blind_tuning_loop_low_cpu_same_stacks():
    sim = Sim("healthy_blind_tuning_loop_low_cpu_same_stacks",
              "No GPU telemetry: a 14 min GPU-bound tuning loop with blocking synchronisation: the host at a trickle "
              "between configs and awake for a second or two of work every 30-60 s, the same stack on every sample, "
              "no log line, memory unknown (inside the 16 min idle window a start without GPU readings gets, also "
              "when its stacks are lost).", family="new", seed=67)
    sim.no_gpu_reason = "nvidia-smi not found"
    warm_start_to_graph(sim)
    sim.run(14 * 60, cpu_pct=0.3, util=burst_every(sim, 30, 60), stacks=TUNING_FRAMES, stacks_every_s=60)
    s_graph(sim)
    s_http_ready(sim)
    sim.expect_ready()
    return sim


@scenario
def healthy_blind_compile_workers_rank_waits_on_futures():
    sim = Sim("healthy_blind_compile_workers_rank_waits_on_futures",
              "No GPU telemetry and no py-spy: the ranks wait on the futures of compile workers for 18 min; the "
              "workers come and go, CPU from 20% to 30 cores, no log line.", family="new", seed=68)
    sim.no_gpu_reason = "nvidia-smi not found"
    sim.stacks_missing_reason = "py-spy not found"
    warm_start_to_graph(sim)
    end = sim.t + 18 * 60
    while sim.t < end:
        busy = sim.rng.random() < 0.6
        sim.run(sim.poll_s, cpu_pct=sim.rng.uniform(600, 3000) if busy else sim.rng.uniform(20, 60),
                comm=compile_workers(sim, busy))
    s_graph(sim)
    s_http_ready(sim)
    sim.expect_ready()
    return sim


# ---- issue 32: soft and sticky lines, the CPU floor, a blind watcher (each with its twin)
CAUGHT_OOM = ("Traceback (most recent call last):",
              '  File "/sgl/srt/layers/moe/fused_moe_triton/fused_moe.py", line 1402, in try_get_optimal_moe_config',
              "    return _benchmark_configs(M, E, N, configs)",
              "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.50 GiB. GPU 0 has a total capacity of "
              "95.59 GiB of which 2.11 GiB is free. Including non-PyTorch memory, this process has 93.40 GiB memory in use.")


def blind_start_to_capture(sim):
    """A start watched without nvidia-smi (not installed) and without py-spy, up to graph capture."""
    sim.no_gpu_reason = "nvidia-smi not found"
    sim.stacks_missing_reason = "py-spy not found"
    sim.comm = {"python3": sim.gpus + 2}
    warm_start_to_graph(sim)
    graph_begin(sim)
    sim.run(sim.poll_s * 2, cpu_pct=800)


def caught_oom(sim, rank=0):
    onset = round(sim.t + 3, 2)
    for line in CAUGHT_OOM:
        sim.log(line, [rank] if line.startswith("Trace") else None, prefix=line.startswith("Trace"), dt=3)
    return onset


@scenario
def healthy_blind_caught_oom_then_long_cpu_phase():
    sim = Sim("healthy_blind_caught_oom_then_long_cpu_phase",
              "No GPU readings and no py-spy: in graph capture a rank prints an out-of-memory traceback that the MoE config "
              "search catches (it tries a smaller config), then 17 min of silent CPU-bound work: one core pinned plus the "
              "other ranks' poll loops (~105 % over 10 processes), nothing else moves, then the capture ends.",
              family="new", seed=71)
    blind_start_to_capture(sim)
    caught_oom(sim)
    sim.run(17 * 60, cpu_pct=105)
    graph_end(sim, 17 * 60 + 40)
    s_http_ready(sim)
    sim.expect_ready()
    return sim


@scenario
def failed_blind_soft_oom_then_frozen():
    sim = Sim("failed_blind_soft_oom_then_frozen",
              "The caught OOM's faulty twin, as blind: the same traceback in graph capture, not caught this time: the rank "
              "blocks for good and the others with it; the unit's CPU time stops (a trickle of 0.5 %), nothing moves.",
              family="new", seed=72)
    blind_start_to_capture(sim)
    onset = caught_oom(sim)
    sim.expect_failed("cuda_graph", onset)
    sim.run(12 * 60, cpu_pct=0.5, progress=False)
    return sim


@scenario
def failed_bind_after_load_ranks_at_cpu_floor():
    sim = Sim("failed_bind_after_load_ranks_at_cpu_floor",
              "The whole load and capture succeed, then uvicorn cannot bind port 30001 ([Errno 98]) and the launcher never "
              "exits: the ranks sit in their poll loops at ~12 % each (about 120 % over 10 processes), GPUs idle with "
              "flat memory, no stacks, nothing else moves.", family="new", seed=73)
    sim.stacks_missing_reason = "py-spy not found"
    warm_start_to_graph(sim)
    s_graph(sim)
    sim.log("max_total_num_tokens=412160, chunked_prefill_size=8192, max_prefill_tokens=16384, max_running_requests=128, "
            "context_len=262144", [0], dt=1)
    sim.log("INFO:     Started server process [%d]" % sim.pid, prefix=False, dt=2)
    sim.log("INFO:     Waiting for application startup.", prefix=False, dt=2)
    sim.log("INFO:     Application startup complete.", prefix=False, dt=2)
    onset = round(sim.t + 3, 2)
    sim.log("ERROR:    [Errno 98] error while attempting to bind on address ('0.0.0.0', 30001): address already in use",
            prefix=False, dt=3)
    sim.log("INFO:     Waiting for application shutdown.", prefix=False, dt=3.5)
    sim.log("INFO:     Application shutdown complete.", prefix=False, dt=3.5)
    sim.expect_failed("http_server", onset)
    sim.run(10 * 60, cpu_pct=120, util=(0, 0), progress=False)
    return sim


@scenario
def healthy_one_process_cpu_bound_ranks_idle_16min():
    sim = Sim("healthy_one_process_cpu_bound_ranks_idle_16min",
              "The CPU floor's healthy twin: after graph capture one process works on one core for 16 min (a tokenizer "
              "or a CPU repack; ~105 % over 10 processes, about 10 % each, the rate a floor may have) while the ranks "
              "idle, GPUs idle with flat memory, no log line, no stacks; then the server comes up. The start never sat "
              "at a lower rate before, so its floor is unknown and the phase is work, not a start at its floor.",
              family="new", seed=77)
    sim.stacks_missing_reason = "py-spy not found"
    warm_start_to_graph(sim)
    s_graph(sim)
    sim.run(16 * 60, cpu_pct=105, util=(0, 0))
    s_http_ready(sim)
    sim.expect_ready()
    return sim


@scenario
def healthy_download_ranks_at_cpu_floor_sparse_progress():
    sim = Sim("healthy_download_ranks_at_cpu_floor_sparse_progress",
              "A slow hub download before the load: rank 0 writes a finished chunk every 1.5-2.5 min while every rank "
              "sits in its poll loop (~12 % each over 10 processes), GPUs idle, no log line for 16 min; then the load.",
              family="new", seed=74)
    sim.stacks_missing_reason = "py-spy not found"
    s_init(sim)
    s_init_end(sim)
    sim.run(30, cpu_pct=120, util=(0, 0))
    end = sim.t + 16 * 60
    while sim.t < end:
        sim.run(round(sim.rng.uniform(90, 150)), cpu_pct=120, util=(0, 0))
        sim.write_bytes += int(sim.rng.uniform(400e6, 900e6))
    s_load(sim, 60, read_bps=3e9)
    s_kv(sim)
    s_graph(sim)
    s_http_ready(sim)
    sim.expect_ready()
    return sim


@scenario
def failed_state_dict_mismatch_one_rank_others_wait_600pct():
    sim = Sim("failed_state_dict_mismatch_one_rank_others_wait_600pct",
              "0.5.23: rank 5's strict load_state_dict finds a size mismatch (a checkpoint for another expert layout); "
              "the other ranks wait for it in a collective, their CPU at ~600 % together, GPUs idle with flat memory, "
              "no stacks, the unit stays active.", family="new", seed=75)
    sim.stacks_missing_reason = "py-spy not found"
    s_init(sim)
    s_init_end(sim)
    load_begin(sim)
    sim.run(60, cpu_pct=800, read_bps=900e6, mem_to=40000, util=(0, 3))
    onset = round(sim.t + 4, 2)
    sim.log("Traceback (most recent call last):", [5], dt=4)
    for line in ('  File "/sgl/srt/model_loader/loader.py", line 431, in load_model',
                 "    model.load_state_dict(state_dict, strict=True)",
                 '  File "/venv/lib/python3.12/site-packages/torch/nn/modules/module.py", line 2593, in load_state_dict',
                 "    raise RuntimeError(",
                 "RuntimeError: Error(s) in loading state_dict for DeepseekV3ForCausalLM:",
                 "\tsize mismatch for model.layers.3.mlp.experts.w2_weight: copying a param with shape torch.Size([384, "
                 "7168, 256]) from checkpoint, the shape in current model is torch.Size([384, 7168, 512])."):
        sim.log(line, prefix=False, dt=4)
    sim.expect_failed("weight_load", onset)
    sim.run(12 * 60, cpu_pct=600, util=(0, 1), progress=False)
    return sim


@scenario
def healthy_gpu_bound_phase_600pct_no_stacks():
    sim = Sim("healthy_gpu_bound_phase_600pct_no_stacks",
              "The state_dict mismatch's healthy twin: after the load, 15 min of silent GPU-bound work (weights "
              "re-laid out on the GPUs): CPU ~600 % together, utilisation 40-100 % and changing, memory flat, no log "
              "line, no stacks, no power readings.", family="new", seed=76)
    sim.stacks_missing_reason = "py-spy not found"
    s_init(sim)
    s_init_end(sim)
    s_load(sim, 60, read_bps=900e6)
    s_load_end(sim)
    sim.run(15 * 60, cpu_pct=600, util=(40, 100))
    s_kv(sim)
    s_graph(sim)
    s_http_ready(sim)
    sim.expect_ready()
    return sim


def deepgemm_begin(sim):
    sim.stacks_missing_reason = "py-spy not found"
    warm_start_to_graph(sim)
    sim.log("Entering DeepGEMM JIT Pre-Compile session. It may take a long time (typically 10-20 mins) if you have not "
            "run `sglang.compile_deep_gemm`.", [0])
    sim.run(sim.poll_s * 2, cpu_pct=800, util=(20, 60), mem_to=sim.mem[0] + 400)


@scenario
def healthy_long_kernels_flat_no_power_16min():
    sim = Sim("healthy_long_kernels_flat_no_power_16min",
              "DeepGEMM warmup with large shapes and no power readings (the board does not report them): 16 min with every "
              "GPU at 99-100 %, memory flat, one core per rank waiting on its GPU, no log line, no stacks. Without "
              "power nothing tells these kernels from a spin: the watcher waits the phase's longest healthy kernels.",
              family="new", seed=77)
    deepgemm_begin(sim)
    sim.run(16 * 60, cpu_pct=800, util=(99, 100))
    s_graph(sim)
    s_http_ready(sim)
    sim.expect_ready()
    return sim


@scenario
def stall_kernel_never_ends_no_power():
    sim = Sim("stall_kernel_never_ends_no_power",
              "The long kernels' faulty twin: in the same DeepGEMM warmup a kernel never ends: every GPU at 100 %, memory "
              "flat, one core per rank waiting, no power readings, no stacks, for 30 min.", family="new", seed=78)
    deepgemm_begin(sim)
    sim.expect_stalled("jit_compile")
    sim.run(30 * 60, cpu_pct=800, util=(100, 100), progress=False)
    return sim


# One reading of the same evidence: a wait whose GPUs' power is unknown is judged by how long
# the stacks stay identical against what the phase usually takes; with power, by its level.
SYNC_FRAMES = ["synchronize (torch/cuda/__init__.py)", "capture_one_batch_size (cuda_graph_runner.py)",
               "capture (cuda_graph_runner.py)", "rank_main (scheduler.py)"]


def h100_start_to_graph(sim, ranks_util=(0, 2), power=None):
    """A small start on H100s (power.limit 700 W) up to graph capture."""
    sim.power_limit_w = 700.0
    s_init(sim)
    s_init_end(sim)
    s_load(sim, 30, read_bps=30e6, mem_to=60000)
    sim.run(sim.poll_s * 2, cpu_pct=100 * sim.gpus, util=ranks_util, power_w=power)
    s_kv(sim)


@scenario
def stall_blind_allreduce_spin_same_synchronize_stacks():
    sim = Sim("stall_blind_allreduce_spin_same_synchronize_stacks",
              "An NCCL all-reduce that never completes in graph capture, on 2 H100s whose nvidia-smi cannot be read: "
              "both ranks sit in the same synchronize on every py-spy sample (every 30 s) for 8 min, one core each "
              "spinning in it, no log line, for 31 min. Without a GPU reading only how long the stacks stay identical, "
              "against what graph capture usually takes, ends it.", gpus=2, poll_s=10.0, seed=91)
    sim.no_gpu_reason = "nvidia-smi not found"
    sim.comm = {"python3": 3}
    h100_start_to_graph(sim)
    graph_begin(sim)
    sim.run(10, cpu_pct=200, mem_to=sim.mem[0] + 300, util=(30, 40))
    sim.expect_stalled("cuda_graph")
    sim.run(31 * 60, cpu_pct=200, util=(100, 100), stacks=SYNC_FRAMES, stacks_every_s=30.0, progress=False)
    return sim


@scenario
def healthy_capture_same_synchronize_2min_no_power():
    sim = Sim("healthy_capture_same_synchronize_2min_no_power",
              "Graph capture on one GPU whose board reports no power: the rank sits in the same synchronize for 2m20s "
              "(every py-spy sample identical) at 100 % utilisation, memory flat, one core busy, no log line; then the "
              "capture ends and the server is ready at about 200 s. Without power these are kernels as likely as a spin.",
              gpus=1, poll_s=5.0, seed=92)
    sim.comm = {"python3": 2}
    h100_start_to_graph(sim)
    graph_begin(sim)
    sim.run(10, cpu_pct=100, mem_to=sim.mem[0] + 300, util=(30, 40))
    sim.run(140, cpu_pct=100, util=(99, 100), stacks=SYNC_FRAMES, stacks_every_s=30.0, progress=False)
    s_graph(sim, seconds=10, batches=4, mem_gain=100)
    s_http_ready(sim)
    sim.expect_ready()
    return sim


@scenario
def healthy_gemm_phase_high_power_same_stacks():
    sim = Sim("healthy_gemm_phase_high_power_same_stacks",
              "After loading, short-lived helper processes exit one after another and the main process runs silent GEMMs "
              "on an H100 (power.limit 700 W), synchronising every few seconds: 100 % utilisation at 480-650 W, the "
              "same synchronize stack on every sample, memory flat, no log line, for 3 min; the GPU was never read idle "
              "with power before it, so only the limit tells the level. Then ready.", gpus=1, poll_s=5.0, seed=93)
    sim.comm = {"python3": 2}
    h100_start_to_graph(sim, ranks_util=(20, 40), power=(150.0, 300.0))
    for helpers in (4, 3, 2, 1, 0):
        sim.run(sim.poll_s, cpu_pct=150, util=(30, 50), power_w=(200.0, 320.0), comm={"python3": 2 + helpers})
    frames = ["synchronize (torch/cuda/__init__.py)", "run_gemms (warmup.py)", "rank_main (scheduler.py)"]
    sim.run(180, cpu_pct=100, util=(99, 100), stacks=frames, stacks_every_s=30.0, power_w=(480.0, 650.0), progress=False)
    s_graph(sim, seconds=20, batches=4, mem_gain=100, power_w=(200.0, 300.0))
    s_http_ready(sim)
    sim.expect_ready()
    return sim


@scenario
def stall_spin_at_idle_power_of_the_limit():
    sim = Sim("stall_spin_at_idle_power_of_the_limit",
              "A collective that never completes in graph capture on an H100 (power.limit 700 W): 100 % utilisation at "
              "95-130 W (a spin-wait, under a fifth of the limit), memory flat, one core busy, no log line, no py-spy, "
              "for 31 min. The GPU was never read idle with power before, so the limit alone tells a spin from kernels.",
              gpus=1, poll_s=10.0, seed=94)
    sim.comm = {"python3": 2}
    sim.stacks_missing_reason = "py-spy not found"
    h100_start_to_graph(sim, ranks_util=(20, 40), power=(150.0, 300.0))
    graph_begin(sim)
    sim.run(10, cpu_pct=100, mem_to=sim.mem[0] + 300, util=(30, 40), power_w=(250.0, 350.0))
    sim.expect_stalled("cuda_graph")
    sim.run(31 * 60, cpu_pct=100, util=(100, 100), power_w=(95.0, 130.0), progress=False)
    return sim


def neighbour_busy(sim):
    """A neighbour on the board at work: its utilisation, power and memory move every poll."""
    sim.foreign_mem[0] = 20000 + sim.rng.choice((0, 1024, 2048, 3072))
    return sim.rng.randint(30, 70), sim.rng.uniform(150.0, 350.0)


@scenario
def stall_frozen_beside_a_busy_neighbour():
    sim = Sim("stall_frozen_beside_a_busy_neighbour",
              "One rank (the unit's only process) shares its GPU with another process that works throughout: the "
              "neighbour's memory moves by 1-3 GB, the board's utilisation reads 30-70 % and its power 250-450 W. In "
              "graph capture the rank hangs in a futex: its CPU time stops, its memory stays flat, the same stack on "
              "every sample, for 31 min. The board's totals are the neighbour's, not the start's.", gpus=1, poll_s=10.0, seed=95)
    sim.comm = {"python3": 1}
    sim.neighbour_pid = 7001
    sim.neighbour_load = neighbour_busy
    h100_start_to_graph(sim, power=(90.0, 110.0))
    graph_begin(sim)
    sim.run(10, cpu_pct=100, mem_to=sim.mem[0] + 300, util=(30, 40), power_w=(200.0, 300.0))
    sim.expect_stalled("cuda_graph")
    frames = ["futex_wait (threading.py)", "wait (threading.py)", "capture (cuda_graph_runner.py)", "rank_main (scheduler.py)"]
    sim.run(31 * 60, cpu_pct=0.3, util=(0, 1), power_w=(90.0, 110.0), stacks=frames, progress=False)
    return sim


@scenario
def healthy_load_beside_an_idle_neighbour():
    sim = Sim("healthy_load_beside_an_idle_neighbour",
              "A start on one GPU that another, idle process also holds (20 GB, 0 % utilisation): the start loads its "
              "weights, sizes its KV cache, captures its graphs and becomes ready. Memory as progress is the start's "
              "own holders'; the board's utilisation and power are not read as the start's.", gpus=1, poll_s=5.0, seed=96)
    sim.comm = {"python3": 1}
    sim.neighbour_pid = 7002
    sim.foreign_mem[0] = 20000
    sim.neighbour_load = lambda s: (0, 0.0)
    h100_start_to_graph(sim, power=(90.0, 110.0))
    s_graph(sim, seconds=40, batches=8, mem_gain=600, power_w=(200.0, 320.0))
    s_http_ready(sim)
    sim.expect_ready()
    return sim


# -------------------------------------------------------------------- a child that vanished, a peer that is late
def sglang_tree(sim, helpers=()):
    """The unit's processes as the probe's procs.tree names them: the launcher, a scheduler per
    rank (SGLang's process titles), the detokenizer, and `helpers` [(pid, name)]."""
    tree = [{"pid": sim.pid, "ppid": 1, "name": "python3"}]
    tree += [{"pid": 2000 + r, "ppid": sim.pid, "name": "sglang::scheduler_TP%d" % r} for r in range(sim.gpus)]
    tree.append({"pid": 2100, "ppid": sim.pid, "name": "sglang::detokenizer"})
    tree += [{"pid": pid, "ppid": 2000, "name": name} for pid, name in helpers]
    return tree


def tree_comm(tree):
    comm = {}
    for p in tree:
        name = p["name"][:15]
        comm[name] = comm.get(name, 0) + 1
    return comm


def rank_holders(sim, ranks=None):
    return [(2000 + r, r, sim.mem[r]) for r in (ranks if ranks is not None else range(sim.gpus))]


@scenario
def failed_scheduler_child_sigkilled_mid_capture():
    sim = Sim("failed_scheduler_child_sigkilled_mid_capture",
              "TP2: 5 s into CUDA graph capture the kernel's OOM killer SIGKILLs the scheduler of TP1 (no line from it, "
              "its GPU memory freed); the launcher keeps waiting and TP0 sits in the capture's all-reduce, its GPU idle: "
              "every process frozen. A rank leaving the unit's processes is a death.", gpus=2, poll_s=5.0, family="new", seed=91)
    sim.tree = sglang_tree(sim)
    sim.comm = tree_comm(sim.tree)
    sim.holders = []
    s_init(sim)
    s_init_end(sim)
    sim.holders = None
    s_load(sim, 40, 300e6, mem_to=30000)
    s_kv(sim)
    graph_begin(sim)
    sim.run(5.0, cpu_pct=200, mem_to=sim.mem[0] + 200, util=(30, 40))
    sim.holders = rank_holders(sim)
    sim.run(5.0, cpu_pct=200, util=(30, 40))
    kill_t = sim.t + 1.0
    sim.tree = [p for p in sim.tree if p["pid"] != 2001]
    sim.comm = tree_comm(sim.tree)
    sim.holders = rank_holders(sim, [0])
    sim.mem[1] = 0.0
    sim.expect_failed("cuda_graph", kill_t)
    sim.run(6 * 60, cpu_pct=3, util=(0, 0), per_poll=lambda s: setattr(s, "holders", rank_holders(s, [0])), progress=False)
    return sim


@scenario
def healthy_capture_benchmark_helper_exits_normally():
    sim = Sim("healthy_capture_benchmark_helper_exits_normally",
              "TP2 graph capture with a benchmark subprocess (an untitled python3 holding 900 MiB on GPU 0) and compile "
              "workers: the helper exits when done, the host compiles the winner for 25 s with the GPUs idle, and the "
              "capture goes on (bursts, memory, the bar): a process that leaves normally is not a death.", gpus=2, poll_s=5.0, family="new", seed=92)
    sim.tree = sglang_tree(sim)
    sim.comm = tree_comm(sim.tree)
    warm_start_to_graph(sim)
    graph_begin(sim)
    helper = [(2200, "python3"), (2201, "python3"), (2202, "python3")]
    sim.tree = sglang_tree(sim, helper)
    sim.comm = tree_comm(sim.tree)
    sim.holders = rank_holders(sim) + [(2200, 0, 900)]
    sim.run(40, cpu_pct=900, util=(30, 60), mem_to=sim.mem[0] + 600)
    sim.tree = sglang_tree(sim)
    sim.comm = tree_comm(sim.tree)
    sim.holders = None
    sim.run(25, cpu_pct=700, util=(0, 0))    # Inductor picks the winner and compiles it on the host
    sim.run(60, cpu_pct=800, util=(20, 45), mem_to=sim.mem[0] + 900)
    s_graph(sim, seconds=30)
    s_http_ready(sim)
    sim.expect_ready()
    return sim


def two_node_argv(node_rank, dist_timeout=None):
    argv = ["python3", "-m", "sglang.launch_server", "--model-path", "/models/Kimi-K2.6", "--tp-size", "2",
            "--nnodes", "2", "--node-rank", str(node_rank), "--dist-init-addr", "10.0.0.1:20000"]
    return argv + (["--dist-timeout", str(dist_timeout)] if dist_timeout else [])


def peers_reading(node_rank, state, dist_timeout=None):
    return {"nnodes": 2, "node_rank": node_rank, "dist_init_addr": "10.0.0.1:20000", "dist_timeout_s": dist_timeout,
            "nodes": [{"node": 0, "addr": "10.0.0.1:20000", "state": state}]}


def wait_at_rendezvous(sim, seconds, **kw):
    """The ranks in torch's rendezvous: a trickle of CPU, a CUDA context each, nothing else."""
    sim.run(seconds, cpu_pct=1.6, util=(0, 0), **kw)


@scenario
def healthy_late_peer_arrives_after_217s():
    sim = Sim("healthy_late_peer_arrives_after_217s",
              "Node 0 of a server over 2 nodes: its ranks wait at the rendezvous (its own store at 10.0.0.1:20000 open) "
              "for node 1, which starts 217 s late; then the start goes on and comes up. A rank waiting for another node "
              "is not a stall of this one.", gpus=1, poll_s=5.0, family="old", seed=93)
    sim.argv = two_node_argv(0)
    sim.peers = peers_reading(0, "open")
    s_args(sim)
    sim.log("Init torch distributed begin.", sim.all_ranks())
    sim.run(5, cpu_pct=300, mem_to=500)
    wait_at_rendezvous(sim, 215)
    s_init_end(sim)
    sim.peers = None
    s_load(sim, 40, 300e6, mem_to=30000)
    s_kv(sim)
    s_graph(sim, seconds=40)
    s_http_ready(sim)
    sim.expect_ready()
    return sim


@scenario
def failed_peer_never_comes_dist_timeout():
    sim = Sim("failed_peer_never_comes_dist_timeout",
              "Node 1 of a server over 2 nodes with --dist-timeout 600: node 0 never comes up, its address refuses; the "
              "ranks wait 600 s at the rendezvous, then torch gives up and they exit. The verdict names node 0 and "
              "pages, never a restart of this healthy node.", gpus=1, poll_s=5.0, family="old", seed=94)
    sim.argv = two_node_argv(1, 600)
    s_args(sim)
    sim.log("Init torch distributed begin.", sim.all_ranks())
    begin = sim.t
    sim.run(5, cpu_pct=300, mem_to=500)
    wait_at_rendezvous(sim, begin + 600 - sim.t)
    sim.expect_failed("distributed_init", sim.t)
    sim.log("torch.distributed.DistNetworkError: The client socket has timed out after 600000ms while trying to connect "
            "to (10.0.0.1, 20000).", sim.all_ranks(), dt=1)
    s_die(sim, dt=3)
    return sim


@scenario
def stall_single_node_rank_waits_at_rendezvous():
    sim = Sim("stall_single_node_rank_waits_at_rendezvous",
              "A server of one node (--nnodes 1): a rank hangs in torch's rendezvous, every process at a trickle of "
              "CPU: nothing else can come, a local stall.", gpus=2, poll_s=5.0, family="old", seed=95)
    sim.argv = ["python3", "-m", "sglang.launch_server", "--model-path", "/models/Kimi-K2.6", "--tp-size", "2", "--nnodes", "1"]
    s_args(sim)
    sim.log("Init torch distributed begin.", sim.all_ranks())
    sim.run(5, cpu_pct=300, mem_to=500)
    sim.expect_stalled("distributed_init")
    wait_at_rendezvous(sim, 8 * 60, progress=False)
    return sim


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare with the committed traces instead of writing")
    ap.add_argument("--out", default=HERE)
    args = ap.parse_args()
    differ = []
    for fn in SCENARIOS:
        sim = fn()
        text = sim.dumps()
        path = os.path.join(args.out, sim.name + ".jsonl")
        if args.check:
            try:
                with open(path) as f:
                    if f.read() != text:
                        differ.append(path)
            except OSError:
                differ.append(path)
        else:
            with open(path, "w") as f:
                f.write(text)
    if args.check and differ:
        print("out of date: %s" % ", ".join(differ))
        return 1
    print("%d traces %s" % (len(SCENARIOS), "checked" if args.check else "written to %s" % args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
