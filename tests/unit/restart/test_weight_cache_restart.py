"""Warm or cold per attempt on a host with SGLang's weight cache daemon (<unit>-weights):
the plan (weight_cache_step), the daemon's processes as expected GPU holders, and the
restart procedure on a scripted host, with its own watch and under the unit supervisor."""
import json
import re

import pytest

from ansible_collections.sglang_ops.serving.plugins.module_utils.host import systemd_unit
from ansible_collections.sglang_ops.serving.plugins.module_utils.domain import weight_cache
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.shared import host_checks
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.restart import weight_cache_step
from ansible_collections.sglang_ops.serving.plugins.plugin_utils.restart.restart_run import RemoteStepFailed

from ansible_collections.sglang_ops.serving.tests.unit.restart.restart_fakes import (
    UNIT, VENV, FakeHost, holder, make_procedure, progressing, ready, stalled)

DAEMON_UNIT = UNIT + "-weights"
DAEMON_ROOT = "/var/lib/sglang-ops/starts-weights"
ENGINE_ROOT = "/var/lib/sglang-ops/starts"
DAEMON_CMD = VENV + "/bin/python -m sglang.srt.weight_cache.daemon --model-path /models/k"
# The daemon unit's processes as /proc has them: its supervisor (MainPID) and the launcher.
DAEMON_ARGV = [VENV + "/bin/python", "-m", "sglang.srt.weight_cache.daemon", "--model-path", "/models/k", "--tp-size", "2"]
SUPERVISOR_ARGV = ["/usr/bin/python3", "-I", "/usr/lib/sglang-ops/" + systemd_unit.SUPERVISOR_MARK, "--"] + DAEMON_ARGV
SUPERVISED_EXEC = "{ argv[]=/usr/bin/python3 -I /usr/lib/sglang-ops/%s --settings x -- y ; }" % (
    systemd_unit.SUPERVISOR_MARK)


def view(healthy=True, **fields):
    start = {"dir": DAEMON_ROOT + "/20261130T090000Z-500", "verdict": "ready" if healthy else "failed"}
    return weight_cache_step.DaemonView(**dict(dict(unit=DAEMON_UNIT, installed=True, active="active",
                                                    sub="running", main_pid=500, pids=(500,), last_start=start),
                                               **fields))


# ---- the plan ---------------------------------------------------------------------------------
def test_a_healthy_daemon_makes_the_first_start_warm():
    planned = weight_cache_step.plan(view(), cold_requested=False)
    assert (planned.kind, planned.reason) == ("warm", "daemon_healthy")


def test_a_daemon_whose_unit_is_down_makes_the_start_cold_and_says_why():
    planned = weight_cache_step.plan(view(active="failed", sub="failed"), cold_requested=False)
    assert planned.kind == "cold"
    assert planned.reason == "daemon_not_healthy: %s is failed/failed" % DAEMON_UNIT


def test_a_daemon_whose_newest_start_is_not_ready_is_not_healthy():
    assert not view(healthy=False).healthy
    assert "newest start" in weight_cache_step.plan(view(healthy=False), False).reason


def test_a_warm_start_that_stalled_makes_the_next_one_cold():
    previous = {"verdict": "stalled", "reason_code": "stall_idle", "restart_kind": "warm"}
    assert weight_cache_step.plan(view(), False, previous).reason == "warm_start_failed"


def test_a_cold_start_that_stalled_for_a_reason_outside_the_weights_lets_the_next_one_be_warm():
    previous = {"verdict": "stalled", "reason_code": "stall_idle", "restart_kind": "cold"}
    assert weight_cache_step.plan(view(), False, previous).kind == "warm"


def test_a_failure_class_that_implicates_the_weights_makes_the_next_start_cold():
    previous = {"verdict": "failed", "reason_code": "weight_cache_daemon_died", "restart_kind": "cold"}
    assert weight_cache_step.plan(view(), False, previous).reason == "implicates_weights: weight_cache_daemon_died"


