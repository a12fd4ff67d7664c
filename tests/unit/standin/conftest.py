"""Fixtures that run the SGLang stand-in as real processes and look at it from outside.

Every server runs in its own session (process group) on 127.0.0.1, on a port the kernel
hands out as free (other test runs on the machine, e.g. ansible-test units beside pytest,
start servers at the same time);
teardown SIGKILLs the group and any pid a test registers (a leftover rank), and the
pytest process is a child subreaper so orphaned ranks are reaped here.
"""
import ctypes
import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SRC = os.path.join(ROOT, "tests", "standin", "src")
PY = sys.executable
GPUS = 4

sys.path.insert(0, SRC)


def _subreaper():
    try:
        ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        pass


_subreaper()


def reap():
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def free_port():
    # The kernel picks ephemeral ports in turn, so one it just handed out is not handed
    # out again before the server binds it a moment later.
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def proc_stat(pid):
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            data = f.read().decode()
    except OSError:
        return None
    rest = data[data.rindex(")") + 2:].split()
    return {"state": rest[0], "ppid": int(rest[1]), "pgid": int(rest[2]),
            "cpu_ticks": int(rest[11]) + int(rest[12])}


def alive(pid):
    st = proc_stat(pid)
    return st is not None and st["state"] not in "ZX"


def cmdline(pid):
    with open(f"/proc/{pid}/cmdline", "rb") as f:
        return f.read()


def comm(pid):
    with open(f"/proc/{pid}/comm") as f:
        return f.read().strip()


def read_bytes(pid):
    with open(f"/proc/{pid}/io") as f:
        for line in f:
            if line.startswith("read_bytes:"):
                return int(line.split()[1])
    return 0


def wait_until(pred, timeout=30.0, interval=0.05, what="condition"):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        value = pred()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out waiting for {what}")


class StandIn:
    """One SGLang stand-in server started as `python -m sglang.launch_server`."""

    def __init__(self, tmp, env, args, port):
        self.tmp = tmp
        self.env = env
        self.port = port
        self.args = args
        self.out_path = os.path.join(tmp, f"server-{port}.log")
        self.extra_pids = set()

    def start(self):
        with open(self.out_path, "ab") as out:
            self.proc = subprocess.Popen([PY, "-m", "sglang.launch_server", *self.args], env=self.env,
                                         stdout=out, stderr=out, stdin=subprocess.DEVNULL,
                                         start_new_session=True)
        return self

    @property
    def pid(self):
        return self.proc.pid

    def output(self):
        with open(self.out_path, "rb") as f:
            return f.read().decode("utf-8", "replace")

    def lines(self):
        return self.output().split("\n")

    def wait_log(self, pattern, timeout=30.0):
        rx = re.compile(pattern)
        return wait_until(lambda: rx.search(self.output()), timeout, what=f"log {pattern!r}")

    def wait_ready(self, timeout=40.0):
        return self.wait_log(r"The server is fired up and ready to roll!", timeout)

    def group_pids(self):
        pids = []
        for name in os.listdir("/proc"):
            if name.isdigit():
                st = proc_stat(int(name))
                if st and st["pgid"] == self.pid and st["state"] not in "ZX":
                    pids.append(int(name))
        return sorted(pids)

    def children(self):
        return [p for p in self.group_pids() if p != self.pid]

    def ranks(self):
        out = {}
        for p in self.group_pids():
            try:
                title = cmdline(p).split(b"\0")[0].decode()
            except OSError:
                continue
            m = re.fullmatch(r"sglang::scheduler_TP(\d+)", title)
            if m:
                out[int(m.group(1))] = p
        return out

    def http(self, path, method="GET", body=None, key=None, timeout=3.0):
        """Status code, None for connection refused, "timeout" when no answer came."""
        req = urllib.request.Request(f"http://127.0.0.1:{self.port}{path}", method=method,
                                     data=json.dumps(body).encode() if body is not None else None,
                                     headers={"Content-Type": "application/json"})
        if key:
            req.add_header("Authorization", f"Bearer {key}")
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                return r.status, r.read()
        except urllib.error.HTTPError as e:
            return e.code, e.read()
        except (socket.timeout, TimeoutError):
            return "timeout", b""
        except urllib.error.URLError as e:
            if isinstance(e.reason, (socket.timeout, TimeoutError)):
                return "timeout", b""
            if isinstance(e.reason, ConnectionRefusedError):
                return None, b""
            raise

    def kill(self):
        for pid in self.group_pids() + sorted(self.extra_pids):
            try:
                os.kill(pid, signal.SIGCONT)
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            pass


