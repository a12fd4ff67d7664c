#!/usr/bin/env python3
"""Restart downtime benchmark (`make bench-restart`): which restart each model gets, measured.

A systemd test host (podman container `sglang-ops-bench`, the demo host's image and
inventory) serves the SGLang stand-in from a real multi-GB model folder on this
machine's disk. The folder is bind-mounted from .cache/bench-restart/model, so its page
cache is this kernel's and the container sees the same files.

First the reference model's setup: its config.json says INT4 compressed-tensors, which
SGLang 0.5.23's weight cache daemon refuses, so the host is converged without the daemon
(sglang_service_weight_cache false) and every restart reads the weights again. Each run,
while the old server keeps serving, drops the model from the page cache (the previous
run's start read it in), so every case starts from the same state:
  cold         playbooks/prewarm.yml -e sglang_prewarm_evict=true   (posix_fadvise DONTNEED)
  prewarmed    the same, then the restart action's prewarm step (sglang_restart_prewarm)
               reads the model back while the old server still serves
  jit_emptied  (once) as cold, with the DeepGEMM cache emptied before the start: what
               keeping the compile caches on persistent disk saves
then playbooks/restart.yml (prewarm, stop, GPU check, start, watch until ready). Then a
model the daemon can hold (config.json: block-wise FP8), the host converged with the daemon:
  warm         the page cache evicted as for cold, then the default restart: the engine alone,
               re-attached to the weights the daemon keeps on the GPUs (docs/restart-speed.md)
WARM_OVER_COLD_MAX is the bound the warm/cold ratio of the median downtimes must keep, and no
restart but jit_emptied may compile (a JIT phase, or a compile cache found empty: the bench
fails either way). With --driver systemctl (used when the restart playbook cannot observe the
host) the prewarm is playbooks/prewarm.yml and the restart systemctl stop + start. A client
polls /v1/completions every 0.25 s the whole time; downtime is the gap between the last
completion before the stop and the first one after the start, as a user sees it. The
phases of each start come from its run.json (time_to_ready); the daemon's "Model loaded from
disk in" line and the engine's "Load weight end. elapsed=" give the time the reads took.

The stand-in's weight-load floor is set to 0 and it is told not to drop the page cache
itself, so its load time is the time real reads of the shards take. Its init, DeepGEMM JIT
and CUDA graph phases are the reference's (the weight cache's authors' warm restart of a
1T-parameter model: ~17 s tokenizer/init, ~23 s DeepGEMM JIT, ~35 s graph capture) at
REFERENCE_SCALE; its other phases keep their defaults.

The container's reads from the disk holding the model are throttled (podman
--device-read-bps, the cgroup's blkio/io.max limit) so that the cold read takes the
reference's 495 s weight load at the same scale (COLD_READ_TARGET_S): the bench's ratios
are the reference host's proportions, not a property of this machine's disk.
--read-mb-s sets the rate (MB/s); 0 turns the throttle off. Page-cache hits are not
throttled: that is the point of prewarming.
"""
import argparse
import importlib.util
import json
import math
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORK = os.path.join(ROOT, ".cache", "bench-restart")
MODEL_IN_CONTAINER = "/models/bench"
HOST = "sglang-bench"
UNIT = "sglang-k26-ddtree"
PORT = 30001
API_KEY = "demo-key-not-secret"      # inventories/demo/group_vars/sglang.yml
MODEL_NAME = "kimi-k2.6"
MIB = 2**20


