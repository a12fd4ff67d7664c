"""A scripted host, probe, detector and clock for driving the restart procedure without Ansible."""
import random

from ansible_collections.sglang_ops.serving.plugins.module_utils.host import systemd_unit
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.detector import Assessment
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.restart.retry_policy import Backoff
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.shared import systemctl_verbs
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.shared.artifacts import RunArtifacts
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain.detector_settings import DetectorSettings
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.shared.remote_host_access import RemoteHostAccess, probe_args
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.restart.restart_procedure import RestartOptions, RestartProcedure

UNIT = "sglang-k26-ddtree"
VENV = "/opt/sglang/venvs/0.5.23"
EXEC_START = "{ path=%s/bin/python ; argv[]=%s/bin/python -m sglang.launch_server --api-key sk-abcdef123456 ; }" % (VENV, VENV)


class Clock:
    def __init__(self, now=1_764_450_000.0):
        self.now = now
        self.slept = []

    def __call__(self):
        return self.now

    def sleep(self, s):
        self.slept.append(s)
        self.now += s


def progressing(phase="weight_load"):
    return ("progressing", phase, "progressing", "shards advancing")


def ready():
    return ("ready", "ready", "ready", "a completion answered")


def stalled(code="stall_idle", phase="weight_load"):
    return ("stalled", phase, code, "every signal flat for 60 s")


class ScriptedDetector:
    def __init__(self, script):
        self.script = list(script)
        self.seen = []

    def observe(self, obs):
        self.seen.append(obs)
        entry = self.script.pop(0) if len(self.script) > 1 else self.script[0]
        if isinstance(entry, Assessment):   # one with its evidence
            return Assessment(obs["t"], entry.phase, entry.verdict, entry.reason_code, entry.reason, dict(entry.evidence))
        verdict, phase, code, reason = entry
        want = verdict == "suspect"
        return Assessment(obs["t"], phase, verdict, code, reason, want_stacks=want)


def holder(pid, mem_mib, cmdline, in_unit=False, gpu_uuid="GPU-0"):
    """One entry of the probe's gpu_holders.holders."""
    return {"pid": pid, "gpu_uuid": gpu_uuid, "mem_mib": mem_mib, "in_unit": in_unit, "cmdline": cmdline}


class FakeHost:
    """Answers the probe's reads (unit state, GPU holders, unit processes) and the shell
    steps of the verbs and diagnostics; records what was done to the unit."""

    def __init__(self, installed=True, holders=(), holders_after_stop=None, pids_after_stop=0, settle_polls=0,
                 reload_settles=False):
        self.settle_polls = settle_polls          # polls that still show the stop job running
        self.reload_settles = reload_settles      # a daemon-reload ends the stop job (missed cgroup-empty notice)
        self.installed = installed
        self.holders = list(holders)              # holder(...) entries before the first stop
        self.holders_after_stop = holders_after_stop  # entries after a stop (default: none)
        self.pids_after_stop = pids_after_stop    # listings that still show a process after stop
        self.events = []
        self.commands = []
        self.reads = []
        self.diagnostics_since = []
        self.stopped = False

    def _gpu_holders(self):
        held = self.holders if not self.stopped else (self.holders_after_stop or [])
        used = sum(h["mem_mib"] for h in held if h["gpu_uuid"] == "GPU-0")
        return {"available": True, "error": "",
                "gpus": [{"index": 0, "uuid": "GPU-0", "mem_used_mib": used, "mem_total_mib": 97887}],
                "holders": [dict(h) for h in held]}

    def _unit_state(self):
        if not self.installed:
            return {"installed": False, "load_state": "not-found", "active": "inactive", "sub": "dead",
                    "main_pid": None, "result": "success", "exec_start": "", "venv": None}
        active, sub = ("inactive" if self.stopped else "active"), "dead"
        if self.stopped and self.settle_polls:
            self.settle_polls -= 1
            active, sub = "deactivating", "stop-sigterm"
        return {"installed": True, "load_state": "loaded", "active": active, "sub": sub, "main_pid": None,
                "result": "success", "exec_start": EXEC_START, "venv": VENV}

    def _unit_processes(self):
        if self.pids_after_stop:
            self.pids_after_stop -= 1
            return [{"pid": 77, "state": "T", "cmdline": "sglang::scheduler_TP0"}]
        return []

    def read_daemon(self, module_args):
        """A read of the weight cache daemon's unit (<unit>-weights): none on this host."""
        del module_args
        return {"missing": {}, "cursor": None, "unit_processes": [], "starts": {"current": None, "starts": []},
                "unit_state": {"installed": False, "load_state": "not-found", "active": "inactive", "sub": "dead",
                               "main_pid": None, "result": "success", "exec_start": "", "venv": None}}

    def read(self, module_args):
        """The sglang_probe result for a call with observation=false."""
        self.reads.append({k for k in ("unit_state", "holders", "unit_processes", "diagnostics") if module_args.get(k)})
        if str(module_args.get("unit", "")).endswith("-weights"):
            return self.read_daemon(module_args)
        result = {"missing": {}, "cursor": None}
        if module_args.get("unit_state"):
            result["unit_state"] = self._unit_state()
        if module_args.get("holders"):
            result["gpu_holders"] = self._gpu_holders()
        if module_args.get("unit_processes"):
            result["unit_processes"] = self._unit_processes()
        if module_args.get("diagnostics"):
            self.diagnostics_since.append(module_args.get("since_epoch_s"))
            result["diagnostics"] = {
                "unit-status": "Active: active (running)\n", "ports": "LISTEN 0 4096 *:30001\n",
                "nvidia-smi": "# compute apps (pid, gpu_uuid, used_memory MiB)\n", "processes": "pid state command\n",
                "journal": "Nov 29 server_args=ServerArgs(api_key='sk-abcdef123456')\nLoad weight begin.\n",
                "py-spy-rank0": "PYSPY 11 sglang::scheduler_TP0\nThread 11 (idle): \"MainThread\"\n"
                                "    wait (threading.py:320)\n"}
        return result

    def shell(self, cmd, timeout_s=None):
        self.commands.append(cmd)
        if cmd == systemctl_verbs.DAEMON_RELOAD_CMD:
            self.events.append("daemon-reload")
            if self.reload_settles:
                self.settle_polls = 0
            return 0, "", ""
        if cmd.startswith("timeout") and "systemctl stop" in cmd:
            self.events.append("stop")
            self.stopped = True
            return 0, "", ""
        if "systemctl start" in cmd and "reset-failed" in cmd:
            self.events.append("start")
            self.stopped = False
            return 0, "", ""
        if cmd.startswith("kill -9"):
            self.events.append(cmd)
            self.holders_after_stop = [h for h in (self.holders_after_stop or []) if str(h["pid"]) not in cmd.split()]
            self.holders = [h for h in self.holders if str(h["pid"]) not in cmd.split()]
            return 0, "", ""
        if "systemctl kill" in cmd:
            self.events.append("sigkill")
            return 0, "", ""
        return 0, "output of: %s\n" % cmd.splitlines()[0][:60], ""