def nvidia_smi(env, *args):
    r = subprocess.run([PY, "-m", "sglang.standin.nvidia_smi", *args], env=env, capture_output=True,
                       text=True, timeout=20)
    return r


def query_gpus(env):
    r = nvidia_smi(env, "--query-gpu=index,uuid,memory.used,memory.total,utilization.gpu,power.draw",
                   "--format=csv,noheader,nounits")
    assert r.returncode == 0, r.stdout + r.stderr
    rows = []
    for line in r.stdout.splitlines():
        i, uuid, used, total, util, power = line.split(", ")
        rows.append({"index": int(i), "uuid": uuid, "mem_used_mib": int(used), "mem_total_mib": int(total),
                     "util_pct": int(util), "power_w": float(power)})
    return rows


def query_apps(env):
    r = nvidia_smi(env, "--query-compute-apps=pid,gpu_uuid,used_memory", "--format=csv,noheader,nounits")
    assert r.returncode == 0, r.stdout + r.stderr
    return [{"pid": int(p), "gpu_uuid": u, "mem_mib": int(m)}
            for p, u, m in (line.split(", ") for line in r.stdout.splitlines())]


@pytest.fixture(scope="session")
def model_dir(tmp_path_factory):
    from sglang.standin.make_model import make_model
    path = tmp_path_factory.mktemp("model") / "tiny-model"
    make_model(str(path), shards=4, shard_mib=1)
    return str(path)


@pytest.fixture
def base_env(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SGLANG_", "PYTHON"))}
    env.update({
        "PYTHONPATH": SRC,
        "PYTHONUNBUFFERED": "1",
        "SGLANG_STANDIN_CONFIG": str(tmp_path / "config.json"),
        "SGLANG_STANDIN_STATE_DIR": str(tmp_path / "state"),
        "SGLANG_STANDIN_FAULTS_FILE": str(tmp_path / "faults.json"),
        "SGLANG_STANDIN_GPUS": str(GPUS),
        "SGLANG_STANDIN_TIME_SCALE": "0.04",
        "SGLANG_STANDIN_CUDA_GRAPH_BATCHES": "4",
        "SGLANG_STANDIN_SPIN_DUTY": "0.3",
        "SGLANG_DG_CACHE_DIR": str(tmp_path / "dg-cache"),
        "SGLANG_STANDIN_HEALTH_CHECK_TIMEOUT_S": "2",
    })
    return env


@pytest.fixture
def launch(tmp_path, base_env, model_dir):
    started = []

    def _launch(*extra, env=None, fault=None, tp=2, port=None):
        e = dict(base_env)
        e.update(env or {})
        if fault is not None:
            e["SGLANG_STANDIN_FAULT"] = json.dumps(fault)
        port = port or free_port()
        args = ["--model-path", model_dir, "--tp", str(tp), "--host", "127.0.0.1", "--port", str(port), *extra]
        server = StandIn(str(tmp_path), e, args, port).start()
        started.append(server)
        return server

    yield _launch
    for s in started:
        s.kill()
    kill_by_state_dir(base_env["SGLANG_STANDIN_STATE_DIR"])
    time.sleep(0.05)
    reap()


def kill_by_state_dir(state_dir):
    """Safety net: SIGKILL anything still running with this test's state directory."""
    marker = f"SGLANG_STANDIN_STATE_DIR={state_dir}".encode()
    for name in os.listdir("/proc"):
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue
        if marker in env:
            try:
                os.kill(int(name), signal.SIGKILL)
            except OSError:
                pass
