#!/usr/bin/env python3
"""Record sglang-trace/1 traces of a real GPU process with the project's own probe.

On a machine with an NVIDIA GPU (no systemd needed): writes safetensors shards to disk,
then for each scenario starts tests/gpu/shard_loader.py (a real process that reads the
shards and moves their tensors onto the GPU), probes it every --poll-s seconds with
plugins/module_utils/host/probe.py in PID mode, and writes the observations as a labelled
trace:

  healthy  load, post-load work, HTTP up, first completion answered   -> ready
  crash    SIGKILL half way through the weight load                   -> failed
  hang     SIGSTOP right after "Load weight end" (a true hang)        -> stalled

and, with tests/gpu/tp_server.py (one process per GPU, NCCL; needs --tp-size GPUs):

  autotune       every rank runs a GPU-bound kernel autotune for minutes,
                 then graph capture, HTTP up, completion answered        -> ready
  hung_allreduce during graph capture the last rank stops entering the
                 all-reduce while rank 0 waits inside it                 -> stalled
  compile        a cold torch.compile max-autotune before graph capture
                 (Inductor's autotuner, its workers and log records)      -> ready
  sparse         a tuning loop: short kernels, then a wait of 30-60 s in
                 one function (GPU idle on most polls, bursts between)    -> ready
  spin           during graph capture rank 0 waits on a kernel that never
                 ends (GPU pinned, host in synchronize)                   -> stalled
  init_hang      one rank never comes: the others wait in the rendezvous
                 of init_process_group                                    -> stalled
  capture        graph capture of GPU-bound forwards for --capture-s s,
                 constant stacks, no log line, then ready                 -> ready
  soft_oom       a caught OutOfMemoryError with its traceback, then
                 --cpu-phase-s s of CPU-only work, then ready             -> ready
  sticky         two ranks on one GPU: rank 0 hits a device-side assert
                 (out-of-bounds index) and waits, rank 1 waits for it in
                 an all-reduce                                           -> failed
  bind           the HTTP port is held by another socket: uvicorn's bind
                 error, then the processes idle in poll loops             -> failed
  long_sync      graph capture whose rank sits for minutes in one synchronize
                 behind queued matmuls (GPU flat out), then ready         -> ready
  workers        compile workers start and exit one after another, then
                 minutes of silent matmuls synchronised every few s       -> ready
  vanish         the rank is SIGKILLed 5 s into graph capture (as the OOM
                 killer does); the launcher waits on                      -> failed
  nodes_late     a start over 2 "nodes" (gloo, --dist-init-addr): node 1
                 comes --peer-delay-s late; node 0 waits in the rendezvous -> ready
  nodes_never    the same, node 1 never comes                             -> stalled
  shared         a start stopped (SIGSTOP) right after its load while
                 another process on the same GPU allocates, frees and runs
                 bursts of matmuls                                        -> stalled

This script plays the part systemd plays on a real host: it is the service's parent,
so it fills the observation's `unit` from what it knows as the parent (running, or
failed with the signal once reaped). Everything else comes from the probe, including
`missing` (what it could not read, and why). Every nvidia-smi call the probe makes is
timed; the answer times go into the trace header (`recorded.nvidia_smi_s`).

Also saves raw nvidia-smi output (both query forms and the table, idle and loaded) for
the parser tests. Usage:
  python3 tests/gpu/record_real_traces.py --out DIR [--work /tmp/x] [--budget-s 540]
      [--scenarios healthy,crash,hang,autotune,hung_allreduce]
"""
import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tarfile
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def import_probe(tmp):
    """The collection's code by its absolute name, without Ansible installed."""
    root = os.path.join(tmp, "collections")
    link = os.path.join(root, "ansible_collections", "sglang_ops", "serving")
    if not os.path.exists(link):
        os.makedirs(os.path.dirname(link), exist_ok=True)
        os.symlink(REPO, link)
    sys.path.insert(0, root)
    from ansible_collections.sglang_ops.serving.plugins.module_utils.host import nvidia_smi, probe
    nvidia_smi.bounded_run = timed(nvidia_smi.bounded_run)
    return probe, nvidia_smi


SMI_CALLS = []  # (form, seconds, rc, timed_out) of every nvidia-smi call, in order


def timed(run):
    """The probe's own nvidia-smi calls, each with its answer time noted."""
    def wrapper(argv, timeout_s, env=None):
        t0 = time.monotonic()
        res = run(argv, timeout_s, env=env)
        form = next((a.split("=")[0].lstrip("-") for a in argv[1:] if a.startswith("--query")), "table")
        SMI_CALLS.append((form, round(time.monotonic() - t0, 3), res.rc, res.timed_out))
        return res
    return wrapper


def write_shards(shard_dir, n_shards, shard_mib):
    import torch
    from safetensors.torch import save_file
    os.makedirs(shard_dir, exist_ok=True)
    rows = shard_mib * 2**20 // 2 // 4096 // 4  # four bf16 tensors of 4096 columns per shard
    for i in range(n_shards):
        path = os.path.join(shard_dir, "model-%05d-of-%05d.safetensors" % (i + 1, n_shards))
        if os.path.exists(path):
            continue
        # Random numbers made on the GPU: the CPU takes minutes for 8 GiB of them.
        dev = "cuda" if torch.cuda.is_available() else "cpu"
        tensors = {"layers.%d.w%d" % (i, j): torch.randn(rows, 4096, dtype=torch.bfloat16, device=dev).cpu()
                   for j in range(4)}
        save_file(tensors, path)
    for name in os.listdir(shard_dir):
        evict(os.path.join(shard_dir, name))