def test_the_cold_option_makes_the_start_cold_even_with_a_healthy_daemon():
    assert weight_cache_step.plan(view(), True).reason == "requested"


def test_the_cold_option_makes_the_first_start_cold_and_leaves_the_next_ones_to_the_rules():
    stalled_after_weights = {"verdict": "stalled", "reason_code": "stall_idle", "restart_kind": "cold"}
    assert weight_cache_step.plan(view(), True, stalled_after_weights).kind == "warm"
    implicating = {"verdict": "failed", "reason_code": "weight_cache_daemon_died", "restart_kind": "cold"}
    assert weight_cache_step.plan(view(), True, implicating).reason == "implicates_weights: weight_cache_daemon_died"


def test_the_weight_cache_is_used_when_the_option_says_so_or_the_daemon_unit_is_installed():
    missing = view(installed=False)
    assert weight_cache_step.in_use(None, view()) and not weight_cache_step.in_use(None, missing)
    assert not weight_cache_step.in_use(False, view())
    with pytest.raises(ValueError, match="not installed"):
        weight_cache_step.in_use(True, missing)


# ---- the daemon's GPU memory --------------------------------------------------------------------
def test_the_daemons_processes_are_expected_holders_and_a_stop_waits_for_the_engines_memory_only():
    check = host_checks.gpu_check({"available": True, "gpus": [{"index": 0, "uuid": "GPU-0", "mem_used_mib": 60500,
                                                                "mem_total_mib": 97887}],
                                   "holders": [holder(500, 60000, DAEMON_CMD)]})
    host_checks.classify_holders(check, VENV, expected_pids=(500,))
    assert [h.kind for h in check.holders] == ["weight_cache"]
    assert host_checks.gpu_released(check, 1024) == (True, "")
    # without the daemon's pids the same process is a leftover of the server's venv
    host_checks.classify_holders(check, VENV)
    assert [h.kind for h in check.holders] == ["orphan"]


