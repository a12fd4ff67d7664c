"""Run the unit's supervisor as systemd would: a real process (`python -I -S`: the standard
library only, as on the host, without this virtualenv's Ansible) with $NOTIFY_SOCKET set to
a datagram socket this test reads, and the SGLang stand-in (the test double of the
server, tests/standin) as its child, with the stand-in's nvidia-smi on short phases."""
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SRC = os.path.join(ROOT, "tests", "standin", "src")
# The weight cache daemon's processes are those of its unit (cgroup) in production; here the
# test's own fake daemon counts as one (an engine's supervisor trusts no other pid, and its
# SIGTERM then reaches a real process). The unit's process list (where the delivery budget's
# reader looks for the daemon's launcher) holds DAEMON_UNIT_PIDS: none unless a test names them.
IN_UNIT = ("from ansible_collections.sglang_ops.serving.plugins.module_utils.host import cgroup\n"
           "cgroup.in_unit = lambda pid, service: service == 'sglang-test-weights.service'\n"
           "cgroup.unit_processes = lambda service: [{'pid': p} for p in DAEMON_UNIT_PIDS]\n"
           "DAEMON_UNIT_PIDS = []\n")
SUPERVISOR = os.path.join(ROOT, "roles", "sglang_service", "files", "sglang-supervisor")
API_KEY = "sk-supervisor-test-key 'quoted' $x"
COLLECTIONS = os.path.join(ROOT, "collections")
# Runs `prelude` (Python) in the supervisor's process before the supervisor itself: how a
# test steps its wall clock or injects a fault into a real supervisor process.
BOOT = """import runpy, sys
sys.path.insert(0, %r)
%s
sys.argv[0] = %r
runpy.run_path(%r, run_name="__main__")
"""


def supervisor_command(settings_path, server, prelude=None, options=()):
    """The supervisor's command line as the unit runs it (standard library only); options
    go between the settings and `--` (--once)."""
    if prelude is None:
        return [sys.executable, "-I", "-S", SUPERVISOR, "--settings", str(settings_path), *options, "--", *server]
    boot = BOOT % (COLLECTIONS, prelude, SUPERVISOR, SUPERVISOR)
    return [sys.executable, "-I", "-S", "-c", boot, "--settings", str(settings_path), *options, "--", *server]


class NotifyListener:
    """The systemd side of sd_notify: every datagram, split into its KEY=value lines."""

    def __init__(self, path):
        self.path = path
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(path)
        self.sock.settimeout(0.2)
        self.messages = []
        self._stop = False
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        while not self._stop:
            try:
                data = self.sock.recv(65536)
            except socket.timeout:
                continue
            except OSError:
                return
            fields = dict(line.split("=", 1) for line in data.decode().split("\n") if "=" in line)
            self.messages.append((time.monotonic(), fields))

    def values(self, key):
        return [m[key] for dummy_t, m in list(self.messages) if key in m]

    def close(self):
        self._stop = True
        self.thread.join(2)
        self.sock.close()


class Run:
    def __init__(self, tmp, port, notify, proc, out_path, starts):
        self.tmp, self.port, self.notify, self.proc, self.out_path, self.starts = tmp, port, notify, proc, out_path, starts

    def output(self):
        with open(self.out_path, "rb") as fh:
            return fh.read().decode("utf-8", "replace")

    def wait(self, timeout=90):
        return self.proc.wait(timeout)

    def server_pids(self):
        """The server's PID (its process group) as the supervisor announced it."""
        return [int(m) for m in re.findall(r"sglang-supervisor: started \S+ \(pid (\d+)\)", self.output())]

    def server_alive(self):
        for pid in self.server_pids():
            for name in os.listdir("/proc"):
                if name.isdigit():
                    try:
                        with open("/proc/%s/stat" % name) as fh:
                            rest = fh.read().rsplit(")", 1)[1].split()
                    except OSError:
                        continue
                    if int(rest[2]) == pid and rest[0] not in "ZX":
                        return True
        return False

    def record(self):
        current = os.path.join(self.starts, "current")
        with open(os.path.join(current, "verdict.json")) as fh:
            return json.load(fh)

    def current_dir(self):
        return os.path.realpath(os.path.join(self.starts, "current"))

    def wait_for(self, pred, timeout=60, what="condition"):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if pred():
                return
            if self.proc.poll() is not None and not pred():
                raise AssertionError("supervisor exited (%s) before %s:\n%s" % (self.proc.returncode, what, self.output()[-3000:]))
            time.sleep(0.1)
        raise AssertionError("timed out waiting for %s" % what)


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory):
    sys.path.insert(0, SRC)
    from sglang.standin.make_model import make_model
    path = tmp_path_factory.mktemp("model") / "tiny-model"
    make_model(str(path), shards=4, shard_mib=1)
    return str(path)