def evict(path):
    """Drop a file from the page cache so the next read really goes to storage."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def capture_nvidia_smi(nvidia_smi_mod, dest, tag):
    exe = nvidia_smi_mod.find_executable("nvidia-smi", nvidia_smi_mod.EXTRA_DIRS)
    forms = {"query-gpu": nvidia_smi_mod.GPU_QUERY, "query-apps": nvidia_smi_mod.APPS_QUERY,
             "table": [], "query-apps-name": ["--query-compute-apps=pid,process_name,gpu_uuid,used_memory",
                                              "--format=csv"]}
    for name, args in forms.items():
        p = subprocess.run([exe] + args, capture_output=True, text=True, timeout=20)
        with open(os.path.join(dest, "nvidia-smi-%s-%s.txt" % (name, tag)), "w") as f:
            f.write(p.stdout)
            if p.returncode or p.stderr:
                f.write("\n# rc=%s stderr=%s\n" % (p.returncode, p.stderr))


def shard_loader_argv(args, port):
    return [os.path.join(REPO, "tests/gpu/shard_loader.py"), "--model-path", args.shards, "--port", str(port),
            "--tp-rank", "0", "--repack-s", str(args.repack_s), "--post-load-s", str(args.post_load_s)]


def tp_server_argv(args, port, scenario, extra=()):
    return [os.path.join(REPO, "tests/gpu/tp_server.py"), "--scenario", scenario, "--port", str(port),
            "--tp-size", str(args.tp_size), "--tune-s", str(args.tune_s)] + list(extra)


class Recorder:
    header_extra = {}   # more header keys (argv of the watched process)
    start_hook = None   # called once the process has started (a peer's timer)

    def __init__(self, probe_mod, args, name, description, port, argv=None, unit="shard-loader (pid mode)", gpus=1):
        self.probe_mod, self.args, self.name, self.port = probe_mod, args, name, port
        self.description, self.unit, self.gpus = description, unit, gpus
        self.argv = argv or shard_loader_argv(args, port)
        self.log_path = os.path.join(args.work, "%s.stderr.log" % name)
        self.trace_path = os.path.join(args.out, "%s.jsonl" % name)
        self.costs = []
        self.missing = []
        self.smi = []  # per poll: [t, seconds of each nvidia-smi call the probe made]

    def start(self):
        self.log = open(self.log_path, "wb")
        # Its own process group, so the ranks it starts go down with it at the end.
        self.proc = subprocess.Popen([sys.executable] + self.argv, stdout=self.log, stderr=subprocess.STDOUT,
                                     env=dict(os.environ, PYTHONUNBUFFERED="1"), start_new_session=True)
        self.t0 = time.time()
        if self.start_hook is not None:
            self.start_hook()
        self.cursor = None
        self.observations = []
        self.n = 0
        self.exit_info = None

    def unit_view(self):
        rc = self.proc.poll()
        if rc is None:
            return {"active": "active", "sub": "running", "main_pid": self.proc.pid, "restarts": 0}
        # As systemd reports a main process that died: Result=signal or exit-code.
        return {"active": "failed", "sub": "failed", "main_pid": None, "restarts": 0,
                "exec_main_status": -rc if rc < 0 else rc, "result": "signal" if rc < 0 else "exit-code"}

    def poll_once(self):
        self.n += 1
        stacks = self.args.stacks_every > 0 and self.n % self.args.stacks_every == 0
        req = self.probe_mod.ProbeRequest(
            pid=self.proc.pid, cursor=self.cursor, log_file=self.log_path,
            base_url="http://127.0.0.1:%d" % self.port, model="shard-loader", stacks=stacks,
            venv_bin=self.args.pyspy_bin, gpu_timeout_s=5.0, http_timeout_s=2.0)
        unit = self.unit_view()
        calls_before = len(SMI_CALLS)
        res = self.probe_mod.probe(req)
        self.cursor = res["cursor"]
        obs = res["observation"]
        t = round(obs.pop("ts") - self.t0, 2)
        for rec in obs.get("log", []):
            rec["t"] = round(rec.pop("ts") - self.t0, 2)
        out = {"t": t, "unit": unit}
        out.update(obs)
        # The pid-mode note is this recorder's doing (it fills `unit` itself), not a gap.
        missing = {k: v for k, v in res["missing"].items() if k != "unit"}
        if missing:
            out["missing"] = missing
        self.missing.append(missing)
        self.smi.append([t] + [c[1] for c in SMI_CALLS[calls_before:]])
        self.observations.append(out)
        self.costs.append(res["cost"])
        return out

    def log_text(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", errors="replace")

    def write(self, expect, extra):
        header = {"format": "sglang-trace/1", "name": self.name, "unit": self.unit,
                  "poll_s": self.args.poll_s, "gpus": self.gpus, "description": self.description,
                  "expect": expect, "recorded": dict(extra, nvidia_smi_s=smi_summary(self.smi))}
        header.update(self.header_extra)
        with open(self.trace_path, "w") as f:
            f.write(json.dumps(header) + "\n")
            for o in self.observations:
                f.write(json.dumps(o) + "\n")

    def stop(self):
        for sig in (signal.SIGCONT, signal.SIGKILL):
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                pass
        self.proc.wait()
        self.log.close()

    def sleep_to_next(self, started):
        time.sleep(max(0.0, self.args.poll_s - (time.time() - started)))


def card_of_board():
    """'h100', 'h200' (from nvidia-smi's product name), else 'gpu'."""
    try:
        name = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True,
                              text=True, timeout=20).stdout
    except OSError:
        return "gpu"
    return next((c for c in ("h100", "h200") if c in name.lower()), "gpu")