# ---- a scripted host with the daemon -----------------------------------------------------------
class WeightCacheHost(FakeHost):
    """The engine unit (with its own watch, or supervised: start records scripted by
    engine_starts, one verdict per start) beside the daemon unit, whose restart takes
    daemon_start_polls reads of its start records to become ready (or daemon_start_verdict).
    budget: None plays SGLang 0.5.23 (its daemon refuses --status); N a later SGLang's, whose
    daemons serve N attaches per generation (one per engine start) and answer --status."""

    def __init__(self, daemon_healthy=True, supervised=False, engine_starts=(), daemon_start_polls=2,
                 daemon_start_verdict="ready", systemd_restarts=False, budget=None, reserved=0):
        daemon = holder(500, 60000, DAEMON_CMD)
        super().__init__(holders=[holder(10, 20000, "sglang::scheduler_TP0", in_unit=True), daemon],
                         holders_after_stop=[daemon])
        self.supervised = supervised
        self.daemon = {"active": "active" if daemon_healthy else "failed",
                       "sub": "running" if daemon_healthy else "failed", "main_pid": 500, "pids": [500, 501],
                       "starts": [{"dir": DAEMON_ROOT + "/20261130T090000Z-500",
                                   "verdict": "ready" if daemon_healthy else "failed", "reason_code": "ready"}]}
        self.daemon_polls_left = None
        self.daemon_start_polls, self.daemon_start_verdict = daemon_start_polls, daemon_start_verdict
        self.engine_script = list(engine_starts)
        self.engine_records = [{"dir": ENGINE_ROOT + "/20261130T090500Z-10", "verdict": "ready",
                                "reason_code": "ready"}]
        self.engine_running = None     # the engine start in progress (supervised), ends at the next read
        # Restart=on-failure: a failed supervised start is followed by systemd's own start of
        # the engine unit alone, at the read after the one that showed the failure.
        self.systemd_restarts = systemd_restarts
        self.systemd_restart_due = False
        self.budget, self.reserved = budget, reserved

    def _attach(self):
        """An engine start takes one delivery of the daemon generation."""
        self.reserved += 1

    def _status(self, cmd):
        if self.budget is None:
            return 2, "", "usage: sglang serve [-h] ...\nsglang serve: error: unrecognized arguments: --status\n"
        return 0, "".join(json.dumps({"max_deliveries": self.budget, "reserved": self.reserved,
                                      "remaining": max(0, self.budget - self.reserved), "pid": self.daemon["pids"][1],
                                      "gpu_id": int(g)}) + "\n" for g in re.findall(r"--gpu-id (\d+)", cmd)), ""

    def _unit_state(self):
        state = super()._unit_state()
        if self.supervised:
            state["exec_start"] = SUPERVISED_EXEC
            if state["installed"] and not self.stopped and self.engine_records[0]["verdict"] not in ("ready",):
                state["active"], state["sub"] = "activating", "auto-restart"
        return state

    def read_daemon(self, module_args):
        d = self.daemon
        if self.daemon_polls_left is not None and module_args.get("starts"):
            self.daemon_polls_left -= 1
            if self.daemon_polls_left <= 0:
                self.daemon_polls_left = None
                d["starts"][0].update(verdict=self.daemon_start_verdict, reason_code=self.daemon_start_verdict
                                      if self.daemon_start_verdict == "ready" else "fatal_error",
                                      ready_after_s=50.0, reason="weights on every GPU")
                if self.daemon_start_verdict == "ready":
                    d["active"], d["sub"] = "active", "running"
                else:
                    d["active"], d["sub"] = "failed", "failed"
        return {"missing": {}, "cursor": None, "unit_processes": [{"pid": p, "state": "S", "cmdline": DAEMON_CMD}
                                                                  for p in d["pids"]],
                "starts": {"current": None, "starts": list(d["starts"])},
                "unit_state": {"installed": True, "load_state": "loaded", "active": d["active"], "sub": d["sub"],
                               "main_pid": d["main_pid"], "result": "success", "exec_start": SUPERVISED_EXEC,
                               "venv": None}}

    def read(self, module_args):
        if self.supervised and module_args.get("starts") and not str(module_args.get("unit")).endswith("-weights"):
            if self.systemd_restart_due and self.engine_running is None:
                self.systemd_restart_due = False
                self.events.append("systemd restart")
                self._attach()
                self._engine_start()
            elif self.engine_running is not None:
                verdict = self.engine_running
                self.engine_running = None
                self.engine_records[0].update(verdict=verdict, reason_code="ready" if verdict == "ready" else
                                              "stall_idle", ready_after_s=5.0 if verdict == "ready" else None,
                                              # the engine's supervisor: it attached to the daemon's weights
                                              restart_kind="warm", restart_kind_reason=None)
                # a failed start leaves the unit in auto-restart: systemd's RestartSec= has not passed yet
                self.systemd_restart_due = self.systemd_restarts and verdict != "ready"
            res = super().read(module_args)
            res["starts"] = {"current": None, "starts": list(self.engine_records)}
            return res
        return super().read(module_args)

    def _engine_start(self):
        n = len(self.engine_records)
        self.engine_records.insert(0, {"dir": ENGINE_ROOT + "/20261130T1%05dZ-%d" % (n, 10 + n), "verdict": "running",
                                       "phase": "weight_load", "started_at": 1796000000.0 + n})
        self.engine_running = self.engine_script.pop(0)

    def shell(self, cmd, timeout_s=None):
        if "restart --no-block" in cmd and DAEMON_UNIT in cmd:
            self.events.append("daemon restart")
            d = self.daemon
            d["main_pid"] += 100
            d["pids"] = [d["main_pid"], d["main_pid"] + 1]
            d["active"], d["sub"] = "activating", "start"
            d["starts"].insert(0, {"dir": DAEMON_ROOT + "/20261130T1%05dZ-%d" % (len(d["starts"]), d["main_pid"]),
                                   "verdict": "running", "phase": "weight_load", "started_at": 1796000000.0})
            self.daemon_polls_left = self.daemon_start_polls
            self.holders_after_stop = [holder(d["main_pid"], 60000, DAEMON_CMD)]
            self.reserved = 0
            return 0, "", ""
        if "/proc/$p/cmdline" in cmd:
            self.commands.append(cmd)
            d = self.daemon
            return 0, "".join("%d\x1f%s\x1f\n" % (pid, "\x1f".join(argv))
                              for pid, argv in zip(d["pids"], (SUPERVISOR_ARGV, DAEMON_ARGV))), ""
        if weight_cache.STATUS_FLAG in cmd and "runuser" in cmd:
            self.commands.append(cmd)
            return self._status(cmd)
        if "systemctl start" in cmd and "reset-failed" in cmd:
            self._attach()
        if "restart --no-block" in cmd:
            self._attach()
            self.events.append("engine restart")
            self.stopped = False
            self._engine_start()
            return 0, "", ""
        return super().shell(cmd, timeout_s)


