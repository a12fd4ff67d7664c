"""The weight cache daemon of the SGLang stand-in and a server attached to it
(`--weight-cache-mode client`): real processes, real Unix sockets, real files."""
import argparse
import ast
import dataclasses
import json
import os
import re
import shutil
import signal
import socket
import stat
import pickle
import struct
import subprocess
import tempfile
import time
import typing

import pytest

from .conftest import (PY, ROOT, StandIn, alive, cmdline, free_port, query_apps, query_gpus, read_bytes, reap,
                       wait_until)

REAL_VENV = os.path.join(ROOT, ".cache", "sglang-real", "venv")
REAL_DAEMON = os.path.join(REAL_VENV, "lib", "python3.11", "site-packages", "sglang", "srt", "weight_cache",
                           "daemon.py")
REAL_PARSE_ARGS = os.path.join(ROOT, "tests", "sglang_real", "parse_args.py")
ALL_READY = r"\] All 2 weight cache daemons on node 0 are ready \(pp_ranks=0\.\.0, tp_ranks=0\.\.1, " \
            r"dist_init_method=tcp://127\.0\.0\.1:\d+\)"


def _sigint_as_under_systemd():
    """SIGINT back to its default: a test run in the background of a non-interactive shell
    (make test's unit tests) inherits it ignored, which systemd never does."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


class Daemon(StandIn):
    """`python -m sglang.srt.weight_cache.daemon ...` in its own session."""

    def start(self):
        with open(self.out_path, "ab") as out:
            self.proc = subprocess.Popen([PY, "-m", "sglang.srt.weight_cache.daemon", *self.args], env=self.env,
                                         stdout=out, stderr=out, stdin=subprocess.DEVNULL,
                                         start_new_session=True, preexec_fn=_sigint_as_under_systemd)
        return self

    def daemons(self):
        return [p for p in self.children() if b"multiprocessing.spawn" in cmdline(p)]

    def wait_ready(self, timeout=30.0):
        try:
            return self.wait_log(ALL_READY, timeout)
        except AssertionError as e:
            raise AssertionError(f"{e}; the daemon's log:\n{self.output()[-3000:]}") from None


@pytest.fixture
def wc_env(base_env):
    # A Unix socket path has at most 107 bytes: pytest's tmp_path is too deep for one.
    folder = tempfile.mkdtemp(prefix="wc-", dir="/tmp")
    env = dict(base_env)
    env["SGLANG_WEIGHT_CACHE_SOCKET_TEMPLATE"] = os.path.join(folder, "sglang_weight_cache_{device_uuid}.sock")
    env["SGLANG_WEIGHT_CACHE_READY_TEMPLATE"] = os.path.join(folder, "sglang_weight_cache_{device_uuid}.ready")
    yield env
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def daemon(tmp_path, wc_env, model_dir, launch):
    started = []

    def _daemon(*extra, env=None, tp=2):
        e = dict(wc_env, **(env or {}))
        d = Daemon(str(tmp_path), e, ["--model-path", model_dir, "--tp-size", str(tp), *extra], free_port())
        d.log_name = f"daemon-{len(started)}"
        d.out_path = os.path.join(str(tmp_path), f"{d.log_name}.log")
        started.append(d.start())
        return d

    yield _daemon
    for d in started:
        d.kill()


@pytest.fixture
def client(launch, wc_env):
    def _client(*extra, env=None, fault=None, tp=2):
        return launch("--weight-cache-mode", "client", *extra, env=dict(wc_env, **(env or {})), fault=fault, tp=tp)
    return _client


def _gpu_uuid(env, index):
    return next(g["uuid"] for g in query_gpus(env) if g["index"] == index)


def _paths(env, index, kind):
    """The daemon's file of GPU `index`: the template filled with the UUID torch reports (no GPU- prefix)."""
    uuid = _gpu_uuid(env, index).removeprefix("GPU-")
    return env[f"SGLANG_WEIGHT_CACHE_{kind.upper()}_TEMPLATE"].format(device_uuid=uuid)


