#!/usr/bin/env python3
"""Record sglang-trace/1 traces of a real GPU process with the project's own probe.

On a machine with an NVIDIA GPU (no systemd needed): writes safetensors shards to disk,
then for each scenario starts tests/gpu/shard_loader.py (a real process that reads the
shards and moves their tensors onto the GPU), probes it every --poll-s seconds with
plugins/module_utils/probe.py in PID mode, and writes the observations as a labelled
trace:

  healthy  load, post-load work, HTTP up, first completion answered   -> ready
  crash    SIGKILL half way through the weight load                   -> failed
  hang     SIGSTOP right after "Load weight end" (a true hang)        -> stalled

This script plays the part systemd plays on a real host: it is the service's parent,
so it fills the observation's `unit` from what it knows as the parent (running, or
failed with the signal once reaped). Everything else comes from the probe.

Also saves raw nvidia-smi output (both query forms and the table, idle and loaded) for
the parser tests. Usage:
  python3 tests/gpu/record_real_traces.py --out DIR [--work /tmp/x] [--budget-s 540]
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import tarfile
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
    from ansible_collections.sglang_ops.serving.plugins.module_utils import nvidia_smi, probe
    return probe, nvidia_smi


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


class Recorder:
    def __init__(self, probe_mod, args, name, description, port):
        self.probe_mod, self.args, self.name, self.port = probe_mod, args, name, port
        self.description = description
        self.log_path = os.path.join(args.work, "%s.stderr.log" % name)
        self.trace_path = os.path.join(args.out, "%s.jsonl" % name)
        self.costs = []
        self.missing = []

    def start(self):
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            [sys.executable, os.path.join(REPO, "tests/gpu/shard_loader.py"), "--model-path",
             self.args.shards, "--port", str(self.port), "--tp-rank", "0",
             "--repack-s", str(self.args.repack_s), "--post-load-s", str(self.args.post_load_s)],
            stdout=self.log, stderr=subprocess.STDOUT, env=dict(os.environ, PYTHONUNBUFFERED="1"))
        self.t0 = time.time()
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
        res = self.probe_mod.probe(req)
        self.cursor = res["cursor"]
        obs = res["observation"]
        t = round(obs.pop("ts") - self.t0, 2)
        for rec in obs.get("log", []):
            rec["t"] = round(rec.pop("ts") - self.t0, 2)
        out = {"t": t, "unit": unit}
        out.update(obs)
        self.missing.append({k: v for k, v in res["missing"].items() if k != "unit"})
        self.observations.append(out)
        self.costs.append(res["cost"])
        return out

    def log_text(self):
        with open(self.log_path, "rb") as f:
            return f.read().decode("utf-8", errors="replace")

    def write(self, expect, extra):
        header = {"format": "sglang-trace/1", "name": self.name, "unit": "shard-loader (pid mode)",
                  "poll_s": self.args.poll_s, "gpus": 1, "description": self.description,
                  "expect": expect, "recorded": extra}
        with open(self.trace_path, "w") as f:
            f.write(json.dumps(header) + "\n")
            for o in self.observations:
                f.write(json.dumps(o) + "\n")

    def stop(self):
        if self.proc.poll() is None:
            try:
                os.kill(self.proc.pid, signal.SIGCONT)
            except ProcessLookupError:
                pass
            self.proc.kill()
        self.proc.wait()
        self.log.close()

    def sleep_to_next(self, started):
        time.sleep(max(0.0, self.args.poll_s - (time.time() - started)))


def run_scenario(rec, until, after_s, action=None, deadline=None):
    """Poll until `until(rec, obs)` is true (or the process event `action` fires),
    then keep polling after_s more seconds (or until `deadline`)."""
    rec.start()
    event_t = None
    stop_at = None
    while True:
        started = time.time()
        obs = rec.poll_once()
        print("%s t=%6.1f procs=%s gpu=%s http=%s log=%d" % (
            rec.name, obs["t"], (obs.get("procs") or {}).get("count"),
            [g.get("mem_used_mib") for g in obs.get("gpus", [])], obs.get("http"),
            len(obs.get("log", []))), flush=True)
        if event_t is None and until(rec, obs):
            event_t = time.time()
            if action is not None:
                action(rec)
            stop_at = time.time() + after_s
            if deadline is not None:
                stop_at = min(stop_at, deadline) if after_s else deadline
        if stop_at is not None and time.time() >= stop_at:
            break
        if deadline is not None and time.time() >= deadline:
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
    ap.add_argument("--write-shards-only", action="store_true")
    a = ap.parse_args()
    t_begin = time.time()
    a.shards = a.shards or os.path.join(a.work, "shards")
    os.makedirs(a.out, exist_ok=True)
    os.makedirs(a.work, exist_ok=True)
    probe_mod, nvidia_smi_mod = import_probe(a.work)
    cap_dir = os.path.join(a.work, "captures")
    os.makedirs(cap_dir, exist_ok=True)
    if not a.write_shards_only:
        capture_nvidia_smi(nvidia_smi_mod, cap_dir, "idle")
    if a.write_shards_only:
        write_shards(a.shards, a.n_shards, a.shard_mib)
        return
    # In a child process: its CUDA context must be gone before the GPUs are watched.
    subprocess.run([sys.executable, os.path.abspath(__file__), "--write-shards-only", "--out", a.out,
                    "--work", a.work, "--shards", a.shards, "--n-shards", str(a.n_shards),
                    "--shard-mib", str(a.shard_mib)], check=True)
    print("shards written in %.1f s" % (time.time() - t_begin), flush=True)
    summary = {}
    scenarios = a.scenarios.split(",")
    port = 30001

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

    capture_nvidia_smi(nvidia_smi_mod, cap_dir, "after")
    with tarfile.open(os.path.join(a.out, "captures.tar.gz"), "w:gz") as tf:
        tf.add(cap_dir, arcname="captures")
        for name in os.listdir(a.work):
            if name.endswith(".stderr.log"):
                tf.add(os.path.join(a.work, name), arcname="captures/" + name)
    with open(os.path.join(a.out, "summary.json"), "w") as f:
        json.dump(summary, f, indent=1)
    print("done in %.1f s" % (time.time() - t_begin), flush=True)


if __name__ == "__main__":
    main()