# Option values that the supervised-unit tests give RestartOptions as its defaults.
SUPERVISED_OPTION_DEFAULTS = {"detector": {}, "max_attempts": 3, "backoff_base_s": 10.0, "backoff_max_s": 120.0,
                              "stop_timeout_s": 330.0, "failed_stop_timeout_s": 20.0, "release_timeout_s": 120.0,
                              "gpu_idle_mib": 1024, "kill_orphans": False, "poll_s": 5.0}


class SupervisedHost(FakeHost):
    """A host whose unit runs under sglang-ops' supervisor (its ExecStart says so)."""

    def _unit_state(self):
        state = super()._unit_state()
        state["exec_start"] = "{ argv[]=/usr/bin/python3 -I /usr/lib/sglang-ops/%s --settings x -- y ; }" % (
            systemd_unit.SUPERVISOR_MARK)
        return state


class FakeProbe:
    def __init__(self, clock, completion_ok=True):
        self.clock = clock
        self.calls = []
        self.completion_ok = completion_ok
        self.fail_next = 0

    def __call__(self, module_args):
        self.calls.append(dict(module_args))
        if self.fail_next:
            self.fail_next -= 1
            return {"failed": True, "msg": "probe crashed"}
        obs = {"ts": self.clock.now, "unit": {"active": "active", "sub": "running", "main_pid": 10, "restarts": 0},
               "gpus": [{"index": 0, "mem_used_mib": 1000, "mem_total_mib": 97887, "util_pct": 0}],
               "log": [{"ts": self.clock.now - 1, "msg": "TP0 tick"}],
               "http": {"health": 200, "completion": {"ok": self.completion_ok, "status": 200, "ms": 5.0}}}
        return {"observation": obs, "cursor": "cursor-%d" % len(self.calls), "missing": {}, "cost": {"cpu_s": 0.1}}


def make_procedure(tmp_path, scripts, host=None, clock=None, probe=None, detector=None, server=None, **overrides):
    """A RestartProcedure on a FakeHost; scripts: one detector script per attempt, or
    detector: the real detector class; server: a server_sync.ServerSync when the host is
    one node of a server (its node name is the procedure's host)."""
    clock = clock or Clock()
    host = host or FakeHost()
    probe = probe or FakeProbe(clock)
    scripts = list(scripts)
    detectors = []

    def new_detector(settings, observe_only=None):
        del settings, observe_only
        d = ScriptedDetector(scripts.pop(0))
        detectors.append(d)
        return d

    args = {"unit": UNIT, "port": 30001, "host": "127.0.0.1", "api_key_file": "/etc/sglang/x.yaml",
            "poll_s": 5.0, "max_attempts": 3, "start_timeout_s": 3600.0, "stop_timeout_s": 60.0, "failed_stop_timeout_s": 20.0,
            "release_timeout_s": 30.0, "gpu_idle_mib": 1024, "kill_orphans": False,
            "completion_model": "default", "detector": {}}
    args.update(overrides)
    lines = []

    def run_probe(module_args):
        return host.read(module_args) if module_args.get("observation") is False else probe(module_args)

    port = RemoteHostAccess(UNIT, host.shell, run_probe, lines.append, probe_args(args), clock=clock, sleep=clock.sleep)
    options = RestartOptions(args, DetectorSettings().with_overrides(args["detector"]), Backoff(base_s=10, max_s=60),
                             random.Random(1).random, detector or new_detector)
    if server is None:
        proc = RestartProcedure("gpu-host-1", options, port,
                                RunArtifacts(str(tmp_path / "artifacts"), "gpu-host-1", clock()))
    else:
        proc = RestartProcedure(server.node, options, port, RunArtifacts.at(server.node_folder()), server=server)
    return proc, host, probe, clock, lines, detectors