def machine(args):
    card = "real_" + (args.card or "h200")
    return card if args.tp_size == 1 else "%sx%d" % (card, args.tp_size)


def smi_summary(per_poll):
    """Answer times of the probe's nvidia-smi calls: each poll's [t, s, s], and their spread."""
    times = [s for row in per_poll for s in row[1:]]
    if not times:
        return {"calls": 0}
    return {"calls": len(times), "median": round(statistics.median(times), 3), "max": round(max(times), 3),
            "per_poll": per_poll}


def smi_while_hung(nvidia_smi_mod, rec):
    """Once the straggler has stopped: the plain table and, every 6th poll, `nvidia-smi -q`
    (the forms an operator runs by hand), each with its answer time."""
    exe = nvidia_smi_mod.find_executable("nvidia-smi", nvidia_smi_mod.EXTRA_DIRS)
    forms = [("table", [exe])] + ([("q", [exe, "-q"])] if len(rec.hang_smi) % 6 == 0 else [])
    row = {"t": rec.observations[-1]["t"]}
    for name, argv in forms:
        t0 = time.monotonic()
        res = nvidia_smi_mod.bounded_run(argv, 30.0)
        row[name] = {"s": round(time.monotonic() - t0, 3), "rc": res.rc, "timed_out": res.timed_out}
    rec.hang_smi.append(row)


def smi_timeout_path(nvidia_smi_mod):
    """read_gpus as the probe calls it while the collective hangs, and once with a limit
    no real nvidia-smi meets, to show what its timeout path reports."""
    out = {}
    for label, limit in (("probe_limit_5s", 5.0), ("forced_limit_1ms", 0.001)):
        t0 = time.monotonic()
        snap = nvidia_smi_mod.read_gpus(timeout_s=limit)
        out[label] = {"s": round(time.monotonic() - t0, 3), "missing": snap.missing or {},
                      "gpus_read": snap.gpus is not None}
    return out


