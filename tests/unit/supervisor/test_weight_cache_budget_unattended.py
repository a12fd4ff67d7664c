"""A start nobody ran a playbook for, beside a later SGLang's daemon whose delivery budget runs
low: the engine's supervisor reads the budget with the daemon's --status as the playbook does
(host/weight_cache_budget.py, real processes and a real shell) and decides with the playbook's
decision (domain/warm_cold.decide): cold, the same reason, the daemon rotated, the budget left
in the metrics folder."""
import os
import signal
import subprocess
import sys
import time

from ansible_collections.sglang_ops.serving.plugins.module_utils.domain import weight_cache
from ansible_collections.sglang_ops.serving.plugins.module_utils.records import start_metrics
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.restart import weight_cache_step
from ansible_collections.sglang_ops.serving.tests.unit.supervisor.test_weight_cache_daemon_faults import (
    IN_UNIT, _previous_start, _sleeper, _templates, _write_ready)

# SGLang's daemon module as a later release answers `--status --gpu-id G` (that GPU's budget,
# from the file `budget` beside the package); run without --status it is the launcher (sleeps).
FAKE_DAEMON = """import json, os, sys, time
if "--status" in sys.argv:
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "..", "..", "..", "..", "budget")) as fh:
        most, left = map(int, fh.read().split())
    print(json.dumps({"gpu_id": int(sys.argv[sys.argv.index("--gpu-id") + 1]), "max_deliveries": most,
                      "reserved": most - left, "remaining": left, "pid": os.getpid()}))
else:
    time.sleep(600)
"""


def _launcher(tmp_path, max_deliveries, left):
    """The daemon's launcher: `python -m sglang.srt.weight_cache.daemon --model-path /m --tp-size 2`."""
    package = tmp_path / "later-sglang"
    folder = package.joinpath(*weight_cache.DAEMON_MODULE.split(".")[:-1])
    folder.mkdir(parents=True)
    below = folder
    while below != package:
        (below / "__init__.py").touch()
        below = below.parent
    (folder / "daemon.py").write_text(FAKE_DAEMON)
    (tmp_path / "budget").write_text("%d %d\n" % (max_deliveries, left))
    env = dict(os.environ, PYTHONPATH=str(package))
    return subprocess.Popen([sys.executable, "-m", weight_cache.DAEMON_MODULE, "--model-path", "/m", "--tp-size", "2"],
                            env=env)


def test_below_the_minimum_the_start_systemd_makes_is_cold_as_the_playbook_would_make_it(supervise, tmp_path):
    ready_t, dummy = _templates(tmp_path)
    launcher = _launcher(tmp_path, 3, 2)
    old_daemon, new_daemon = _sleeper(), None
    metrics = tmp_path / "metrics"
    metrics.mkdir()
    try:
        _write_ready(ready_t, old_daemon.pid, mtime=time.time() - 600)
        previous = _previous_start(tmp_path / "starts", "ready", "ready", "warm", time.time() - 5).record
        run = supervise(settings={"weight_cache_ready_template": ready_t, "start_timeout_s": 120,
                                  "weight_cache_min_deliveries": 3, "metrics_dir": str(metrics)},
                        prelude=IN_UNIT + "DAEMON_UNIT_PIDS = [%d]\n" % launcher.pid)
        run.wait_for(lambda: "stopping the weight cache daemon's processes %d" % old_daemon.pid in run.output(),
                     timeout=30, what="the daemon rotated")
        assert old_daemon.wait(10) == -signal.SIGTERM
        (tmp_path / "budget").write_text("5 5\n")       # the daemon's unit loaded again: a new budget
        new_daemon = _sleeper()
        _write_ready(ready_t, new_daemon.pid)
        (tmp_path / "budget").write_text("5 4\n")       # and the engine's attach took one
        budget_file = metrics / start_metrics.budget_file_name("sglang-test")
        run.wait_for(lambda: budget_file.exists(), timeout=90, what="the budget metric")
        record = run.record()
        the_playbooks = weight_cache_step.plan(
            weight_cache_step.DaemonView("sglang-test-weights", True, "active", "running",
                                         last_start={"verdict": "ready"}),
            False, previous, budget=weight_cache.DeliveryBudget(3, 1, 2, 2), min_deliveries=3)
        assert the_playbooks.reason == "delivery_budget_low: 2 of 3 deliveries left, below weight_cache_min_deliveries=3"
        assert (record["restart_kind"], record["restart_kind_reason"]) == ("cold", the_playbooks.reason)
        assert record["delivery_budget_before"] == {"supported": True, "max_deliveries": 3, "reserved": 1,
                                                    "remaining": 2, "gpus": 2}
        assert record["delivery_budget_after"]["remaining"] == 4
        text = budget_file.read_text()
        assert 'sglang_weight_cache_deliveries_remaining{unit="sglang-test"} 4' in text
        start_text = (metrics / start_metrics.file_name("sglang-test")).read_text()
        assert 'sglang_start_cold_reason_info{reason="%s",unit="sglang-test"} 1' % the_playbooks.reason in start_text
    finally:
        for proc in (launcher, old_daemon, new_daemon):
            if proc is not None:
                proc.kill()
                proc.wait()


def test_with_enough_left_the_daemon_is_kept(supervise, tmp_path):
    ready_t, dummy = _templates(tmp_path)
    launcher = _launcher(tmp_path, 5, 4)
    daemon = _sleeper()
    try:
        _write_ready(ready_t, daemon.pid, mtime=time.time() - 600)
        _previous_start(tmp_path / "starts", "ready", "ready", "warm", time.time() - 5)
        run = supervise(settings={"weight_cache_ready_template": ready_t, "start_timeout_s": 120,
                                  "weight_cache_min_deliveries": 3},
                        prelude=IN_UNIT + "DAEMON_UNIT_PIDS = [%d]\n" % launcher.pid)
        run.wait_for(lambda: run.notify.values("READY"), timeout=90, what="READY=1")
        run.wait_for(lambda: run.record().get("delivery_budget_after"), timeout=30, what="the budget after ready")
        assert daemon.poll() is None and "cold start" not in run.output()
        assert run.record()["delivery_budget_before"]["remaining"] == 4
    finally:
        for proc in (launcher, daemon):
            proc.kill()
            proc.wait()