def _standin_defaults():
    """The stand-in's default Settings, from its own module (stdlib only, loaded by path so
    that no package named sglang lands in this process)."""
    path = os.path.join(ROOT, "tests", "standin", "src", "sglang", "standin", "settings.py")
    spec = importlib.util.spec_from_file_location("sglang_standin_settings", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module      # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module.Settings()


STANDIN = _standin_defaults()
STANDIN_POST_LOAD_S = STANDIN.post_load_s
# The weight cache's authors' warm restart of a 1T-parameter model (../shared/sglang-facts.md,
# "Restart without the daemon"): once the weights were attached, ~35 s of CUDA graph capture,
# ~23 s of DeepGEMM JIT and ~17 s of tokenizer/init; its weight load from disk ~495 s. The
# bench plays them at REFERENCE_SCALE bench seconds per reference second: the stand-in's
# init, JIT and graph phases set to the scaled seconds, and the disk throttled so that the
# cold read takes the scaled weight load.
REFERENCE_PHASES_S = {"init_s": 17.0, "jit_s": 23.0, "cuda_graph_s": 35.0}
REFERENCE_WEIGHT_LOAD_S = 495.0
REFERENCE_SCALE = 0.2
BENCH_PHASES_S = {key: round(seconds * REFERENCE_SCALE, 2) for key, seconds in REFERENCE_PHASES_S.items()}
# default throttle: a cold read of the model takes this long (99 s)
COLD_READ_TARGET_S = REFERENCE_WEIGHT_LOAD_S * REFERENCE_SCALE
REFERENCE = "548 GB at 1.1 GB/s"    # the reference host's cold weight read (docs/restart-speed.md)
THROTTLE_LABEL = "sglang-ops.bench.read-bps"
# The table's rows. cold and prewarmed are the reference model's restart (Kimi K2.6, INT4
# compressed-tensors: SGLang 0.5.23's weight cache daemon refuses it, so no daemon); warm is
# a model the daemon can hold (block-wise FP8), the engine re-attached to the kept weights.
CASES = ("cold", "prewarmed", "warm")
# Once, in the first round: a cold restart with the DeepGEMM cache emptied, what keeping the
# compile caches on persistent disk saves (the stand-in compiles when its cache is empty).
JIT_CASE = "jit_emptied"
CASE_WORDS = {"cold": "cold (INT4, no daemon)", "prewarmed": "INT4 prewarmed (no daemon)",
              "warm": "FP8 with the daemon (warm)", JIT_CASE: "cold, DeepGEMM cache emptied"}
# The model's config.json quantization_config per host setup: what SGLang reads to decide
# whether its weight cache daemon can hold the weights.
QUANTIZATION = {False: {"quant_method": "compressed-tensors", "format": "pack-quantized"},
                True: {"quant_method": "fp8", "weight_block_size": [128, 128]}}
WARM_OVER_COLD_MAX = 0.15           # a warm restart's downtime at most this share of a cold one's
WEIGHTS_UNIT = UNIT + "-weights"    # the weight cache daemon's unit (roles/sglang_service)
# Phases of the start the table shows apart (the detector's names, docs/trace-format.md)
SHOWN_PHASES = ("weight_load", "cuda_graph")
PREWARM_RESERVE_GIB = 2
# SGLang's rank 0 announces a DeepGEMM compile (sglang-facts.md, phases); the graph capture follows it
JIT_BEGIN = "Entering DeepGEMM JIT Pre-Compile session"
GRAPH_BEGIN = "TP0] Capture"


def say(text):
    print("[bench-restart] %s" % text, flush=True)


def podman_env():
    out = subprocess.run(["bash", "-c", ". bin/podman-env >/dev/null && env -0"], cwd=ROOT,
                         check=True, capture_output=True, text=True).stdout
    return dict(item.split("=", 1) for item in out.split("\0") if "=" in item)


class Bench:
    def __init__(self, args):
        self.args = args
        self.env = podman_env()
        self.env["ANSIBLE_CONFIG"] = os.path.join(ROOT, "ansible.cfg")
        self.env["PATH"] = os.path.join(ROOT, ".venv", "bin") + os.pathsep + self.env.get("PATH", "")
        self.name = args.container
        self.weight_cache = False     # whether the bench host runs the weight cache daemon (converge)
        self.model_dir = os.path.join(WORK, "model")
        self.inventory = os.path.join(WORK, "inventory.yml")

    # ---- plumbing -----------------------------------------------------------------
    def run(self, argv, check=True, capture=False, quiet=False):
        out = subprocess.PIPE if (capture or quiet) else None
        proc = subprocess.run(argv, cwd=ROOT, env=self.env, stdout=out, stderr=out if quiet else None,
                              text=True)
        if check and proc.returncode != 0:
            if quiet and proc.stdout:
                print(proc.stdout[-4000:])
            raise SystemExit("command failed (%d): %s" % (proc.returncode, " ".join(argv)))
        return proc

    def exec(self, *argv, check=True):
        return self.run(["podman", "exec", self.name] + list(argv), check=check, capture=True)

    def playbook(self, playbook, *extra):
        return self.run(["ansible-playbook", "-i", "inventories/demo", "-i", self.inventory,
                         "--limit", HOST, "-e", "sglang_ops_target=" + HOST, playbook] + list(extra),
                        quiet=not self.args.verbose)

    def prewarm(self, evict):
        """playbooks/prewarm.yml; returns the sglang_prewarm module's result."""
        saved = dict(self.env)
        self.env.update(ANSIBLE_STDOUT_CALLBACK="ansible.posix.json", ANSIBLE_LOAD_CALLBACK_PLUGINS="1")
        try:
            proc = self.run(["ansible-playbook", "-i", "inventories/demo", "-i", self.inventory,
                             "--limit", HOST, "-e", "sglang_ops_target=" + HOST,
                             "-e", "sglang_prewarm_evict=%s" % str(evict).lower(),
                             "playbooks/prewarm.yml"], capture=True)
        finally:
            self.env = saved
        out = json.loads(proc.stdout)
        return out["plays"][0]["tasks"][0]["hosts"][HOST]

    # ---- setup --------------------------------------------------------------------
    def model_bytes(self):
        return self.args.shards * self.args.shard_mib * MIB

    def read_bps(self):
        """The throttle in bytes/s (0 = none): --read-mb-s, or the model over COLD_READ_TARGET_S."""
        if self.args.read_mb_s is not None:
            return int(self.args.read_mb_s * 1e6)
        return int(self.model_bytes() / COLD_READ_TARGET_S)

    def model_disk(self):
        """The whole-disk block device holding the model folder (throttles apply to disks)."""
        source = self.run(["findmnt", "-n", "-o", "SOURCE", "-T", self.model_dir], capture=True).stdout.strip()
        name = os.path.basename(source.split("[")[0])
        sys_dir = os.path.join("/sys/class/block", name)
        if not source.startswith("/dev/") or not os.path.isdir(sys_dir):
            raise SystemExit("cannot throttle reads: %s is on %r, not a block device (--read-mb-s 0 runs "
                             "unthrottled)" % (self.model_dir, source))
        if os.path.exists(os.path.join(sys_dir, "partition")):
            name = os.path.basename(os.path.dirname(os.path.realpath(sys_dir)))
        return "/dev/" + name

    def throttle_in_effect(self):
        """The read limit the container's cgroup holds, as the kernel shows it."""
        text = self.exec("sh", "-c", "cat /sys/fs/cgroup/blkio/blkio.throttle.read_bps_device "
                                     "/sys/fs/cgroup/io.max 2>/dev/null", check=False).stdout.strip()
        return " ".join(text.split()) or "none"

    def make_model(self):
        want = self.args.shards * self.args.shard_mib * MIB
        index = os.path.join(self.model_dir, "model.safetensors.index.json")
        if os.path.exists(index):
            with open(index, encoding="utf-8") as fh:
                if json.load(fh)["metadata"]["total_size"] == want:
                    say("model folder %s (%.1f GiB) already there" % (self.model_dir, want / 2**30))
                    return
            shutil.rmtree(self.model_dir)
        free = shutil.disk_usage(os.path.dirname(self.model_dir)).free
        if free < want + 4 * 2**30:
            raise SystemExit("not enough free disk for a %.1f GiB model folder (%.1f GiB free)"
                             % (want / 2**30, free / 2**30))
        say("writing %d shards x %d MiB of random bytes to %s (the stand-in's model maker)"
            % (self.args.shards, self.args.shard_mib, self.model_dir))
        self.run([sys.executable, "-c",
                  "import sys; sys.path.insert(0, 'tests/standin/src');"
                  "from sglang.standin.make_model import main; sys.exit(main(sys.argv[1:]))",
                  self.model_dir, "--shards", str(self.args.shards),
                  "--shard-mib", str(self.args.shard_mib)], capture=True)

    def write_inventory(self, weight_cache=False):
        """The bench host's inventory: the demo's, the model folder and whether the weight cache
        daemon runs (every playbook reads it: site.yml installs the daemon, restart.yml uses it)."""
        inventory = {"sglang": {"hosts": {HOST: {
            "ansible_connection": "containers.podman.podman",
            "ansible_host": self.name,
            "sglang_ops_root": ROOT,
            "sglang_service_model_path": MODEL_IN_CONTAINER,
            "sglang_service_weight_cache": weight_cache,
        }}}}
        with open(self.inventory, "w", encoding="utf-8") as fh:
            json.dump(inventory, fh, indent=2)  # JSON is YAML

    def up(self):
        bps = self.read_bps()
        running = self.run(["podman", "inspect", "-f",
                            "{{.State.Running}} {{index .Config.Labels \"%s\"}}" % THROTTLE_LABEL, self.name],
                           check=False, capture=True, quiet=True)
        if running.returncode == 0 and running.stdout.split() == ["true", str(bps)]:
            say("container %s already runs (reads throttled to %s)" % (self.name, self.rate_words(bps)))
        else:
            self.run(["podman", "rm", "-f", self.name], check=False, quiet=True)
            throttle = []
            if bps:
                disk = self.model_disk()
                throttle = ["--device-read-bps", "%s:%d" % (disk, bps)]
                say("reads from %s throttled to %s (%s cold read of %.1f GB; the reference host: %s)"
                    % (disk, self.rate_words(bps), "%.0f s" % (self.model_bytes() / bps), self.model_bytes() / 1e9,
                       REFERENCE))
            say("starting container %s with %s bind-mounted at %s"
                % (self.name, self.model_dir, MODEL_IN_CONTAINER))
            self.run(["podman", "run", "-d", "--name", self.name, "--hostname", HOST,
                      "--label", "%s=%d" % (THROTTLE_LABEL, bps),
                      "--systemd=always", "--ulimit", "nofile=1024:4096",
                      "--ulimit", "nproc=4096:8192", "--cap-add", "SYS_PTRACE"] + throttle +
                     ["-v", "%s:%s:ro" % (self.model_dir, MODEL_IN_CONTAINER),
                      self.env["SGLANG_OPS_TESTHOST_IMAGE"], "/sbin/init"], quiet=True)
        for _ in range(60):
            state = self.exec("systemctl", "is-system-running", check=False).stdout.strip()
            if state in ("running", "degraded"):
                break
            time.sleep(1)
        else:
            raise SystemExit("systemd in %s did not boot" % self.name)
        self.throttle = self.throttle_in_effect()
        say("read limit in the container's cgroup: %s" % self.throttle)

    @staticmethod
    def rate_words(bps):
        return "%.1f MB/s" % (bps / 1e6) if bps else "unthrottled"

    def set_quantization(self, weight_cache):
        """The model's config.json says the quantization of the host setup: INT4
        compressed-tensors without the daemon, block-wise FP8 with it."""
        path = os.path.join(self.model_dir, "config.json")
        with open(path, encoding="utf-8") as fh:
            config = json.load(fh)
        config["quantization_config"] = QUANTIZATION[weight_cache]
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(config, fh, indent=2)

    def converge(self, weight_cache):
        """The bench host serving the stand-in with the weight cache daemon or without it."""
        say("building the stand-in wheel and converging playbooks/site.yml on %s (%s)"
            % (HOST, "weight cache daemon, FP8 block-wise model" if weight_cache else
               "no weight cache daemon, INT4 compressed-tensors model"))
        self.run(["tests/standin/build"], quiet=True)
        self.write_inventory(weight_cache)
        self.set_quantization(weight_cache)
        # Weight-load floor 0: the stand-in's load takes as long as the reads take. It must
        # not drop the page cache itself (its default, for detector tests). Its init, JIT and
        # graph phases: the reference's, scaled (BENCH_PHASES_S).
        config = json.dumps(dict(BENCH_PHASES_S, drop_page_cache=False, weight_load_s=0,
                                 time_scale=self.args.time_scale))
        self.exec("mkdir", "-p", "/etc/sglang-standin")
        subprocess.run(["podman", "exec", "-i", self.name, "sh", "-c",
                        "cat > /etc/sglang-standin/config.json"], input=config, text=True,
                       env=self.env, check=True)
        self.ip = self.exec("sh", "-c", "hostname -I").stdout.split()[0]
        daemon_active = self.exec("systemctl", "is-active", WEIGHTS_UNIT, check=False).stdout.strip() == "active"
        if self.completion_ok(timeout_s=5) and daemon_active == weight_cache:
            say("the stand-in already serves at http://%s:%d as wanted; converge skipped" % (self.ip, PORT))
        else:
            self.playbook("playbooks/site.yml")
            say("serving at http://%s:%d" % (self.ip, PORT))
        self.weight_cache = self.exec("systemctl", "is-active", WEIGHTS_UNIT, check=False).stdout.strip() == "active"
        if self.weight_cache != weight_cache:
            raise SystemExit("the weight cache daemon %s is %s after the converge, wanted %s"
                             % (WEIGHTS_UNIT, "active" if self.weight_cache else "not active",
                                "active" if weight_cache else "not running"))
        say("weight cache daemon %s: %s" % (WEIGHTS_UNIT, "active" if self.weight_cache else "not running"))

    def deep_gemm_cache(self):
        """The engine unit's SGLANG_DG_CACHE_DIR (roles/sglang's sglang_cache_env)."""
        text = self.exec("systemctl", "show", "-p", "Environment", "--value", UNIT).stdout
        for word in text.split():
            name, sep, value = word.strip('"').partition("=")
            if sep and name == "SGLANG_DG_CACHE_DIR":
                return value
        raise SystemExit("%s exports no SGLANG_DG_CACHE_DIR (sglang_cache_env)" % UNIT)

    def deep_gemm_files(self):
        return int(self.exec("sh", "-c", "find %s -type f | wc -l" % self.deep_gemm_cache()).stdout.strip() or 0)

    def last_run_record(self):
        base = os.path.join(WORK, "artifacts", HOST)
        latest = sorted(os.listdir(base))[-1]
        with open(os.path.join(base, latest, "run.json"), encoding="utf-8") as fh:
            return json.load(fh)

    def restart_vars(self):
        # The demo unit is supervised: its supervisor decides each start (an attempt limit
        # would be refused as an option without effect), so only the poll and the folder.
        return {"sglang_restart_poll_s": 1, "sglang_restart_artifacts_dir": os.path.join(WORK, "artifacts")}

    def pick_driver(self):
        """auto: the restart playbook when it can observe the host (checked with --check,
        which changes nothing), else systemctl stop + start."""
        if self.args.driver != "auto":
            return
        proc = self.run(["ansible-playbook", "-i", "inventories/demo", "-i", self.inventory,
                         "--limit", HOST, "-e", "sglang_ops_target=" + HOST, "--check",
                         "-e", json.dumps(self.restart_vars()), "playbooks/restart.yml"],
                        check=False, quiet=True)
        self.args.driver = "playbook" if proc.returncode == 0 else "systemctl"
        say("restart driver: %s" % ("playbooks/restart.yml" if self.args.driver == "playbook" else
                                    "systemctl stop + start (playbooks/restart.yml --check failed here)"))

    def down(self):
        self.run(["podman", "rm", "-f", self.name], check=False, quiet=True)
        say("container %s removed" % self.name)

    # ---- measuring ----------------------------------------------------------------
    def completion_ok(self, timeout_s=2.0):
        body = json.dumps({"model": MODEL_NAME, "prompt": "ping", "max_tokens": 1,
                           "temperature": 0}).encode()
        req = urllib.request.Request("http://%s:%d/v1/completions" % (self.ip, PORT), data=body,
                                     headers={"Content-Type": "application/json",
                                              "Authorization": "Bearer " + API_KEY})
        try:
            with urllib.request.urlopen(req, timeout=timeout_s) as resp:
                return resp.status == 200 and bool(json.load(resp).get("choices"))
        except (urllib.error.URLError, OSError, ValueError):
            return False

    def journal_seconds(self, unit, since_epoch_s, rank_mark, marker):
        """The seconds on rank 0's first `marker` line of `unit` since then (None: no such line)."""
        text = self.exec("journalctl", "-u", unit, "--since", "@%d" % int(since_epoch_s), "-o", "cat",
                         "--no-pager", check=False).stdout
        for line in text.splitlines():
            if rank_mark in line and marker in line:
                return float(line.split(marker)[1].split()[0].rstrip(",s"))
        return None

    def engine_load_s(self, since_epoch_s):
        """The engine's weight load: its attach to the daemon, or its disk load without one."""
        return self.journal_seconds(UNIT, since_epoch_s, "TP0]", "Load weight end. elapsed=")

    def daemon_load_s(self, since_epoch_s):
        """The daemon's read of the shards when this restart restarted it (None: it kept them)."""
        return self.journal_seconds(WEIGHTS_UNIT, since_epoch_s, "gpu=0 ", "Model loaded from disk in ")

    def jit_s(self, since_epoch_s):
        """Seconds from rank 0's DeepGEMM compile line to its graph capture in this start's
        journal; None when the start did not compile."""
        text = self.exec("journalctl", "-u", UNIT, "--since", "@%d" % int(since_epoch_s), "-o", "short-unix",
                         "--no-pager", check=False).stdout
        began = None
        for line in text.splitlines():
            stamp = line.split(" ", 1)[0]
            if began is None and JIT_BEGIN in line:
                began = float(stamp)
            elif began is not None and GRAPH_BEGIN in line:
                return round(float(stamp) - began, 2)
        return None

    def one_run(self, n, case):
        label = case
        if not self.completion_ok(timeout_s=10):
            raise SystemExit("the server does not answer before run %d" % n)
        # Every case starts from the same state: the model evicted from the page cache
        # (the previous run's start read it in). The prewarmed case then reads it back:
        # through the restart action's own prewarm step (sglang_restart_prewarm) with the
        # playbook driver, or through playbooks/prewarm.yml before systemctl.
        t0 = time.monotonic()
        step = self.prewarm(evict=True)
        if case == "prewarmed" and self.args.driver != "playbook":
            step = self.prewarm(evict=False)
        if case == JIT_CASE:
            self.exec("sh", "-c", "find %s -mindepth 1 -delete" % self.deep_gemm_cache())
        jit_files_before = self.deep_gemm_files()
        prep_s = time.monotonic() - t0
        poller = Poller(self.completion_ok)
        poller.start()
        while poller.last_ok is None:
            time.sleep(0.05)
        started = time.time()
        record = {}
        if self.args.driver == "playbook":
            extra = self.restart_vars()
            if self.weight_cache:
                extra["sglang_restart_cold"] = case != "warm"
            if case == "prewarmed":
                # The bench host's server is the stand-in, whose own host memory is small: the
                # prewarm keeps PREWARM_RESERVE_GIB free instead of the role default (16 GiB, for
                # a real server's pinned buffers), so it reads on this small shared machine too.
                extra["sglang_restart_prewarm"] = {"model_path": MODEL_IN_CONTAINER, "step_s": 10,
                                                   "reserve_gib": PREWARM_RESERVE_GIB}
            self.playbook("playbooks/restart.yml", "-e", json.dumps(extra))
            record = self.last_run_record()
            if case == "prewarmed":
                step = record.get("prewarm") or {}
            if record.get("restart_kind") and record["restart_kind"] != ("warm" if case == "warm" else "cold"):
                raise SystemExit("run %d: asked for a %s restart, the run says %s (%s)" % (
                    n, case, record["restart_kind"], record.get("restart_kind_reason")))
        else:
            self.exec("systemctl", "stop", UNIT)
            # Every start counts toward the unit's StartLimitBurst (3 per hour), manual ones too.
            self.exec("systemctl", "reset-failed", UNIT, check=False)
            if self.weight_cache and case != "warm":   # cold: the daemon's weights read from disk again
                self.exec("systemctl", "reset-failed", WEIGHTS_UNIT, check=False)
                self.exec("systemctl", "restart", WEIGHTS_UNIT, check=False)
            self.exec("systemctl", "start", UNIT)
        deadline = time.monotonic() + 600
        while poller.first_ok_after_gap is None and time.monotonic() < deadline:
            time.sleep(0.1)
        poller.stop()
        if poller.first_ok_after_gap is None:
            raise SystemExit("run %d: no completion within 600 s after the restart" % n)
        # Residency the start found, as the evict or prewarm step measured it just before.
        residency = step.get("resident_fraction_after", 0.0)
        engine_s, daemon_s = self.engine_load_s(started), self.daemon_load_s(started)
        # Who read the shards: the daemon when it was restarted, else the engine itself
        # (no weight cache); a warm start read none. Both lines include the post-load pause.
        read_by = daemon_s if daemon_s is not None else (engine_s if not self.weight_cache else None)
        phases = start_phases(record)
        row = {"run": n, "cache": label, "weight_cache": self.weight_cache, "prep_s": round(prep_s, 1),
               "prewarm_msg": step.get("msg", ""), "prewarm_read_bytes": step.get("read_bytes", 0),
               "prewarm_read_s": step.get("read_s", 0.0),
               "prewarm_bytes_per_s": step.get("read_bytes_per_s", 0.0),
               "resident_before_restart": round(residency, 3),
               "downtime_s": round(poller.downtime_s(), 2),
               "engine_load_s": engine_s, "daemon_load_s": daemon_s,
               "shard_read_s": (round(read_by - STANDIN_POST_LOAD_S * self.args.time_scale, 2)
                                if read_by is not None else None),
               "phases": phases, "jit_s": self.jit_s(started), "jit_files_before": jit_files_before,
               "jit_files_after": self.deep_gemm_files()}
        say("run %d %-11s %s" % (n, label, row["prewarm_msg"]))
        say("run %d %-11s resident %3.0f%% at stop, downtime %6.2f s, shard reads %s s, DeepGEMM JIT %s s, phases %s"
            % (n, label, 100 * residency, row["downtime_s"], row["shard_read_s"], row["jit_s"],
               ", ".join("%s %.1f s" % (k, v) for k, v in phases.items()) or "not recorded"))
        return row


def start_phases(record):
    """{phase: seconds} of the ready start of a restart's run.json (time_to_ready), {} when
    it has none (the systemctl driver)."""
    out = {}
    for p in (record.get("time_to_ready") or {}).get("phases") or ():
        out[p["phase"]] = round(out.get(p["phase"], 0.0) + float(p["duration_s"]), 2)
    return out


def recompiled(rows):
    """The runs whose start compiled although the compile cache was kept: a DeepGEMM compile
    in its journal, or a cache that was empty before the start (a restart that wiped it)."""
    return [r for r in rows if r["cache"] != JIT_CASE and (r["jit_s"] is not None or not r["jit_files_before"])]


class Poller(threading.Thread):
    """Polls completions; records the last success before the outage and the first after."""

    def __init__(self, probe, interval_s=0.25):
        super().__init__(daemon=True)
        self.probe, self.interval_s = probe, interval_s
        self.last_ok = None
        self.gap_seen = False
        self.first_ok_after_gap = None
        self._stop_event = threading.Event()

    def run(self):
        while not self._stop_event.is_set() and self.first_ok_after_gap is None:
            asked = time.monotonic()
            ok = self.probe(timeout_s=2.0)
            if ok and not self.gap_seen:
                self.last_ok = time.monotonic()
            elif ok and self.gap_seen:
                self.first_ok_after_gap = time.monotonic()
            elif not ok and self.last_ok is not None:
                self.gap_seen = True
            self._stop_event.wait(max(0.0, self.interval_s - (time.monotonic() - asked)))

    def stop(self):
        self._stop_event.set()
        self.join(timeout=5)

    def downtime_s(self):
        return self.first_ok_after_gap - self.last_ok


def downtime_ratios(rows):
    """{case: median downtime} and the ratios warm/cold and prewarmed/cold, and whether warm/cold
    keeps WARM_OVER_COLD_MAX; a case without runs is left out."""
    medians = {c: statistics.median([r["downtime_s"] for r in rows if r["cache"] == c])
               for c in CASES if any(r["cache"] == c for r in rows)}
    cold = medians.get("cold")
    ratios = {"%s_over_cold" % c: medians[c] / cold for c in ("prewarmed", "warm") if c in medians and cold}
    ok = ratios.get("warm_over_cold") is not None and ratios["warm_over_cold"] <= WARM_OVER_COLD_MAX
    return medians, ratios, ok


def _or_dash(value):
    return "-" if value is None else "%.2f" % value


def _median(rows, cache, key):
    values = [r[key] for r in rows if r["cache"] == cache and r[key] is not None]
    return statistics.median(values) if values else None


def _phase_cell(row, phase):
    if not row["phases"]:
        return "-"
    return "%.1f" % row["phases"].get(phase, 0.0)


def report(rows, args, bench):
    size_gib = args.shards * args.shard_mib / 1024
    bps = bench.read_bps()
    print()
    print("restart downtime, last completion before the stop -> first completion after the start")
    print("SGLang stand-in on a systemd container, %d shards x %d MiB = %.1f GiB read from disk, "
          "restarted by %s; the reference's init, JIT and graph capture at %.1f s per reference s (%s), "
          "time_scale %.2f" % (
              args.shards, args.shard_mib, size_gib,
              "playbooks/restart.yml" if args.driver == "playbook" else "systemctl stop + start",
              REFERENCE_SCALE, ", ".join("%s %.1f s" % kv for kv in BENCH_PHASES_S.items()), args.time_scale))
    print("disk reads throttled to %s (cgroup limit in the container: %s); reference host: %s"
          % (bench.rate_words(bps), getattr(bench, "throttle", "?"), REFERENCE))
    print("%-4s %-12s %6s %9s %11s %13s %13s %12s %12s %11s %20s" % (
        "run", "case", "daemon", "resident", "downtime_s", "daemon_load_s", "engine_load_s", "weight_load_s",
        "deepgemm_s", "cuda_graph_s", "prewarm"))
    for r in rows:
        prewarm = ("%.1f GB at %.2f GB/s" % (r["prewarm_read_bytes"] / 1e9, r["prewarm_bytes_per_s"] / 1e9)
                   if r["cache"] == "prewarmed" else "evicted, daemon kept" if r["cache"] == "warm" else "evicted")
        print("%-4d %-12s %6s %8.0f%% %11.2f %13s %13s %12s %12s %11s %20s" % (
            r["run"], r["cache"], "yes" if r["weight_cache"] else "no", 100 * r["resident_before_restart"],
            r["downtime_s"], _or_dash(r["daemon_load_s"]), _or_dash(r["engine_load_s"]),
            _phase_cell(r, "weight_load"), _or_dash(r["jit_s"]), _phase_cell(r, "cuda_graph"), prewarm))
    medians, ratios, warm_ok = downtime_ratios(rows)
    print()
    print("%-30s %17s %13s %14s %12s %11s" % ("case", "median downtime_s", "against cold", "weight_load_s",
                                              "cuda_graph_s", "deepgemm_s"))
    for case in CASES + (JIT_CASE,):
        mine = [r for r in rows if r["cache"] == case]
        if not mine:
            continue
        median = statistics.median([r["downtime_s"] for r in mine])
        against = median / medians["cold"] if medians.get("cold") else None
        jit = [r["jit_s"] for r in mine if r["jit_s"] is not None]
        cells = [_median_phase(mine, phase) for phase in SHOWN_PHASES] + [statistics.median(jit) if jit else None]
        print("%-30s %17.2f %13s %14s %12s %11s" % (
            CASE_WORDS[case], median, "%.3f" % against if against is not None else "-",
            *[_or_dash(c) for c in cells]))
    if "warm" in medians:
        print("RATIO warm/cold downtime = %.3f (bound %.2f: %s), prewarmed/cold = %.3f" % (
            ratios["warm_over_cold"], WARM_OVER_COLD_MAX, "kept" if warm_ok else "EXCEEDED",
            ratios.get("prewarmed_over_cold", float("nan"))))
    again = recompiled(rows)
    print("compile caches kept: %s" % ("every restart but the emptied one started without a DeepGEMM compile"
                                       if not again else "NO: runs %s compiled again" % [r["run"] for r in again]))
    return {"read_bytes_per_s": bps, "medians_s": medians, "ratios": ratios,
            "jit_emptied_median_s": _median(rows, JIT_CASE, "downtime_s"),
            "warm_over_cold_max": WARM_OVER_COLD_MAX, "warm_over_cold_kept": warm_ok,
            "recompiled_runs": [r["run"] for r in again],
            "phase_medians_s": {case: {phase: _median_phase([r for r in rows if r["cache"] == case], phase)
                                       for phase in SHOWN_PHASES} for case in CASES + (JIT_CASE,)},
            "deepgemm_s": {case: [r["jit_s"] for r in rows if r["cache"] == case] for case in CASES + (JIT_CASE,)}}


def _median_phase(rows, phase):
    values = [r["phases"].get(phase, 0.0) for r in rows if r["phases"]]
    return statistics.median(values) if values else None


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runs", type=int, default=2, help="runs per case (in turn: cold, prewarmed; then warm)")
    p.add_argument("--shards", type=int, default=12)
    p.add_argument("--shard-mib", type=int, default=256)
    p.add_argument("--time-scale", type=float, default=1.0,
                   help="scale of the stand-in's non-load phases (its time_scale)")
    p.add_argument("--driver", choices=["auto", "playbook", "systemctl"], default="auto",
                   help="restart with playbooks/restart.yml, or systemctl stop + start; auto takes "
                        "the playbook when a --check run of it succeeds on the bench host")
    p.add_argument("--read-mb-s", type=float, default=None, metavar="MB_S",
                   help="throttle the container's reads from the model's disk to this rate (MB/s); default: "
                        "the model's size over %.0f s, like %s on the reference host; 0: no throttle"
                        % (COLD_READ_TARGET_S, REFERENCE))
    p.add_argument("--container", default="sglang-ops-bench")
    p.add_argument("--keep", action="store_true", help="leave the container running")
    p.add_argument("--verbose", action="store_true", help="show the playbooks' output")
    args = p.parse_args(argv)
    if args.read_mb_s is not None and not (math.isfinite(args.read_mb_s) and args.read_mb_s >= 0):
        p.error("--read-mb-s must be a finite rate >= 0 (0: no throttle), got %s" % args.read_mb_s)
    if args.runs < 1:
        p.error("--runs must be at least 1, got %d" % args.runs)
    os.makedirs(WORK, exist_ok=True)
    bench = Bench(args)
    bench.make_model()
    bench.write_inventory()
    rows = []
    try:
        bench.up()
        # The reference model first (INT4: no daemon), then a model the daemon can hold.
        bench.converge(weight_cache=False)
        bench.pick_driver()
        for i in range(args.runs):
            for case in ("cold", "prewarmed") + ((JIT_CASE,) if i == 0 else ()):
                rows.append(bench.one_run(len(rows) + 1, case))
        bench.converge(weight_cache=True)
        for i in range(args.runs):
            rows.append(bench.one_run(len(rows) + 1, "warm"))
    finally:
        if not args.keep:
            bench.down()
    summary = report(rows, args, bench)
    out = os.path.join(WORK, "results-%s.json" % time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()))
    with open(out, "w", encoding="utf-8") as fh:
        json.dump({"args": vars(args), "runs": rows, "summary": summary}, fh, indent=2)
    print("results: %s" % os.path.relpath(out, ROOT))
    failed = []
    if not summary["warm_over_cold_kept"]:
        failed.append("warm/cold downtime %s above %.2f"
                      % (summary["ratios"].get("warm_over_cold"), WARM_OVER_COLD_MAX))
    if summary["recompiled_runs"]:
        failed.append("runs %s compiled again with the compile caches kept" % summary["recompiled_runs"])
    for problem in failed:
        print("FAILED: " + problem)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