def run_scenario(rec, until, after_s, action=None, deadline=None, each_poll=None):
    """Poll until `until(rec, obs)` is true (or the process event `action` fires),
    then keep polling after_s more seconds (or until `deadline`); `each_poll(rec)` runs
    after every poll from then on."""
    rec.start()
    event_t = None
    stop_at = None
    dead_polls = 0
    while True:
        started = time.time()
        obs = rec.poll_once()
        print("%s t=%6.1f procs=%s cpu_s=%s gpu=%s util=%s http=%s log=%d stacks=%s" % (
            rec.name, obs["t"], (obs.get("procs") or {}).get("count"), (obs.get("procs") or {}).get("cpu_s"),
            [g.get("mem_used_mib") for g in obs.get("gpus", [])], [g.get("util_pct") for g in obs.get("gpus", [])],
            obs.get("http"), len(obs.get("log", [])),
            [s["frames"][:3] for s in obs.get("stacks", [])] or obs.get("missing", {}).get("stacks", "")), flush=True)
        if event_t is None and until(rec, obs):
            event_t = time.time()
            if action is not None:
                action(rec)
            stop_at = time.time() + after_s
            if deadline is not None:
                stop_at = min(stop_at, deadline) if after_s else deadline
        if event_t is not None and each_poll is not None:
            each_poll(rec)
        if stop_at is not None and time.time() >= stop_at:
            break
        if deadline is not None and time.time() >= deadline:
            break
        if event_t is None and rec.proc.poll() is not None:
            dead_polls += 1
            if dead_polls > 2:  # it died before the event: a few polls of the aftermath are enough
                break
        rec.sleep_to_next(started)
    return event_t


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--work", default="/tmp/sglang-ops-gpu")
    ap.add_argument("--shards", default=None)
    ap.add_argument("--n-shards", type=int, default=16)
    ap.add_argument("--shard-mib", type=int, default=512)
    ap.add_argument("--poll-s", type=float, default=3.0)
    ap.add_argument("--repack-s", type=float, default=1.5)
    ap.add_argument("--post-load-s", type=float, default=8.0)
    ap.add_argument("--stacks-every", type=int, default=5)
    ap.add_argument("--pyspy-bin", default=None)
    ap.add_argument("--budget-s", type=float, default=540.0, help="stop the hang trace by then")
    ap.add_argument("--scenarios", default="healthy,crash,hang")
    ap.add_argument("--tp-size", type=int, default=2, help="GPUs (rank processes) of autotune, hung_allreduce")
    ap.add_argument("--tune-s", type=float, default=240.0, help="autotune: minutes of GPU-bound tuning, in seconds")
    ap.add_argument("--hang-record-s", type=float, default=360.0, help="hung_allreduce: seconds recorded after the hang")
    ap.add_argument("--compile-s", type=float, default=240.0, help="compile: seconds of max-autotune compiling")
    ap.add_argument("--tp-extra", default="", help="more tp_server.py options, space-separated")
    ap.add_argument("--autotune-name", default=None, help="autotune: trace name (default MACHINE_healthy_autotune_constant_stacks)")
    ap.add_argument("--tune-words", default="", help="autotune: what the candidates were, for the description")
    ap.add_argument("--capture-s", type=float, default=120.0, help="capture: seconds of GPU-bound graph capture")
    ap.add_argument("--cpu-phase-s", type=float, default=240.0, help="soft_oom: seconds of CPU work after the OOM")
    ap.add_argument("--fail-record-s", type=float, default=180.0, help="sticky, bind: seconds recorded after the error")
    ap.add_argument("--spin-name", default="real_h200_stall_kernel_never_ends", help="spin: trace name")
    ap.add_argument("--port", type=int, default=30001, help="the first scenario's HTTP port")
    ap.add_argument("--write-shards-only", action="store_true")
    ap.add_argument("--card", default=None, help="trace names' card (h100, h200); default: read from nvidia-smi")
    ap.add_argument("--sync-s", type=float, default=125.0, help="long_sync: seconds in the one synchronize")
    ap.add_argument("--gemm-s", type=float, default=150.0, help="workers: seconds of silent matmuls")
    ap.add_argument("--peer-delay-s", type=float, default=217.0, help="nodes_late: seconds until node 1 starts")
    ap.add_argument("--dist-port-base", type=int, default=29560, help="the rendezvous ports of these scenarios")
    ap.add_argument("--after-s", type=float, default=180.0, help="vanish, nodes_never, shared: seconds recorded after")
    a = ap.parse_args()
    t_begin = time.time()
    a.shards = a.shards or os.path.join(a.work, "shards")
    os.makedirs(a.out, exist_ok=True)
    os.makedirs(a.work, exist_ok=True)
    probe_mod, nvidia_smi_mod = import_probe(a.work)
    a.card = a.card or card_of_board()
    cap_dir = os.path.join(a.work, "captures")
    os.makedirs(cap_dir, exist_ok=True)
    if not a.write_shards_only:
        capture_nvidia_smi(nvidia_smi_mod, cap_dir, "idle")
    if a.write_shards_only:
        write_shards(a.shards, a.n_shards, a.shard_mib)
        return
    summary = {}
    scenarios = a.scenarios.split(",")
    port = a.port
    if set(scenarios) & {"healthy", "crash", "hang"}:
        # In a child process: its CUDA context must be gone before the GPUs are watched.
        subprocess.run([sys.executable, os.path.abspath(__file__), "--write-shards-only", "--out", a.out,
                        "--work", a.work, "--shards", a.shards, "--n-shards", str(a.n_shards),
                        "--shard-mib", str(a.shard_mib)], check=True)
        print("shards written in %.1f s" % (time.time() - t_begin), flush=True)

    def fresh():
        for name in os.listdir(a.shards):
            evict(os.path.join(a.shards, name))

    def saw(text):
        return lambda rec, obs: text in rec.log_text()

    if "healthy" in scenarios:
        fresh()
        rec = Recorder(probe_mod, a, "real_h200_healthy_load",
                       "Real H200: %d x %d MiB safetensors shards read from disk (page cache dropped) and copied to the GPU "
                       "with per-shard GPU work, post-load work, KV cache, graph-capture-like kernels, then HTTP up; "
                       "ends once a one-token completion is answered." % (a.n_shards, a.shard_mib), port)

        def ready(rec, obs):
            c = (obs.get("http") or {}).get("completion")
            if isinstance(c, dict) and c.get("ok"):
                capture_nvidia_smi(nvidia_smi_mod, cap_dir, "loaded")
                return True
            return False
        run_scenario(rec, ready, after_s=a.poll_s, deadline=t_begin + a.budget_s)
        rec.write({"outcome": "ready", "phase": "ready"}, {})
        rec.stop()
        summary[rec.name] = {"polls": rec.n, "costs": rec.costs, "missing": rec.missing}
        port += 1

    if "crash" in scenarios:
        fresh()
        rec = Recorder(probe_mod, a, "real_h200_crash_sigkill_mid_load",
                       "Real H200: the loader is killed with SIGKILL half way through the shard load "
                       "(a crash with no last words in the log); the parent sees it die.", port)
        half = "| %d/%d" % (a.n_shards // 2, a.n_shards)
        kill = lambda r: r.proc.send_signal(signal.SIGKILL)
        ev = run_scenario(rec, saw(half), after_s=4 * a.poll_s, action=kill, deadline=t_begin + a.budget_s)
        onset = round(ev - rec.t0, 2) if ev else None
        rec.write({"outcome": "failed", "onset_t": onset, "phase": "weight_load"}, {"kill_t": onset})
        rec.stop()
        summary[rec.name] = {"polls": rec.n, "costs": rec.costs, "missing": rec.missing, "onset_t": onset}
        port += 1

    if "hang" in scenarios:
        fresh()
        rec = Recorder(probe_mod, a, "real_h200_hang_sigstop_after_load",
                       "Real H200: all shards load, then the process is stopped with SIGSTOP right after "
                       "'Load weight end' (a true hang: no CPU, no I/O, GPU memory held, GPU idle, no log, "
                       "port never opens).", port)
        stop = lambda r: r.proc.send_signal(signal.SIGSTOP)
        ev = run_scenario(rec, saw("Load weight end"), after_s=0, action=stop, deadline=t_begin + a.budget_s)
        onset = round(ev - rec.t0, 2) if ev else None
        rec.write({"outcome": "stalled", "onset_t": onset, "phase": "post_load"}, {"sigstop_t": onset})
        rec.stop()
        summary[rec.name] = {"polls": rec.n, "costs": rec.costs, "missing": rec.missing, "onset_t": onset}

    if "autotune" in scenarios:
        rec = Recorder(probe_mod, a, a.autotune_name or "%s_healthy_autotune_constant_stacks" % machine(a),
                       "Real H200 x%d, one rank process per GPU (NCCL): dummy weights, KV cache, then %.0f s of GPU-bound "
                       "kernel autotuning on every rank (matmul candidates%s replayed as CUDA graphs, timed with CUDA "
                       "events, a synchronize after each; no log lines while it tunes), then graph capture with "
                       "all-reduces, HTTP up; ends once a one-token completion is answered."
                       % (a.tp_size, a.tune_s, a.tune_words),
                       port, argv=tp_server_argv(a, port, "tune", ["--dist-port", "29511"] + a.tp_extra.split()),
                       unit="tp-server (pid mode)", gpus=a.tp_size)

        def answered(rec, obs):
            c = (obs.get("http") or {}).get("completion")
            return isinstance(c, dict) and bool(c.get("ok"))
        run_scenario(rec, answered, after_s=a.poll_s, deadline=t_begin + a.budget_s)
        tuned = [r for r in rec.log_text().splitlines() if "Autotuning" in r]
        rec.write({"outcome": "ready", "phase": "ready"}, {"tune_s": a.tune_s, "tune_lines": tuned})
        rec.stop()
        summary[rec.name] = {"polls": rec.n, "costs": rec.costs, "missing": rec.missing, "smi": rec.smi}
        port += 1

    def answered(rec, obs):
        c = (obs.get("http") or {}).get("completion")
        return isinstance(c, dict) and bool(c.get("ok"))

    def record_until_ready(rec, recorded):
        """A healthy start, polled until its first completion is answered, written as ready."""
        run_scenario(rec, answered, after_s=a.poll_s, deadline=t_begin + a.budget_s)
        rec.write({"outcome": "ready", "phase": "ready"}, recorded)
        rec.stop()
        summary[rec.name] = {"polls": rec.n, "costs": rec.costs, "missing": rec.missing, "smi": rec.smi}

    if "compile" in scenarios:
        cache = os.path.join(a.work, "compile-cache")
        subprocess.run(["rm", "-rf", cache])
        os.environ.update(TORCHINDUCTOR_CACHE_DIR=os.path.join(cache, "inductor"), TRITON_CACHE_DIR=os.path.join(cache, "triton"))
        rec = Recorder(probe_mod, a, "%s_healthy_inductor_max_autotune_cold" % machine(a),
                       "Real H200 x%d, one rank process per GPU: dummy weights, KV cache, then graph capture preceded by "
                       "a cold torch.compile(mode='max-autotune-no-cudagraphs') of matmul blocks of several shapes and "
                       "dtypes (empty Inductor and Triton caches) for about %.0f s: Inductor's autotuner benchmarks "
                       "Triton configs compiled in its worker processes and logs what it rejects; then capture, HTTP "
                       "up; ends once a one-token completion is answered." % (a.tp_size, a.compile_s),
                       port, argv=tp_server_argv(a, port, "compile", ["--dist-port", "29513", "--compile-s", str(a.compile_s)]
                                                 + a.tp_extra.split()),
                       unit="tp-server (pid mode)", gpus=a.tp_size)
        record_until_ready(rec, {"compile_s": a.compile_s})
        port += 1

    if "sparse" in scenarios:
        rec = Recorder(probe_mod, a, "%s_healthy_sparse_tuning_bursts" % machine(a),
                       "Real H200 x%d, one rank process per GPU: dummy weights, KV cache, then %.0f s of a tuning loop "
                       "that times short matmul kernels with a synchronize for up to 2 s and then waits 30-60 s in "
                       "one function before the next config (constant stacks, GPU idle on most polls with bursts "
                       "between, host CPU low but rising, no log lines), then graph capture, HTTP up; ends once a "
                       "one-token completion is answered." % (a.tp_size, a.tune_s),
                       port, argv=tp_server_argv(a, port, "sparse", ["--dist-port", "29514"] + a.tp_extra.split()),
                       unit="tp-server (pid mode)", gpus=a.tp_size)
        record_until_ready(rec, {"tune_s": a.tune_s})
        port += 1

    if "capture" in scenarios:
        rec = Recorder(probe_mod, a, "%s_healthy_capture_gpu_bound" % machine(a),
                       "Real H200 x%d, one rank: dummy weights, KV cache, then %.0f s of graph capture running GPU-bound "
                       "TP forwards (matmul + all-reduce + synchronize) per batch size: the bar moves by \\r frames only "
                       "(no log record), every stack sample in synchronize; then HTTP up; ends once a one-token "
                       "completion is answered." % (a.tp_size, a.capture_s),
                       port, argv=tp_server_argv(a, port, "capture", ["--dist-port", "29517", "--capture-s", str(a.capture_s)]
                                                 + a.tp_extra.split()),
                       unit="tp-server (pid mode)", gpus=a.tp_size)
        record_until_ready(rec, {"capture_s": a.capture_s})
        port += 1

    if "soft_oom" in scenarios:
        rec = Recorder(probe_mod, a, "%s_healthy_soft_oom_then_cpu_phase" % machine(a),
                       "Real H200 x%d, one rank: dummy weights, KV cache, then a memory probe asks for 1.5 times the "
                       "GPU's memory: a real torch.OutOfMemoryError, caught, logged with its traceback; then %.0f s of "
                       "pure-Python CPU work on one core (no GPU work, no log line), graph capture, HTTP up; ends once a "
                       "one-token completion is answered." % (a.tp_size, a.cpu_phase_s),
                       port, argv=tp_server_argv(a, port, "soft_oom", ["--dist-port", "29518", "--cpu-phase-s", str(a.cpu_phase_s)]
                                                 + a.tp_extra.split()),
                       unit="tp-server (pid mode)", gpus=a.tp_size)
        record_until_ready(rec, {"cpu_phase_s": a.cpu_phase_s})
        port += 1

    fails = {"sticky": ("%s_failed_device_assert_peer_waits" % machine(a), "cuda_graph", "29519",
                        ["--tp-size", "2", "--backend", "gloo", "--capture-iters", "20"],
                        "Real H200, a TP start of 2 ranks sharing the one GPU (gloo collectives): in graph capture, at "
                        "the 4th batch size, rank 0 gathers rows with an out-of-bounds index on the GPU (a real "
                        "device-side assert in the index kernel, sticky for its CUDA context), logs 'Scheduler hit an "
                        "exception' with the traceback and waits for a result that never comes; rank 1 waits for rank 0 "
                        "in the next all-reduce. Nobody exits. Recorded for %.0f s after the error."),
             "bind": ("%s_failed_port_in_use_ranks_idle" % machine(a), "http_server", "29520", ["--idle-procs", "3"],
                      "Real H200, one rank and 3 helper processes: dummy weights, KV cache, graph capture, then the HTTP "
                      "server cannot bind its port, which another socket holds (bound, not listening): uvicorn's "
                      "'ERROR: [Errno 98] error while attempting to bind on address' line from asyncio's own message; "
                      "then the rank and the helpers sit in poll loops (a CPU floor), nobody exits. Recorded for %.0f s "
                      "after the error.")}
    for scenario in [s for s in scenarios if s in fails]:
        name, phase, dist_port, extra, words = fails[scenario]
        mark = os.path.join(a.work, "%s.mark" % scenario)
        if os.path.exists(mark):
            os.unlink(mark)
        holder = None
        if scenario == "bind":
            import socket
            holder = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            holder.bind(("127.0.0.1", port))   # held, not listening: the probe's HTTP checks are refused
        rec = Recorder(probe_mod, a, name, words % a.fail_record_s, port,
                       argv=tp_server_argv(a, port, scenario, ["--dist-port", dist_port, "--hang-mark", mark] + extra
                                           + a.tp_extra.split()),
                       unit="tp-server (pid mode)", gpus=1)
        ev = run_scenario(rec, lambda r, obs, m=mark: os.path.exists(m), after_s=a.fail_record_s,
                          deadline=t_begin + a.budget_s)
        onset = None
        if ev:
            with open(mark) as f:
                onset = round(float(f.read().strip()) - rec.t0, 2)
        rec.write({"outcome": "failed", "onset_t": onset, "phase": phase}, {"error_t": onset})
        rec.stop()
        if holder is not None:
            holder.close()
        summary[rec.name] = {"polls": rec.n, "costs": rec.costs, "missing": rec.missing, "onset_t": onset, "smi": rec.smi}
        port += 1

    hangs = {"spin": (a.spin_name, "cuda_graph", "29515",
                      "Real H200 x%d, one rank process per GPU: dummy weights, KV cache, graph capture; at the 4th batch size "
                      "rank 0 launches a kernel that does not end in time (torch.cuda._sleep for 4e12 cycles: the GPU spins) "
                      "and waits for it in a synchronize. Recorded for %.0f s after that."),
             "init_hang": ("real_h200_stall_rank_never_joins", "distributed_init", "29516",
                           "Real H200, a TP start of %d ranks of which the last never starts (its host down): rank 0 logs "
                           "'Init torch distributed begin.' and waits in init_process_group's rendezvous (timeout 2 h). "
                           "Recorded for %.0f s after that.")}
    for scenario in [s for s in scenarios if s in hangs]:
        name, phase, dist_port, words = hangs[scenario]
        mark = os.path.join(a.work, "%s.mark" % scenario)
        if os.path.exists(mark):
            os.unlink(mark)
        world = a.tp_size + 1 if scenario == "init_hang" else a.tp_size
        rec = Recorder(probe_mod, a, name, words % (world, a.hang_record_s), port,
                       argv=tp_server_argv(a, port, scenario, ["--dist-port", dist_port, "--hang-mark", mark,
                                                               "--tp-size", str(world)] + a.tp_extra.split()),
                       unit="tp-server (pid mode)", gpus=a.tp_size)
        ev = run_scenario(rec, lambda r, obs, m=mark: os.path.exists(m), after_s=a.hang_record_s, deadline=t_begin + a.budget_s)
        onset = None
        if ev:
            with open(mark) as f:
                onset = round(float(f.read().strip()) - rec.t0, 2)
        rec.write({"outcome": "stalled", "onset_t": onset, "phase": phase}, {"hang_t": onset})
        rec.stop()
        summary[rec.name] = {"polls": rec.n, "costs": rec.costs, "missing": rec.missing, "onset_t": onset, "smi": rec.smi}
        port += 1

    if "hung_allreduce" in scenarios:
        mark = os.path.join(a.work, "hung_allreduce.mark")
        if os.path.exists(mark):
            os.unlink(mark)
        rec = Recorder(probe_mod, a, "%s_hung_allreduce" % machine(a),
                       "Real H200 x%d, one rank process per GPU (NCCL, collective timeout 2 h): dummy weights, an "
                       "all-reduce of free memory, KV cache, then graph capture running TP forwards (matmul + "
                       "all-reduce) per batch size; at the 4th batch size the last rank blocks on an event that is "
                       "never set and stops entering the collective, while rank 0 waits inside the all-reduce. "
                       "Recorded for %.0f s after that, no abort." % (a.tp_size, a.hang_record_s),
                       port, argv=tp_server_argv(a, port, "hang", ["--dist-port", "29512", "--hang-mark", mark]
                                                 + a.tp_extra.split()),
                       unit="tp-server (pid mode)", gpus=a.tp_size)
        rec.hang_smi = []
        ev = run_scenario(rec, lambda r, obs: os.path.exists(mark), after_s=a.hang_record_s,
                          deadline=t_begin + a.budget_s, each_poll=lambda r: smi_while_hung(nvidia_smi_mod, r))
        onset = None
        if ev:
            with open(mark) as f:
                onset = round(float(f.read().strip()) - rec.t0, 2)
        checks = smi_timeout_path(nvidia_smi_mod)
        rec.write({"outcome": "stalled", "onset_t": onset, "phase": "cuda_graph"},
                  {"straggler_blocked_t": onset, "nvidia_smi_while_hung": rec.hang_smi, "read_gpus_checks": checks})
        rec.stop()
        summary[rec.name] = {"polls": rec.n, "costs": rec.costs, "missing": rec.missing, "onset_t": onset,
                             "smi": rec.smi, "hang_smi": rec.hang_smi, "read_gpus_checks": checks}
        port += 1

    port = record_round_five(a, probe_mod, scenarios, summary, port, t_begin)
    capture_nvidia_smi(nvidia_smi_mod, cap_dir, "after")
    with tarfile.open(os.path.join(a.out, "captures.tar.gz"), "w:gz") as tf:
        tf.add(cap_dir, arcname="captures")
        for name in os.listdir(a.work):
            if name.endswith(".stderr.log"):
                tf.add(os.path.join(a.work, name), arcname="captures/" + name)
    with open(os.path.join(a.out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print("done in %.1f s" % (time.time() - t_begin), flush=True)


def until_ready(rec, obs):
    c = (obs.get("http") or {}).get("completion")
    return isinstance(c, dict) and bool(c.get("ok"))


def start_side_process(argv, log_path):
    """A process beside the start, in its own session (not in the watched tree)."""
    return subprocess.Popen([sys.executable] + argv, stdout=open(log_path, "wb"), stderr=subprocess.STDOUT,
                            env=dict(os.environ, PYTHONUNBUFFERED="1"), start_new_session=True)


def end_side_process(proc):
    if proc is None:
        return
    try:
        os.killpg(proc.pid, signal.SIGCONT)
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    proc.wait()


def read_fields(path):
    try:
        with open(path) as f:
            return f.read().split()
    except OSError:
        return None


ROUND_FIVE = {
    # scenario: (name suffix, tp_server scenario, outcome, phase, fault helper action, words)
    "long_sync": ("healthy_capture_one_long_sync", "long_sync", "ready", "ready", None,
                  "Real %(card)s, one rank: dummy weights, KV cache, then graph capture whose forwards are queued as "
                  "replays of one CUDA graph of 500 bf16 8192x8192 matmuls, about %(sync_s).0f s of work behind one "
                  "torch.cuda.synchronize(): the rank sits in that one call (the same stack on every sample), the "
                  "GPU flat out, no log line; then HTTP up; ends once a one-token completion is answered."),
    "workers": ("healthy_workers_then_silent_gemms", "workers", "ready", "ready", None,
                "Real %(card)s, one rank: dummy weights, KV cache, 'Capture cuda graph begin', then 8 short-lived "
                "helper processes (compile workers: 4-8 s of CPU work each, exit 0) start 3 s apart and exit one "
                "after another; then %(gemm_s).0f s of silent bf16 6144x6144 matmuls (CUDA graph replays) with a "
                "synchronize every 3 s, no log line; then capture, HTTP up; ends once a one-token completion is answered."),
    "vanish": ("failed_rank_killed_launcher_waits", "vanish", "failed", "cuda_graph", "kill",
               "Real %(card)s, a launcher and one rank process: dummy weights, KV cache, 'Capture cuda graph begin'; "
               "5 s into graph capture the rank is killed with SIGKILL from outside (as the kernel's OOM killer "
               "does: no last words in the log); its GPU memory is freed; the launcher reaps it without a word and "
               "waits on, as SGLang's launcher does. Recorded for %(after_s).0f s after the kill."),
    "nodes_late": ("healthy_peer_node_late", "nodes", "ready", "ready", None,
                   "Real %(card)s, a start over 2 nodes played by two launchers on one host (--nnodes 2, gloo, "
                   "--dist-init-addr 127.0.0.1:%(dist_port)s; both ranks on the one GPU); this trace watches node 0 "
                   "(its command line in `argv`). Node 0's rank logs 'Init torch distributed begin.' and waits in the "
                   "rendezvous (its TCPStore) for node 1, which starts %(peer_delay_s).0f s after node 0; then 'Init "
                   "torch distributed ends.', load, capture, HTTP up; ends once a one-token completion is answered."),
    "nodes_never": ("stall_peer_node_never_comes", "nodes", "stalled", "distributed_init", None,
                    "Real %(card)s, the same 2-node start (--nnodes 2 --node-rank 0 --dist-init-addr "
                    "127.0.0.1:%(dist_port)s, gloo; command line in `argv`) whose node 1 never comes: node 0's rank "
                    "logs 'Init torch distributed begin.' and waits in the rendezvous (timeout 2 h). Recorded for "
                    "%(after_s).0f s after that. Restarting node 0 cannot bring node 1: a watcher should page "
                    "'waiting for node 1 at 127.0.0.1:%(dist_port)s', not restart it; the label's onset is the "
                    "start of the wait."),
    "shared": ("stall_frozen_beside_busy_neighbour", "frozen", "stalled", "post_load", "stop",
               "Real %(card)s shared with another process outside the start's tree (tests/gpu/gpu_neighbour.py, "
               "pid %(neighbour_pid)s, running before the start: in a loop it allocates 2-12 GiB, runs 3-8 s of bf16 "
               "matmuls, frees and rests 5-15 s). The start (launcher and one rank) loads dummy weights and is "
               "stopped with SIGSTOP right after 'Load weight end' (frozen: no CPU, memory held, no log, port never "
               "opens). The board's memory, utilisation and power move with the neighbour; gpu_procs lists both. "
               "Recorded for %(after_s).0f s after the stop."),
}


def round_five_argv(a, scenario, port, mark, dist_port, node_rank=0):
    extra = ["--dist-port", str(dist_port), "--hang-mark", mark, "--n-shards", "4", "--kv-cache-gib", "4"]
    if scenario == "long_sync":
        extra += ["--sync-s", str(a.sync_s), "--capture-iters", "5"]
    elif scenario == "workers":
        extra += ["--gemm-s", str(a.gemm_s), "--capture-iters", "5"]
    elif scenario == "vanish":
        extra += ["--launcher-waits", "--capture-s", "120"]
    elif scenario == "frozen":
        extra += ["--capture-s", "60"]
    elif scenario == "nodes":
        extra = ["--hang-mark", mark, "--n-shards", "2", "--kv-cache-gib", "2", "--tp-size", "2", "--backend", "gloo",
                 "--capture-iters", "20", "--nnodes", "2", "--node-rank", str(node_rank),
                 "--dist-init-addr", "127.0.0.1:%d" % dist_port]
    return tp_server_argv(a, port, scenario, extra + a.tp_extra.split())


def record_round_five(a, probe_mod, scenarios, summary, port, t_begin):
    """The recordings of tests/traces/real/README.md, "Recorded on one H100, 2026-12-07"."""
    for i, scenario in enumerate(s for s in scenarios if s in ROUND_FIVE):
        suffix, server, outcome, phase, fault, words = ROUND_FIVE[scenario]
        mark = os.path.join(a.work, "%s.mark" % scenario)
        done = mark + ".done"
        for path in (mark, done):
            if os.path.exists(path):
                os.unlink(path)
        dist_port = a.dist_port_base + i
        argv = round_five_argv(a, server, port, mark, dist_port)
        neighbour = None
        if scenario == "shared":
            neighbour = start_side_process([os.path.join(REPO, "tests/gpu/gpu_neighbour.py")],
                                           os.path.join(a.work, "neighbour.log"))
            time.sleep(15)   # on the board, with memory and a burst, before the start begins
        values = dict(vars(a), card=a.card.upper(), dist_port=dist_port,
                      neighbour_pid=neighbour.pid if neighbour else None)
        rec = Recorder(probe_mod, a, "%s_%s" % (machine(a), suffix), words % values, port, argv=argv,
                       unit="tp-server (pid mode)", gpus=1)
        rec.header_extra = {"argv": [sys.executable] + argv}
        helper = timer = None
        rec.peer = rec.peer_t = None
        if fault:
            helper = subprocess.Popen([sys.executable, os.path.join(REPO, "tests/gpu/fault_at_mark.py"), "--mark", mark,
                                       "--delay", "5" if fault == "kill" else "1", "--do", fault, "--done", done])
        if scenario == "nodes_late":
            peer_argv = round_five_argv(a, server, port, os.path.join(a.work, "node1.mark"), dist_port, node_rank=1)

            def start_peer(rec=rec, peer_argv=peer_argv):
                rec.peer = start_side_process(peer_argv, os.path.join(a.work, "node1.log"))
                rec.peer_t = round(time.time() - rec.t0, 2)
            timer = threading.Timer(a.peer_delay_s, start_peer)
            rec.start_hook = timer.start
        if outcome == "ready":
            run_scenario(rec, until_ready, after_s=a.poll_s, deadline=t_begin + a.budget_s)
            onset, recorded = None, {}
        else:
            trigger = (lambda r, obs: os.path.exists(done)) if fault else (lambda r, obs: os.path.exists(mark))
            ev = run_scenario(rec, trigger, after_s=a.after_s, deadline=t_begin + a.budget_s)
            fields = read_fields(done if fault else mark)
            onset = round(float(fields[0]) - rec.t0, 2) if ev and fields else None
            recorded = {"onset_from": ("the moment %s acted (SIG%s)" % ("fault_at_mark.py", fault.upper())) if fault
                        else "the rank's mark as it entered the rendezvous",
                        "fault_pid": int(fields[1]) if fault and fields else None}
        if timer is not None:
            timer.cancel()
            recorded.update(peer_start_t=rec.peer_t, peer_delay_s=a.peer_delay_s,
                            peer_argv=[sys.executable] + peer_argv)
        if neighbour is not None:
            recorded["neighbour_pid"] = neighbour.pid
        expect = {"outcome": outcome, "phase": phase}
        if onset is not None:
            expect["onset_t"] = onset
        rec.write(expect, recorded)
        rec.stop()
        if helper is not None and helper.poll() is None:
            helper.kill()
        end_side_process(rec.peer)
        end_side_process(neighbour)
        summary[rec.name] = {"polls": rec.n, "costs": rec.costs, "missing": rec.missing, "onset_t": onset, "smi": rec.smi}
        port += 1
    return port


if __name__ == "__main__":
    main()