@pytest.fixture
def supervise(tmp_path, model_dir):
    runs = []

    def _supervise(fault=None, settings=None, standin=None, api_key=None, tp=2, extra_args=(), prelude=None,
                   server=None, plain=False):
        # plain: a plain process watching one start (--once), no $NOTIFY_SOCKET: no systemd around it
        # One port allocator for every real server the tests run. Imported here: the collection
        # ships this folder's record tests but not the stand-in's tests (galaxy.yml).
        from standin.conftest import free_port
        port = free_port()
        nvsmi = tmp_path / "nvidia-smi"
        nvsmi.write_text("#!/bin/sh\nexec %s -m sglang.standin.nvidia_smi \"$@\"\n" % sys.executable)
        nvsmi.chmod(0o755)
        key_file = None
        if api_key:
            key_file = tmp_path / "unit.yaml"
            key_file.write_text('api-key: %s\n' % json.dumps(api_key))
        starts = str(tmp_path / "starts")
        conf = {"unit": "sglang-test", "base_url": "http://127.0.0.1:%d" % port, "model": "m",
                "starts_dir": starts, "poll_s": 0.5, "nvidia_smi": str(nvsmi), "stacks": False,
                "liveness_interval_s": 0.5, "liveness_timeout_s": 1.0, "liveness_misses": 2,
                "stop_timeout_s": 5, "extend_timeout_s": 30,
                "api_key_file": str(key_file) if key_file else None,
                "detector": {"stall_idle_window_s": 4, "suspect_after_s": 1.5}}
        conf.update(settings or {})
        settings_path = tmp_path / "supervisor.json"
        settings_path.write_text(json.dumps(conf))
        notify = NotifyListener(str(tmp_path / "notify"))
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SGLANG_", "PYTHON"))}
        env.update({"PYTHONPATH": SRC, "PYTHONUNBUFFERED": "1",
                    "SGLANG_STANDIN_CONFIG": str(tmp_path / "standin.json"),
                    "SGLANG_STANDIN_STATE_DIR": str(tmp_path / "state"),
                    "SGLANG_STANDIN_FAULTS_FILE": str(tmp_path / "faults.json"),
                    "SGLANG_STANDIN_GPUS": str(tp), "SGLANG_STANDIN_TIME_SCALE": "0.04",
                    "SGLANG_STANDIN_CUDA_GRAPH_BATCHES": "4", "SGLANG_STANDIN_SPIN_DUTY": "0.3",
                    "SGLANG_DG_CACHE_DIR": str(tmp_path / "dg-cache"),
                    "SGLANG_STANDIN_HEALTH_CHECK_TIMEOUT_S": "1"})
        if plain:
            env.pop("NOTIFY_SOCKET", None)
        else:
            env["NOTIFY_SOCKET"] = notify.path
        env.update(standin or {})
        if fault is not None:
            env["SGLANG_STANDIN_FAULT"] = json.dumps(fault)
        if server is None:
            server = [sys.executable, "-m", "sglang.launch_server", "--model-path", model_dir, "--port", str(port),
                      "--tp-size", str(tp), "--served-model-name", "m", "--enable-metrics", *extra_args]
            if key_file:
                server += ["--config", str(key_file)]
        out_path = str(tmp_path / "supervisor.out")
        with open(out_path, "wb") as out:
            proc = subprocess.Popen(supervisor_command(settings_path, server, prelude, ("--once",) if plain else ()),
                                    env=env, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True)
        run = Run(tmp_path, port, notify, proc, out_path, starts)
        runs.append(run)
        return run

    yield _supervise
    for run in runs:
        for pgid in [run.proc.pid] + run.server_pids():
            try:
                os.killpg(pgid, signal.SIGKILL)
            except OSError:
                pass
        run.proc.wait(5)
        run.notify.close()