def _ask(sock_path, request):
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.settimeout(5)
        s.connect(sock_path)
        data = pickle.dumps(request)
        s.sendall(struct.pack("!I", len(data)) + data)
        header = s.recv(4, socket.MSG_WAITALL)
        (length,) = struct.unpack("!I", header)
        body = b""
        while len(body) < length:
            body += s.recv(length - len(body))
        return pickle.loads(body)


def _wait_gone(pids):
    """The daemons died with their launcher; reaped here (this test process is their subreaper)."""
    wait_until(lambda: not any(alive(p) for p in pids), 10, what="daemons gone with the launcher")
    reap()


def _real_worker_parser():
    """WeightCacheDaemonArgs.add_cli_args from the real 0.5.23 source, run on its own."""
    with open(REAL_DAEMON, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "WeightCacheDaemonArgs")
    namespace = {"argparse": argparse, "dataclasses": dataclasses, "Optional": typing.Optional}
    exec(compile(ast.Module(body=[cls], type_ignores=[]), REAL_DAEMON, "exec"), namespace)
    parser = argparse.ArgumentParser(add_help=False)
    namespace["WeightCacheDaemonArgs"].add_cli_args(parser)
    return parser


def _shape(parser):
    return sorted((tuple(a.option_strings), a.dest, a.default, getattr(a.type, "__name__", a.type),
                   type(a).__name__) for a in parser._actions)


def _skip_without_the_real_venv():
    # Asked when the test runs, not when it is collected: in `make unit` the roles tests run
    # first and build the venv (tests/sglang_real/setup) in the same session, so a fresh
    # clone runs these two instead of skipping them.
    if not os.path.exists(REAL_DAEMON):
        pytest.skip("the real SGLang venv (tests/sglang_real/setup) is absent")


def test_daemon_flags_are_the_real_daemons_flags():
    _skip_without_the_real_venv()
    from sglang.standin.wc_daemon import WeightCacheDaemonArgs
    ours = argparse.ArgumentParser(add_help=False)
    WeightCacheDaemonArgs.add_cli_args(ours)
    assert _shape(ours) == _shape(_real_worker_parser())


def test_weight_cache_server_flags_parse_as_the_real_parser_parses_them():
    _skip_without_the_real_venv()
    from sglang.srt.server_args import parse_args
    argv = ["--model-path", "/m", "--tp-size", "2", "--weight-cache-mode", "client",
            "--weight-cache-socket", "/run/x.sock", "--weight-cache-timeout", "60"]
    real = subprocess.run([os.path.join(REAL_VENV, "bin", "python"), REAL_PARSE_ARGS, *argv],
                          capture_output=True, text=True, timeout=120)
    assert real.returncode == 0, real.stderr[-2000:]
    real_args = json.loads(real.stdout)["args"]
    ours = vars(parse_args(argv))
    for key in ("weight_cache_mode", "weight_cache_socket", "weight_cache_timeout", "tp_size"):
        assert ours[key] == real_args[key], key
    defaults = vars(parse_args(["--model-path", "/m"]))
    assert (defaults["weight_cache_mode"], defaults["weight_cache_socket"], defaults["weight_cache_timeout"]) == \
        ("off", None, 1800)


def test_daemon_rejects_an_unknown_flag_as_argparse_does(wc_env, model_dir):
    r = subprocess.run([PY, "-m", "sglang.srt.weight_cache.daemon", "--model-path", model_dir, "--no-such-flag"],
                       env=wc_env, capture_output=True, text=True, timeout=30)
    assert r.returncode == 2
    assert "usage: sglang serve" in r.stderr and "unrecognized arguments: --no-such-flag" in r.stderr