def test_a_warm_restart_restarts_the_engine_alone_and_never_touches_the_daemon(tmp_path):
    host = WeightCacheHost()
    proc, host, probe, clock, lines, dummy_cmd = make_procedure(tmp_path, [[progressing(), ready()]], host=host,
                                                                kill_orphans=True)
    res = proc.restart()
    assert res["outcome"] == "ready" and (res["restart_kind"], res["restart_kind_reason"]) == ("warm", "daemon_healthy")
    assert host.events == ["stop", "start"]             # no kill -9 of the daemon's PIDs, no daemon restart
    assert host.daemon["main_pid"] == 500
    assert any(line.startswith("attempt 1: warm restart") for line in lines)
    with open(res["run_json"]) as fh:
        run = json.load(fh)
    assert run["restart_kind"] == "warm" and run["attempts"][0]["restart_kind"] == "warm"
    assert run["weight_cache"]["daemon_before"]["main_pid"] == 500 and run["weight_cache"]["cold_restarts"] == []
    assert "warm restart (daemon_healthy)" in res["msg"]


def test_a_warm_start_that_stalls_is_followed_by_a_cold_one_that_restarts_the_daemon_first(tmp_path):
    host = WeightCacheHost()
    proc, host, *dummy_rest = make_procedure(
        tmp_path, [[stalled("stall_idle", "cuda_graph")], [progressing(), ready()]], host=host)
    res = proc.restart()
    assert res["outcome"] == "ready"
    assert host.events == ["stop", "start", "stop", "daemon restart", "start"]
    kinds = [(a["restart_kind"], a["restart_kind_reason"]) for a in res["attempts"]]
    assert kinds == [("warm", "daemon_healthy"), ("cold", "warm_start_failed")]
    cold = res["weight_cache"]["cold_restarts"]
    assert [(c["before_attempt"], c["outcome"]) for c in cold] == [(2, "ready")]


def test_a_daemon_that_does_not_come_up_is_handed_over_before_the_engine_starts(tmp_path):
    host = WeightCacheHost(daemon_healthy=False, daemon_start_verdict="failed")
    proc, host, *dummy_rest = make_procedure(tmp_path, [[ready()]], host=host)
    res = proc.restart()
    assert res["failed"] and res["outcome"] == "gave_up"
    assert host.events == ["stop", "daemon restart"]     # the engine was never started
    assert "weight cache daemon" in res["msg"]


def test_weight_cache_false_leaves_the_restart_as_it_was(tmp_path):
    host = WeightCacheHost(daemon_healthy=False)
    proc, host, *dummy_rest = make_procedure(tmp_path, [[ready()]], host=host, weight_cache=False, kill_orphans=True)
    res = proc.restart()
    assert "restart_kind" not in res and "daemon restart" not in host.events
    assert "kill -9 500" in host.events                 # without the weight cache its pid is a leftover


