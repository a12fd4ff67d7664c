"""A scripted host, probe, detector and clock for driving the restart procedure without Ansible."""
import random

from ansible_collections.sglang_ops.serving.plugins.module_utils.detector import Assessment
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.retry_policy import Backoff
from ansible_collections.sglang_ops.serving.plugins.plugin_utils import host_checks as hc
from ansible_collections.sglang_ops.serving.plugins.plugin_utils import systemctl_verbs
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.artifacts import RunArtifacts
from ansible_collections.sglang_ops.serving.plugins.module_utils.detector_settings import DetectorSettings
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.remote_host_port import RemoteHostPort, probe_args
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.restart_procedure import RestartOptions, RestartProcedure

UNIT = "sglang-k26-ddtree"
VENV = "/opt/sglang/venv"
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
        verdict, phase, code, reason = self.script.pop(0) if len(self.script) > 1 else self.script[0]
        want = verdict == "suspect"
        return Assessment(obs["t"], phase, verdict, code, reason, want_stacks=want)


class FakeHost:
    """Answers the procedure's shell commands; records what was done to the unit."""

    def __init__(self, installed=True, holders=(), holders_after_stop=None, pids_after_stop=0, settle_polls=0,
                 reload_settles=False):
        self.settle_polls = settle_polls          # polls that still show the stop job running
        self.reload_settles = reload_settles      # a daemon-reload ends the stop job (missed cgroup-empty notice)
        self.installed = installed
        self.holders = list(holders)              # HOLDER rows before the first stop
        self.holders_after_stop = holders_after_stop  # rows after a stop (default: none)
        self.pids_after_stop = pids_after_stop    # listings that still show a process after stop
        self.events = []
        self.commands = []
        self.stopped = False

    def _holders_text(self):
        rows = self.holders if not self.stopped else (self.holders_after_stop or [])
        used = sum(int(r[2]) for r in rows if r[1] == "GPU-0")
        lines = ["GPU\t0\tGPU-0\t%d\t97887" % used]
        lines += ["HOLDER\t" + "\t".join(r) for r in rows]
        return "\n".join(lines) + "\n"

    def shell(self, cmd, timeout_s=None):
        self.commands.append(cmd)
        if cmd.startswith("systemctl show --property=LoadState"):
            if not self.installed:
                return 0, "LoadState=not-found\nActiveState=inactive\n", ""
            return 0, "LoadState=loaded\nActiveState=active\nExecStart=%s\n" % EXEC_START, ""
        if cmd == hc.active_state_cmd(UNIT):
            if self.settle_polls:
                self.settle_polls -= 1
                return 0, "ActiveState=deactivating\nSubState=stop-sigterm\n", ""
            return 0, "ActiveState=%s\nSubState=dead\n" % ("inactive" if self.stopped else "active"), ""
        if cmd == systemctl_verbs.DAEMON_RELOAD_CMD:
            self.events.append("daemon-reload")
            if self.reload_settles:
                self.settle_polls = 0
            return 0, "", ""
        if cmd == hc.gpu_holders_cmd(UNIT):
            return 0, self._holders_text(), ""
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
            self.holders_after_stop = [r for r in (self.holders_after_stop or []) if r[0] not in cmd.split()]
            self.holders = [r for r in self.holders if r[0] not in cmd.split()]
            return 0, "", ""
        if cmd == hc.unit_pids_cmd(UNIT):
            if self.pids_after_stop:
                self.pids_after_stop -= 1
                return 0, "77\tT\tsglang::scheduler_TP0 \n", ""
            return 0, "", ""
        if "systemctl kill" in cmd:
            self.events.append("sigkill")
            return 0, "", ""
        if "=== PYSPY" in cmd:
            return 0, ("=== PYSPY 11 sglang::scheduler_TP0 \nThread 11 (idle): \"MainThread\"\n"
                       "    wait (threading.py:320)\n"), ""
        if "journalctl" in cmd:
            return 0, "Nov 29 server_args=ServerArgs(api_key='sk-abcdef123456')\nLoad weight begin.\n", ""
        return 0, "output of: %s\n" % cmd.splitlines()[0][:60], ""


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


def make_procedure(tmp_path, scripts, host=None, clock=None, probe=None, detector=None, **overrides):
    """A RestartProcedure on a FakeHost; scripts: one detector script per attempt, or
    detector: the real detector class."""
    clock = clock or Clock()
    host = host or FakeHost()
    probe = probe or FakeProbe(clock)
    scripts = list(scripts)
    detectors = []

    def new_detector(settings):
        del settings
        d = ScriptedDetector(scripts.pop(0))
        detectors.append(d)
        return d

    args = {"unit": UNIT, "port": 30001, "host": "127.0.0.1", "api_key_file": "/etc/sglang/x.yaml",
            "poll_s": 5.0, "max_attempts": 3, "start_timeout_s": 3600.0, "stop_timeout_s": 60.0, "failed_stop_timeout_s": 20.0,
            "release_timeout_s": 30.0, "gpu_idle_mib": 1024, "kill_orphans": False,
            "completion_model": "default", "detector": {}}
    args.update(overrides)
    lines = []
    port = RemoteHostPort(UNIT, host.shell, probe, lines.append, probe_args(args), clock=clock, sleep=clock.sleep)
    options = RestartOptions(args, DetectorSettings().with_overrides(args["detector"]), Backoff(base_s=10, max_s=60),
                             random.Random(1).random, detector or new_detector)
    proc = RestartProcedure("gpu-host-1", options, port,
                            RunArtifacts(str(tmp_path / "artifacts"), "gpu-host-1", clock()))
    return proc, host, probe, clock, lines, detectors