def test_launcher_starts_one_daemon_per_rank_that_loads_then_listens(daemon, wc_env, model_dir):
    d = daemon()
    d.wait_ready()
    out = d.output()
    for rank in (0, 1):
        prefix = rf"\[Daemon gpu={rank} tp_rank={rank}\] INFO \[WeightCacheDaemon gpu={rank}"
        order = [rf"\] Launched weight cache daemon gpu={rank} pp_rank=0 tp_rank={rank} pid=\d+",
                 prefix + rf" tp_rank={rank}\] Loading model from disk: {re.escape(model_dir)}",
                 prefix + rf" tp_rank={rank}\] Model loaded from disk in [\d.]+s",
                 prefix + rf" tp_rank={rank}\] Exported \d+ tensors as IPC handles\.",
                 prefix + rf"\] Listening on {re.escape(_paths(wc_env, rank, 'socket'))}",
                 rf"\] Weight cache daemon pp_rank=0 tp_rank={rank} is ready", ALL_READY]
        at = 0
        for pattern in order:
            m = re.compile(pattern).search(out, at)
            assert m, f"{pattern!r} after offset {at}"
            at = m.end()
    assert "Multi-thread loading shards: 100% Completed | 4/4" in out
    pids = d.daemons()
    assert len(pids) == 2
    assert any(b"multiprocessing.resource_tracker" in cmdline(p) for p in d.children())
    for rank in (0, 1):
        ready = open(_paths(wc_env, rank, "ready")).read().splitlines()
        pid = int(ready[0].removeprefix("pid="))
        assert pid in pids
        config = ast.literal_eval(ready[1].removeprefix("config="))
        assert (config["tp_rank"], config["tp_size"], config["model_path"]) == (rank, 2, model_dir)
        st = os.stat(_paths(wc_env, rank, "socket"))
        assert stat.S_ISSOCK(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600
    held = {a["pid"]: a for a in query_apps(wc_env)}
    gpus = {g["index"]: g for g in query_gpus(wc_env)}
    for pid in pids:
        assert held[pid]["mem_mib"] > 0.7 * gpus[0]["mem_total_mib"]
    assert gpus[2]["mem_used_mib"] < 100


def test_daemon_answers_ping_and_query_config_in_sglangs_framing(daemon, wc_env, model_dir):
    daemon().wait_ready()
    sock = _paths(wc_env, 1, "socket")
    assert _ask(sock, {"type": "ping"}) == {"status": "ok"}
    answer = _ask(sock, {"type": "query_config"})
    assert answer["status"] == "ok" and answer["config"]["tp_rank"] == 1
    assert _ask(sock, {"type": "nonsense"})["status"] == "error"


def test_sigint_stops_every_daemon_and_removes_its_files(daemon, wc_env):
    d = daemon()
    d.wait_ready()
    pids = d.daemons()
    os.killpg(d.pid, signal.SIGINT)        # as systemd's KillSignal=SIGINT reaches every process
    assert d.proc.wait(timeout=20) == 0
    out = d.output()
    assert "Received KeyboardInterrupt, shutting down daemons" in out
    for rank in (0, 1):
        assert re.search(rf"\[WeightCacheDaemon gpu={rank}\] Received signal 2, shutting down", out)
        assert re.search(rf"\[WeightCacheDaemon gpu={rank}\] Shutdown complete", out)
        assert not os.path.exists(_paths(wc_env, rank, "ready"))
        assert not os.path.exists(_paths(wc_env, rank, "socket"))
    assert out.rstrip().endswith("All weight cache daemons have been terminated")
    assert not any(a["pid"] in pids for a in query_apps(wc_env))


def test_sigterm_to_the_launcher_leaves_stale_files_the_next_launch_removes(daemon, wc_env):
    d = daemon()
    d.wait_ready()
    pids = d.daemons()
    os.kill(d.pid, signal.SIGTERM)
    assert d.proc.wait(timeout=10) == -signal.SIGTERM
    _wait_gone(pids)
    ready = _paths(wc_env, 0, "ready")
    assert os.path.exists(ready) and os.path.exists(_paths(wc_env, 0, "socket"))
    assert "Shutdown complete" not in d.output()
    again = daemon()
    again.wait_ready()
    assert f"Removed stale daemon file: {ready}" in again.output()


def test_a_second_launch_is_refused_while_the_daemons_run(daemon, wc_env):
    daemon().wait_ready()
    second = daemon()
    assert second.proc.wait(timeout=30) == 1
    assert re.search(r"RuntimeError: Weight cache daemon for GPU [0-9a-f-]+ is already running \(pid=\d+, ready=",
                     second.output())


def test_a_daemon_fault_ends_the_launch_as_a_premature_exit(daemon):
    d = daemon(env={"SGLANG_STANDIN_WEIGHT_CACHE_FAULT": json.dumps(
        {"kind": "exit", "phase": "weight_load", "at": 1, "code": 3, "ranks": [1]})})
    assert d.proc.wait(timeout=30) == 1
    out = d.output()
    assert "Weight cache daemon exited prematurely with code 3" in out
    assert "RuntimeError: Weight cache daemon exited prematurely with code 3" in out


def test_server_attaches_to_ready_daemons_instead_of_reading_the_weights(daemon, client, wc_env):
    slow = {"SGLANG_STANDIN_WEIGHT_LOAD_S": "50"}          # a disk load takes 2 s here
    d = daemon(env=slow)
    d.wait_ready()
    daemon_pids = d.daemons()
    s = client(env=slow)
    s.wait_ready()
    out = s.output()
    for rank in (0, 1):
        order = [rf"TP{rank}\] Load weight begin\.",
                 rf"TP{rank}\] \[IpcModelLoader\] Requesting weights from daemon at "
                 rf"{re.escape(_paths(wc_env, rank, 'socket'))} with config: model=.*, tp=2/{rank}, quant=, "
                 r"dtype=torch\.bfloat16",
                 rf"TP{rank}\] \[IpcModelLoader\] Fetched \d+ tensors from daemon \(transport=torch_ipc\) in [\d.]+s",
                 rf"TP{rank}\] \[IpcModelLoader\] Zero-copy: mapped \d+ tensors \(0 new post-quant\), time=",
                 rf"TP{rank}\] \[IpcModelLoader\] Started daemon-liveness watchdog for pid=\d+",
                 rf"TP{rank}\] \[IpcModelLoader\] Loaded model via IPC \(mode=client\), total=",
                 rf"TP{rank}\] Load weight end\. elapsed=[\d.]+ s, .*mem usage=0\.00 GB\."]
        at = 0
        for pattern in order:
            m = re.compile(pattern).search(out, at)
            assert m, pattern
            at = m.end()
    assert "loading shards" not in out
    elapsed = [float(x) for x in re.findall(r"Load weight end\. elapsed=([\d.]+) s", out)]
    loaded = [float(x) for x in re.findall(r"Model loaded from disk in ([\d.]+)s", d.output())]
    assert max(elapsed) < 1.0 < 2.0 <= min(loaded)
    # less than one 1 MiB shard from disk (imports may come from disk on a busy machine; the
    # weights would be two shards per rank)
    assert all(read_bytes(p) < 1024 * 1024 for p in s.ranks().values())
    held = {}
    for app in query_apps(wc_env):
        held.setdefault(app["pid"], 0)
        held[app["pid"]] += app["mem_mib"]
    total = query_gpus(wc_env)[0]["mem_total_mib"]
    assert all(held[p] > 0.7 * total for p in daemon_pids)
    assert all(held[p] < 0.3 * total for p in s.ranks().values())
    assert "Serving" in d.output()


def test_server_without_daemon_falls_back_to_a_disk_load(client, wc_env):
    s = client()
    s.wait_ready()
    out = s.output()
    at = out.index(f"TP0] [IpcModelLoader] Daemon socket not found at {_paths(wc_env, 0, 'socket')}.")
    at = out.index("TP0] [IpcModelLoader] Weight cache not available or config mismatch, falling back to disk load",
                   at)
    assert out.index("Multi-thread loading shards: 100% Completed | 4/4", at)


def test_a_config_mismatch_ends_the_start(daemon, client):
    d = daemon()
    d.wait_ready()
    s = client("--dtype", "float16")
    assert s.proc.wait(timeout=30) == -signal.SIGKILL
    out = s.output()
    assert re.search(r"TP\d\] Scheduler hit an exception: Traceback", out)
    assert "RuntimeError: [IpcModelLoader] Daemon config mismatch!\n  Engine config: {" in out
    assert "Received sigquit from a child process. It usually means the child failed." in out
    assert "falling back to disk load" not in out
    assert re.search(r"\[WeightCacheDaemon gpu=\d\] Config mismatch: \{'dtype': \('torch\.bfloat16', "
                     r"'torch\.float16'\)\}", d.output())


def test_a_stale_socket_is_refused_not_a_fallback(daemon, client, wc_env):
    d = daemon()
    d.wait_ready()
    pids = d.daemons()
    os.kill(d.pid, signal.SIGTERM)
    d.proc.wait(timeout=10)
    _wait_gone(pids)
    s = client()
    assert s.proc.wait(timeout=30) == -signal.SIGKILL
    assert "but refused the connection. The daemon may have crashed after creating the socket." in s.output()


def test_server_kills_itself_when_its_daemon_dies(daemon, client):
    d = daemon()
    d.wait_ready()
    s = client()
    s.wait_ready()
    victim = d.daemons()[0]
    os.kill(victim, signal.SIGKILL)
    assert s.proc.wait(timeout=20) == -signal.SIGKILL
    assert re.search(r"TP\d\] \[IpcModelLoader\] Weight cache daemon \(pid=\d+\) died while this engine holds its "
                     r"weights via CUDA IPC\. The mapped weight pointers are now dangling; continuing would read "
                     r"freed GPU memory\. Terminating this process\.", s.output())


@pytest.mark.parametrize("phase", ["post_load", "cuda_graph"])
def test_a_stall_after_the_weights_holds_a_warm_start(daemon, client, phase):
    daemon().wait_ready()
    s = client(fault={"kind": "stall", "phase": phase, "mode": "idle"})
    s.wait_log(r"TP1\] \[IpcModelLoader\] Loaded model via IPC")
    if phase == "cuda_graph":
        s.wait_log(r"TP0\] Capture target decode CUDA graph begin\.")
    time.sleep(1.0)
    out = s.output()
    assert "fired up" not in out and "Capture target decode CUDA graph end" not in out
    assert (phase == "post_load") == ("Load weight end" not in out)
    assert all(alive(p) for p in s.ranks().values())


def test_weight_cache_with_speculative_decoding_is_refused(wc_env, model_dir):
    r = subprocess.run([PY, "-m", "sglang.launch_server", "--model-path", model_dir, "--weight-cache-mode", "client",
                        "--speculative-algorithm", "DFLASH"], env=wc_env, capture_output=True, text=True, timeout=30)
    assert r.returncode == 1
    assert "ValueError: --weight-cache-mode is not supported together with speculative decoding" in r.stderr


def test_engine_spawned_daemons_are_refused_with_a_clear_message(wc_env, model_dir):
    r = subprocess.run([PY, "-m", "sglang.launch_server", "--model-path", model_dir, "--weight-cache-mode", "daemon"],
                       env=wc_env, capture_output=True, text=True, timeout=30)
    assert r.returncode == 2
    assert "--weight-cache-mode daemon" in r.stderr and "is not imitated" in r.stderr


@pytest.fixture(scope="module")
def int4_model_dir(tmp_path_factory):
    """Kimi K2.6's kind of checkpoint: config.json says compressed-tensors INT4."""
    from sglang.standin.make_model import make_model
    path = tmp_path_factory.mktemp("int4") / "int4-model"
    make_model(str(path), shards=2, shard_mib=1, quantization="int4")
    return str(path)


REFUSED_INT4 = ("[weight_cache:{where}] quantization method 'compressed-tensors' is not verified for CUDA IPC "
                "zero-copy weight sharing.")


def test_the_demo_models_config_says_its_quantization(model_dir, int4_model_dir):
    with open(os.path.join(model_dir, "config.json"), encoding="utf-8") as f:
        assert "quantization_config" not in json.load(f)
    with open(os.path.join(int4_model_dir, "config.json"), encoding="utf-8") as f:
        quant = json.load(f)["quantization_config"]
    assert quant["quant_method"] == "compressed-tensors"
    assert quant["config_groups"]["group_0"]["weights"]["num_bits"] == 4


def test_the_daemon_refuses_an_int4_model_before_loading_a_weight(tmp_path, wc_env, int4_model_dir):
    d = Daemon(str(tmp_path), wc_env, ["--model-path", int4_model_dir, "--tp-size", "2"], free_port())
    d.out_path = os.path.join(str(tmp_path), "daemon-int4.log")
    d.start()
    try:
        assert d.proc.wait(timeout=30) == 1
    finally:
        d.kill()
    out = d.output()
    assert "UnsupportedQuantForIPCError: " + REFUSED_INT4.format(where="daemon") in out
    assert "Verified methods: '' (unquantized), 'fp8'." in out
    assert "Disable the weight cache (--weight-cache-mode off) for this model." in out
    assert "Loading model from disk" not in out and "Listening on" not in out


def test_the_client_refuses_an_int4_model_instead_of_falling_back(launch, wc_env, int4_model_dir):
    s = launch("--weight-cache-mode", "client", "--model-path", int4_model_dir, env=wc_env)
    assert s.proc.wait(timeout=30) == -signal.SIGKILL
    out = s.output()
    assert "sglang.srt.weight_cache.protocol.UnsupportedQuantForIPCError: " + REFUSED_INT4.format(where="client") in out
    assert "falling back to disk load" not in out


@pytest.mark.parametrize("method, config, held", [
    ("", None, True),
    ("fp8", {"quant_method": "fp8", "weight_block_size": [128, 128]}, True),
    ("fp8", {"quant_method": "fp8"}, False),
    ("compressed-tensors", {"quant_method": "compressed-tensors"}, False),
    ("awq", {"quant_method": "awq"}, False),
])
def test_the_stand_ins_predicate_answers_as_0_5_23s(base_env, method, config, held):
    code = ("import json, sys\nfrom sglang.srt.weight_cache.protocol import is_ipc_quant_supported\n"
            "print(json.dumps(is_ipc_quant_supported(sys.argv[1], json.loads(sys.argv[2]))))")
    r = subprocess.run([PY, "-c", code, method, json.dumps(config)], env=base_env, capture_output=True, text=True,
                       timeout=30, check=True)
    assert json.loads(r.stdout) is held


def _status(env, gpu, *extra):
    return subprocess.run([PY, "-m", "sglang.srt.weight_cache.daemon", "--status", "--model-path", "/unused",
                           "--gpu-id", str(gpu), *extra], env=env, capture_output=True, text=True, timeout=30)


def test_0_5_23s_daemon_has_no_delivery_budget_flags(wc_env, model_dir):
    r = _status(wc_env, 0)
    assert r.returncode == 2 and "unrecognized arguments: --status" in r.stderr


def test_a_later_sglangs_daemon_spends_its_delivery_budget_then_answers_budget_exhausted(daemon, client, wc_env):
    env = {"SGLANG_STANDIN_WEIGHT_CACHE_DELIVERY_BUDGET": "3"}
    budget_env = dict(wc_env, **env)
    d = daemon(env=env, tp=1)
    d.wait_log(r"\] All 1 weight cache daemons on node 0 are ready", 30)
    status = _status(budget_env, 0)
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout) == {"max_deliveries": 3, "reserved": 0, "remaining": 3,
                                         "pid": d.daemons()[0], "gpu_id": 0}
    for spent in (1, 2, 3):
        s = client(env=env, tp=1)
        s.wait_ready()
        assert "Loaded model via IPC (mode=client)" in s.output()
        s.kill()
        assert json.loads(_status(budget_env, 0).stdout)["remaining"] == 3 - spent
    s = client(env=env, tp=1)
    assert s.proc.wait(timeout=30) == -signal.SIGKILL
    out = s.output()
    assert "answered budget_exhausted: 3 of 3 deliveries of this daemon generation are spent" in out
    assert "falling back to disk load" not in out and "config mismatch" not in out.lower()
    assert "Delivery budget exhausted: 3 of 3 attaches served by this daemon" in d.output()
    assert json.loads(_status(budget_env, 0).stdout)["remaining"] == 0


def test_the_delivery_budget_flag_overrides_the_default_and_a_mismatch_spends_none(daemon, client, wc_env):
    env = {"SGLANG_STANDIN_WEIGHT_CACHE_DELIVERY_BUDGET": "3"}
    d = daemon("--weight-cache-max-deliveries", "5", env=env, tp=1)
    d.wait_log(r"\] All 1 weight cache daemons on node 0 are ready", 30)
    s = client("--dtype", "float16", env=env, tp=1)
    assert s.proc.wait(timeout=30) == -signal.SIGKILL
    assert json.loads(_status(dict(wc_env, **env), 0).stdout)["remaining"] == 5
