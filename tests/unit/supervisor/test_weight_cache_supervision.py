"""The supervisor of the weight cache daemon's unit (serves weight_cache: ready by its ready
files, then a dead daemon is a failure a restart helps), and of an engine that attaches to
it (waits for the daemon, records the start's kind). Real processes: the supervisor, a
daemon launcher that writes ready files naming its real children, the stand-in engine."""
import os
import signal
import subprocess
import sys

from ansible_collections.sglang_ops.serving.plugins.module_utils.records.trace_format import read_trace
from ansible_collections.sglang_ops.serving.tests.unit.supervisor.conftest import IN_UNIT, SRC

# The daemon's launcher as SGLang's: the lines it prints, one child per GPU, the ready files
# (pid= of the child), and an exit as soon as a child dies.
LAUNCHER = r"""
import os, subprocess, sys, time
sys.path.insert(0, %r)
from sglang.standin.gpustate import gpu_uuid
template = os.environ["SGLANG_WEIGHT_CACHE_READY_TEMPLATE"]
gpus = int(os.environ["SGLANG_STANDIN_GPUS"])
for g in range(gpus):
    print("[WeightCacheDaemon gpu=%%d tp_rank=%%d] Loading model from disk: /models/m" %% (g, g), flush=True)
time.sleep(1.0)
kids = [subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"]) for g in range(gpus)]
for g, kid in enumerate(kids):
    print("[WeightCacheDaemon gpu=%%d tp_rank=%%d] Model loaded from disk in 1.00s" %% (g, g), flush=True)
    with open(template.replace("{device_uuid}", gpu_uuid(g).removeprefix("GPU-")), "w") as f:
        f.write("pid=%%d\nconfig={'tp_size': %%d}\n" %% (kid.pid, gpus))
print("All %%d weight cache daemons on node 0 are ready" %% gpus, flush=True)
while all(k.poll() is None for k in kids):
    time.sleep(0.2)
sys.exit(1)
""" % SRC


def _template(tmp_path):
    folder = tmp_path / "run-weights"
    folder.mkdir(exist_ok=True)
    return str(folder / "sglang_weight_cache_{device_uuid}.ready")


def _daemon(supervise, tmp_path):
    template = _template(tmp_path)
    run = supervise(settings={"serves": "weight_cache", "weight_cache_ready_template": template},
                    standin={"SGLANG_WEIGHT_CACHE_READY_TEMPLATE": template},
                    server=[sys.executable, "-c", LAUNCHER])
    return run, template


def test_the_daemon_is_ready_when_every_gpus_ready_file_names_a_live_pid(supervise, tmp_path):
    run, template = _daemon(supervise, tmp_path)
    run.wait_for(lambda: run.notify.values("READY"), what="READY=1")
    ready_msg = [m for dummy_t, m in run.notify.messages if "READY" in m][0]
    assert "weight cache ready on 2 GPUs" in ready_msg["STATUS"]
    assert len(os.listdir(os.path.dirname(template))) == 2
    header, observations = read_trace(os.path.join(run.current_dir(), "trace.jsonl"))
    assert header["weight_cache"] == {"serves": "weight_cache"}
    assert all("http" not in o for o in observations)           # no HTTP asked of the daemon
    assert observations[-1]["weight_cache"]["healthy"] is True
    assert "weight_load" in run.record()["phase_durations"]     # its load, from its lines
    run.wait_for(lambda: run.notify.values("WATCHDOG"), timeout=20, what="WATCHDOG=1")
    os.kill(run.proc.pid, signal.SIGTERM)
    assert run.wait(30) == 0


def test_a_daemon_that_dies_after_ready_fails_with_a_class_a_restart_helps(supervise, tmp_path):
    run, template = _daemon(supervise, tmp_path)
    run.wait_for(lambda: run.notify.values("READY"), what="READY=1")
    folder = os.path.dirname(template)
    ready = os.path.join(folder, sorted(os.listdir(folder))[0])
    with open(ready) as fh:
        pid = int(fh.readline().split("=")[1])
    os.kill(pid, signal.SIGKILL)
    assert run.wait(30) == 79
    record = run.record()
    assert record["reason_code"] == "weight_cache_daemon_died" and record["verdict"] == "failed"
    assert "systemd restarts the unit" in run.output()


def test_an_engine_waits_for_its_daemon_then_records_the_kind_of_its_start(supervise, tmp_path):
    template = _template(tmp_path)
    run = supervise(settings={"weight_cache_ready_template": template, "start_timeout_s": 120}, prelude=IN_UNIT)
    run.wait_for(lambda: any(s.startswith("waiting for the weight cache daemon") for s in run.notify.values("STATUS")),
                 what="the wait for the daemon")
    assert not run.server_pids()                                 # the engine is not started yet
    daemon = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        sys.path.insert(0, SRC)
        from sglang.standin.gpustate import gpu_uuid
        for g in range(2):
            with open(template.replace("{device_uuid}", gpu_uuid(g).removeprefix("GPU-")), "w") as fh:
                fh.write("pid=%d\nconfig={}\n" % daemon.pid)
        run.wait_for(lambda: run.notify.values("READY"), timeout=90, what="READY=1")
        header, observations = read_trace(os.path.join(run.current_dir(), "trace.jsonl"))
        # launched warm (the daemon was ready) ...
        assert header["weight_cache"] == {"serves": "engine", "restart_kind": "warm", "restart_kind_reason": None}
        assert any(s.endswith(" \u00b7 warm") for s in run.notify.values("STATUS"))
        # ... but the engine never said it attached (no --weight-cache-mode client): a cold start
        record = run.record()
        assert (record["restart_kind"], record["restart_kind_reason"]) == ("cold", "not_attached")
        assert "cold start" in [m for dummy_t, m in run.notify.messages if "READY" in m][0]["STATUS"]
    finally:
        daemon.kill()
        daemon.wait()