def test_weight_cache_true_without_the_daemons_unit_fails_before_anything_changes(tmp_path):
    proc, host, *dummy_rest = make_procedure(tmp_path, [[ready()]], host=FakeHost(), weight_cache=True)
    with pytest.raises(RemoteStepFailed, match="weights is not installed"):
        proc.restart()
    assert host.events == []


def _supervised(tmp_path, host, **overrides):
    proc, host, probe, clock, lines, dummy_cmd = make_procedure(tmp_path, [], host=host, **overrides)
    return proc, host, lines


def test_a_supervised_warm_restart_is_one_restart_of_the_engine_unit(tmp_path):
    host = WeightCacheHost(supervised=True, engine_starts=["ready"])
    proc, host, lines = _supervised(tmp_path, host)
    res = proc.restart()
    assert res["outcome"] == "ready" and host.events == ["engine restart"]
    assert res["attempts"][0]["restart_kind"] == "warm"
    assert lines[0].startswith("warm restart of %s" % UNIT) and "MainPID 500" in lines[0]


def test_a_supervised_warm_start_that_fails_escalates_once_to_a_cold_restart_of_both_units(tmp_path):
    host = WeightCacheHost(supervised=True, engine_starts=["stalled", "ready"])
    proc, host, lines = _supervised(tmp_path, host)
    res = proc.restart()
    assert res["outcome"] == "ready"
    assert host.events == ["engine restart", "stop", "daemon restart", "engine restart"]
    first, *rest = res["attempts"]
    assert (first["restart_kind"], first["action"]) == ("warm", "restarted cold")
    assert (rest[-1]["restart_kind"], rest[-1]["restart_kind_reason"]) == ("cold", "warm_start_failed")
    assert res["restart_kind"] == "cold" and any("the next start is cold (warm_start_failed)" in ln for ln in lines)


def test_the_cold_option_restarts_the_daemon_before_the_supervised_engine(tmp_path):
    host = WeightCacheHost(supervised=True, engine_starts=["ready"])
    proc, host, lines = _supervised(tmp_path, host, cold=True)
    res = proc.restart()
    assert host.events == ["stop", "daemon restart", "engine restart"]
    assert (res["restart_kind"], res["restart_kind_reason"]) == ("cold", "requested")


def test_a_cold_start_that_stalls_after_its_weights_is_followed_by_systemds_warm_start_of_the_engine(tmp_path):
    host = WeightCacheHost(supervised=True, engine_starts=["stalled", "ready"], systemd_restarts=True)
    proc, host, lines = _supervised(tmp_path, host, cold=True)
    res = proc.restart()
    assert res["outcome"] == "ready"
    assert host.events == ["stop", "daemon restart", "engine restart", "systemd restart"]   # the daemon once
    kinds = [(a["restart_kind"], a["restart_kind_reason"]) for a in res["attempts"]]
    assert kinds == [("cold", "requested"), ("warm", "daemon_healthy")]
    assert (res["restart_kind"], res["restart_kind_reason"]) == ("warm", "daemon_healthy")
    assert [c["main_pid"] for c in res["weight_cache"]["cold_restarts"]] == [host.daemon["main_pid"]] == [600]


def test_check_mode_says_the_daemons_state_and_whether_the_next_restart_would_be_warm(tmp_path):
    proc, host, probe, *dummy_rest = make_procedure(tmp_path, [[progressing()]], host=WeightCacheHost())
    res = proc.observe_once()
    assert res["weight_cache"]["main_pid"] == 500 and res["weight_cache"]["next_restart"] == "warm"
    assert res["weight_cache_summary"].startswith("weight cache daemon %s healthy (MainPID 500)" % DAEMON_UNIT)
    assert res["would"].endswith("warm: the engine alone, the weight cache daemon keeps the weights on the GPUs")
    assert host.events == []
