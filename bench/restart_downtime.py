#!/usr/bin/env python3
"""Restart downtime benchmark (`make bench-restart`): cold, prewarmed and warm restarts.

A systemd test host (podman container `sglang-ops-bench`, the demo host's image and
inventory) serves the SGLang stand-in from a real multi-GB model folder on this
machine's disk. The folder is bind-mounted from .cache/bench-restart/model, so its page
cache is this kernel's and the container sees the same files.

Each run, while the old server keeps serving, first drops the model from the page
cache (the previous run's start read it in), so both cases start from the same state:
  cold       playbooks/prewarm.yml -e sglang_prewarm_evict=true   (posix_fadvise DONTNEED)
  prewarmed  the same, then the restart action's prewarm step (sglang_restart_prewarm)
then playbooks/restart.yml (prewarm, stop, GPU check, start, watch until ready). The demo
inventory runs SGLang's weight cache daemon beside the unit (sglang_service_weight_cache),
so both of those are cold restarts (sglang_restart_cold: the daemon restarted too, its
weights read from disk), and a third case follows:
  warm       the page cache evicted as for cold, then the default restart: the engine alone,
             re-attached to the weights the daemon keeps on the GPUs (docs/restart-speed.md)
WARM_OVER_COLD_MAX is the bound the warm/cold ratio of the median downtimes must keep. With
--driver systemctl (used when the restart playbook cannot observe the host) the
prewarm is playbooks/prewarm.yml and the restart systemctl stop + start. A client polls
/v1/completions every 0.25 s the whole time; downtime is the gap between the last
completion before the stop and the first one after the start, as a user sees it. The
daemon's "Model loaded from disk in" line gives the time its shards took to read (the
engine's own "Load weight end. elapsed=" is its attach to the daemon, or its disk load
without the weight cache).

The stand-in's weight-load floor is set to 0 and it is told not to drop the page cache
itself, so its load time is the time real reads of the shards take; the other start-up
phases keep the stand-in's defaults (about 15 s), standing in for post-load, KV cache,
CUDA graphs and warmup.

The container's reads from the disk holding the model are throttled (podman
--device-read-bps, the cgroup's blkio/io.max limit) to a named rate. The default is the
model's size over COLD_READ_TARGET_S: the cold read then relates to the stand-in's other
phases (a warm start) as the weight cache's authors measured on a 1T-parameter model, a
495 s weight load against a 78 s warm start (REFERENCE_LOAD_OVER_WARM), so the bench's
ratios are the reference host's proportions, not a property of this machine's disk.
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
# The stand-in's phases of a warm start (attached, no read), at time_scale 1.
WARM_START_PHASES = ("init_s", "weight_cache_attach_s", "post_load_s", "kv_cache_s", "cuda_graph_s",
                     "http_start_s", "warmup_s")
STANDIN_WARM_START_S = sum(getattr(STANDIN, key) for key in WARM_START_PHASES)
# The weight cache's authors, 1T-parameter FP8 model: weight load ~495 s of an 8.8 min cold
# start, a warm (attached) start 1.3 min.
REFERENCE_LOAD_OVER_WARM = 495.0 / 78.0
# default throttle: a cold read of the model takes this long (~100 s)
COLD_READ_TARGET_S = STANDIN_WARM_START_S * REFERENCE_LOAD_OVER_WARM
REFERENCE = "548 GB at 1.1 GB/s"    # the reference host's cold weight read (docs/restart-speed.md)
THROTTLE_LABEL = "sglang-ops.bench.read-bps"
CASES = ("cold", "prewarmed", "warm")
WARM_OVER_COLD_MAX = 0.15           # a warm restart's downtime at most this share of a cold one's
WEIGHTS_UNIT = UNIT + "-weights"    # the weight cache daemon's unit (roles/sglang_service)


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

    def write_inventory(self):
        inventory = {"sglang": {"hosts": {HOST: {
            "ansible_connection": "containers.podman.podman",
            "ansible_host": self.name,
            "sglang_ops_root": ROOT,
            "sglang_service_model_path": MODEL_IN_CONTAINER,
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

    def converge(self):
        say("building the stand-in wheel and converging playbooks/site.yml on %s" % HOST)
        self.run(["tests/standin/build"], quiet=True)
        # Weight-load floor 0: the stand-in's load takes as long as the reads take. It must
        # not drop the page cache itself (its default, for detector tests).
        config = json.dumps({"drop_page_cache": False, "weight_load_s": 0,
                             "time_scale": self.args.time_scale})
        self.exec("mkdir", "-p", "/etc/sglang-standin")
        subprocess.run(["podman", "exec", "-i", self.name, "sh", "-c",
                        "cat > /etc/sglang-standin/config.json"], input=config, text=True,
                       env=self.env, check=True)
        self.ip = self.exec("sh", "-c", "hostname -I").stdout.split()[0]
        if self.completion_ok(timeout_s=5):
            say("the stand-in already serves at http://%s:%d; converge skipped" % (self.ip, PORT))
        else:
            self.playbook("playbooks/site.yml")
            say("serving at http://%s:%d" % (self.ip, PORT))
        self.weight_cache = self.exec("systemctl", "is-active", WEIGHTS_UNIT, check=False).stdout.strip() == "active"
        say("weight cache daemon %s: %s" % (WEIGHTS_UNIT, "active" if self.weight_cache else
                                            "not running (no warm case: the inventory has sglang_service_weight_cache off)"))

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

    def one_run(self, n, case):
        label = case
        if not self.completion_ok(timeout_s=10):
            raise SystemExit("the server does not answer before run %d" % n)
        # Both cases start from the same state: the model evicted from the page cache
        # (the previous run's start read it in). The prewarmed case then reads it back:
        # through the restart action's own prewarm step (sglang_restart_prewarm) with the
        # playbook driver, or through playbooks/prewarm.yml before systemctl.
        t0 = time.monotonic()
        step = self.prewarm(evict=True)
        if case == "prewarmed" and self.args.driver != "playbook":
            step = self.prewarm(evict=False)
        prep_s = time.monotonic() - t0
        poller = Poller(self.completion_ok)
        poller.start()
        while poller.last_ok is None:
            time.sleep(0.05)
        started = time.time()
        if self.args.driver == "playbook":
            extra = self.restart_vars()
            extra["sglang_restart_cold"] = case != "warm"
            if case == "prewarmed":
                extra["sglang_restart_prewarm"] = {"model_path": MODEL_IN_CONTAINER, "step_s": 2}
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
            if case != "warm":   # cold: the daemon's weights read from disk again
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
        row = {"run": n, "cache": label, "prep_s": round(prep_s, 1),
               "prewarm_msg": step.get("msg", ""), "prewarm_read_bytes": step.get("read_bytes", 0),
               "prewarm_read_s": step.get("read_s", 0.0),
               "prewarm_bytes_per_s": step.get("read_bytes_per_s", 0.0),
               "resident_before_restart": round(residency, 3),
               "downtime_s": round(poller.downtime_s(), 2),
               "engine_load_s": engine_s, "daemon_load_s": daemon_s,
               "shard_read_s": (round(read_by - STANDIN_POST_LOAD_S * self.args.time_scale, 2)
                                if read_by is not None else None)}
        say("run %d %-9s %s" % (n, label, row["prewarm_msg"]))
        say("run %d %-9s resident %3.0f%% at stop, downtime %6.2f s, shard reads %s s"
            % (n, label, 100 * residency, row["downtime_s"], row["shard_read_s"]))
        return row


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


def report(rows, args, bench):
    size_gib = args.shards * args.shard_mib / 1024
    bps = bench.read_bps()
    print()
    print("restart downtime, last completion before the stop -> first completion after the start")
    print("SGLang stand-in on a systemd container, %d shards x %d MiB = %.1f GiB read from disk, "
          "restarted by %s; stand-in phases other than loading: time_scale %.2f"
          % (args.shards, args.shard_mib, size_gib,
             "playbooks/restart.yml" if args.driver == "playbook" else "systemctl stop + start",
             args.time_scale))
    print("disk reads throttled to %s (cgroup limit in the container: %s); reference host: %s"
          % (bench.rate_words(bps), getattr(bench, "throttle", "?"), REFERENCE))
    print("%-4s %-10s %9s %11s %14s %14s %13s %20s" % ("run", "cache", "resident", "downtime_s", "daemon_load_s",
                                                       "engine_load_s", "shard_read_s", "prewarm"))
    for r in rows:
        prewarm = ("%.1f GB at %.2f GB/s" % (r["prewarm_read_bytes"] / 1e9, r["prewarm_bytes_per_s"] / 1e9)
                   if r["cache"] == "prewarmed" else "evicted" if r["cache"] == "cold" else "evicted, daemon kept")
        print("%-4d %-10s %8.0f%% %11.2f %14s %14s %13s %20s" % (
            r["run"], r["cache"], 100 * r["resident_before_restart"], r["downtime_s"],
            _or_dash(r["daemon_load_s"]), _or_dash(r["engine_load_s"]), _or_dash(r["shard_read_s"]), prewarm))
    cold = [r["downtime_s"] for r in rows if r["cache"] == "cold"]
    warm = [r["downtime_s"] for r in rows if r["cache"] == "prewarmed"]
    mc, mw = statistics.median(cold), statistics.median(warm)
    print("median downtime: cold %.2f s (%.2f-%.2f), prewarmed %.2f s (%.2f-%.2f)"
          % (mc, min(cold), max(cold), mw, min(warm), max(warm)))
    rc, rw = _median(rows, "cold", "shard_read_s"), _median(rows, "prewarmed", "shard_read_s")
    if rc is not None and rw is not None:
        print("median shard reads during the start: cold %.2f s (%.2f GB/s), prewarmed %.2f s (%.2f GB/s)"
              % (rc, size_gib * 2**30 / 1e9 / rc if rc > 0 else 0, rw,
                 size_gib * 2**30 / 1e9 / rw if rw > 0 else 0))
    load_key = "daemon_load_s" if bench.weight_cache else "engine_load_s"
    lc, lw = _median(rows, "cold", load_key), _median(rows, "prewarmed", load_key)
    if lc is not None and lw:
        print("RATIO weight-load phase cold/prewarmed = %.1fx (median %.2f s against %.2f s, %s)"
              % (lc / lw, lc, lw, "the daemon's" if bench.weight_cache else "the engine's"))
    print("RATIO prewarmed/cold downtime = %.2f (cold/prewarmed = %.2fx), %d runs each"
          % (mw / mc, mc / mw, len(cold)))
    medians, ratios, warm_ok = downtime_ratios(rows)
    if "warm" in medians:
        print("downtime: cold %.2f s, prewarmed %.2f s, warm %.2f s" % (
            medians["cold"], medians["prewarmed"], medians["warm"]))
        print("RATIO warm/cold downtime = %.3f (bound %.2f: %s), warm/prewarmed = %.3f" % (
            ratios["warm_over_cold"], WARM_OVER_COLD_MAX, "kept" if warm_ok else "EXCEEDED",
            medians["warm"] / medians["prewarmed"]))
    return {"read_bytes_per_s": bps, "cold_median_s": mc, "prewarmed_median_s": mw,
            "warm_median_s": medians.get("warm"), "ratio_warm_over_cold": ratios.get("warm_over_cold"),
            "warm_over_cold_max": WARM_OVER_COLD_MAX, "warm_over_cold_kept": warm_ok,
            "ratio_prewarmed_over_cold": mw / mc, "cold_shard_read_median_s": rc, "prewarmed_shard_read_median_s": rw,
            "cold_weight_load_median_s": lc, "prewarmed_weight_load_median_s": lw,
            "weight_load_cold_over_prewarmed": (lc / lw) if lc is not None and lw else None}


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--runs", type=int, default=3, help="runs per case (in turn: cold, prewarmed, warm)")
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
    os.makedirs(WORK, exist_ok=True)
    bench = Bench(args)
    bench.make_model()
    bench.write_inventory()
    rows = []
    try:
        bench.up()
        bench.converge()
        bench.pick_driver()
        cases = CASES if bench.weight_cache else CASES[:2]
        for i in range(args.runs):
            for case in cases:
                rows.append(bench.one_run(len(rows) + 1, case))
    finally:
        if not args.keep:
            bench.down()
    summary = report(rows, args, bench)
    out = os.path.join(WORK, "results-%s.json" % time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()))
    with open(out, "w", encoding="utf-8") as fh:
        json.dump({"args": vars(args), "runs": rows, "summary": summary}, fh, indent=2)
    print("results: %s" % os.path.relpath(out, ROOT))
    if bench.weight_cache and not summary["warm_over_cold_kept"]:
        print("FAILED: warm/cold downtime %s above %.2f" % (summary["ratio_warm_over_cold"], WARM_OVER_COLD_MAX))
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
